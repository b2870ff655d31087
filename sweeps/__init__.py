"""Entry points that reproduce one paper table or figure each: ``python sweeps/<name>.py scale=ci|small|paper``.

Each entry point is a thin list of overrides per scale on top of a preset in
``src/psbench/conf/experiment/<paper>/``; :func:`sweeps._runner.main` runs it as one ``psbench -m`` study of
the ``psbench_optuna`` sweeper with a fixed study name and sweep dir
(``<root>/sweeps/<name>_<scale>``), so re-running resumes and runs only what is missing.
Results go to MLflow (``<root>/mlflow.db``, tags ``paper``, ``table``/``figure``, ``scale``,
``case``, ``optuna_study``); ``python -m analysis`` turns them into the report. Further overrides pass through
to ``psbench``, e.g. ``hydra/launcher=submitit_slurm hydra.sweeper.n_jobs=8``; each job asks the launcher
for ``resources=<scale>`` (``src/psbench/conf/resources/``).
"""
