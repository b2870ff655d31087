"""Run one job from a composed config: the engine it names executes it.

:func:`train` is what ``psbench`` (``cli.py``) calls after validation and MLflow set-up:
``engine=sim`` (default) simulates the schedule and trains on it with Lightning
(:func:`psbench.strategy.executor.train_sim`); ``engine=dist`` runs real PS and learner
processes (:func:`psbench.dist.launcher.train_dist`). Both return a :class:`~psbench.summary.RunSummary`;
:func:`train` returns its keys (``summary.json``'s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig


def train(cfg: DictConfig, run_dir: Path, logger=None, plan=None) -> dict[str, Any]:
    """Run the job described by ``cfg``; return its summary's keys (:meth:`RunSummary.to_dict`).

    ``plan`` (:class:`psbench.checkpoint.Plan`) turns on checkpoints and, with its ``state``, resumes
    from one (``engine=sim``; :mod:`psbench.dist.options` refuses it for ``engine=dist``).
    """
    if (cfg.get("engine") or {}).get("name", "sim") == "dist":  # real processes: psbench.dist
        from psbench.dist.launcher import train_dist

        return train_dist(cfg, run_dir, logger).to_dict()
    from psbench.strategy.executor import train_sim

    return train_sim(cfg, run_dir, logger, plan).to_dict()
