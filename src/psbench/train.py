"""Run one job from a composed config: build its :class:`~psbench.run_setup.RunSetup`, and the engine it names
executes it.

:func:`train` is the Python API of one run (``psbench`` itself, ``cli.py``, builds the setup with :func:`prepare`
before it creates the MLflow run, then calls :func:`run`): ``engine=sim`` (default) trains on the simulated
schedule with Lightning (:func:`psbench.strategy.executor.train_sim`); ``engine=dist`` runs real PS and learner
processes (:func:`psbench.distributed.launcher.train_dist`). Both return a :class:`~psbench.summary.RunSummary`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from psbench.assemble import build_run
from psbench.run_setup import RunSetup
from psbench.summary import RunSummary


def prepare(cfg: DictConfig | Mapping[str, Any], plan=None) -> RunSetup:
    """The :class:`RunSetup` of ``cfg`` and the checks it makes possible (the engine's memory and device, a resumed
    checkpoint's schedule)."""
    setup = build_run(cfg)
    if setup.engine == "sim":
        from psbench.strategy.executor import check_run, check_schedule

        if not setup.schedule_only:
            check_run(setup)
        check_schedule(setup, plan)
    return setup


def run(setup: RunSetup, run_dir: Path, logger=None, plan=None) -> RunSummary:
    """Execute ``setup`` with the engine it names.

    ``plan`` (:class:`psbench.checkpoint.Plan`) turns on checkpoints and, with its ``state``, resumes
    from one (``engine=sim``; :mod:`psbench.distributed.options` refuses it for ``engine=dist``).
    """
    if setup.engine == "dist":  # real processes: psbench.distributed
        from psbench.distributed.launcher import train_dist

        return train_dist(setup, Path(run_dir), logger)
    from psbench.strategy.executor import train_sim

    return train_sim(setup, Path(run_dir), logger, plan)


def train(cfg: DictConfig | Mapping[str, Any], run_dir: Path, logger=None, plan=None) -> dict[str, Any]:
    """Build and run the job described by ``cfg``; return its summary's keys (:meth:`RunSummary.to_dict`)."""
    return run(prepare(cfg, plan), run_dir, logger, plan).to_dict()
