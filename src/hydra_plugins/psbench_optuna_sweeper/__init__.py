"""``hydra/sweeper=psbench_optuna``: a Hydra sweeper driving an Optuna ≥ 4 study.

The published ``hydra-optuna-sweeper`` pins ``optuna<3``, whose sqlite storage fails with
SQLAlchemy 2; this plugin is psbench's own replacement (DESIGN §5). It lives in the
``hydra_plugins`` namespace package under ``src/`` so an editable install makes Hydra
discover it. Modules:

* :mod:`.config` — the structured config (``hydra.sweeper.*``) registered in Hydra's ConfigStore;
* :mod:`._search_space` — Hydra sweep syntax → Optuna distributions, ``cases``, ``derived``
  values and ``constraints`` (μλ = const) as safe arithmetic expressions;
* :mod:`.sweeper` — :class:`~.sweeper.PsbenchOptunaSweeper`, light because Hydra imports every
  plugin module at each start; it hands over to
* :mod:`._impl` — the ask → launch → tell loop with resume, failures and the Pareto front
  (imports Optuna; Hydra skips ``_`` modules when it scans for plugins).

Objective contract: a job reports its objectives as keys of ``summary.json`` in its output
dir (``psbench.cli`` writes it: ``test_error``, ``sim_time_s``, ``staleness_mean``, …). A task
whose return value is a mapping is read by key, and a plain number is the value of a single
objective. See the README section "Sweeps and Optuna searches".
"""
