"""``hydra/sweeper=psbench_optuna``: a Hydra sweeper driving an Optuna ≥ 4 study.

The published ``hydra-optuna-sweeper`` pins ``optuna<3``, whose sqlite storage fails with
SQLAlchemy 2; this plugin is psbench's own replacement. It lives in the
``hydra_plugins`` namespace package under ``src/`` so an editable install makes Hydra
discover it. Modules:

* :mod:`.config` — the structured config (``hydra.sweeper.*``) registered in Hydra's ConfigStore;
* :mod:`._search_space` — Hydra sweep syntax → Optuna distributions, ``cases``, ``derived``
  values and ``constraints`` (μλ = const) as safe arithmetic expressions;
* :mod:`._identity` — a study's identity (search space + fixed overrides + sampler + objectives),
  its hash and the default sweep dir ``multirun/optuna/<study_name>-<hash>``;
* :mod:`._results` — what a job reports, trial outcomes, ``optimization_results.yaml``;
* :mod:`.sweeper` — :class:`~.sweeper.PsbenchOptunaSweeper`, light because Hydra imports every
  plugin module at each start; it hands over to
* :mod:`._impl` — the ask → launch → tell loop with resume, failures and the Pareto front
  (imports Optuna; Hydra skips ``_`` modules when it scans for plugins).

Objective contract: a job reports its objectives as keys of ``summary.json`` in its output
dir (``psbench.cli`` writes it: ``test_error``, ``sim_time_s``, ``staleness_mean``, …). Any other
Hydra app works as with hydra-optuna-sweeper: a returned number is the single objective, a
sequence holds one value per objective and a mapping is read by key. An objective a job does not
report stops the study. See the README section "Sweeps, Optuna searches and the report".
"""
