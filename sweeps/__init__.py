"""The paper entry points: ``python -m sweeps <entry> scale=ci|small|full|paper_jpeg|paper [--serial] [override …]``.

Every entry is a row of ``sweeps/entries.yaml`` (:mod:`sweeps.entries`): a preset in
``src/psbench/conf/experiment/<paper>/`` and a list of overrides per scale. :mod:`sweeps.__main__` runs it as one
``psbench -m`` study of the ``psbench_optuna`` sweeper with a fixed study name and sweep dir
(``<root>/sweeps/<name>_<scale>``), so re-running resumes and runs only what is missing;
``python -m sweeps.run_all scale=…`` runs every entry that has the scale, then the report. Results go to MLflow
(``<root>/mlflow.db``, tags ``paper``, ``table``/``figure``, ``scale``, ``case``, ``optuna_study``); ``python -m
analysis`` turns them into the report. Further overrides pass through to ``psbench``, e.g.
``hydra/launcher=submitit_slurm hydra.sweeper.n_jobs=8``; each job asks the launcher for ``resources=<scale>``
(``src/psbench/conf/resources/``). Run it from the repository root (``sweeps`` is not installed), as
``python -m analysis``.
"""
