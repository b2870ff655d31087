"""``hydra/launcher=joblib``: Hydra's joblib launcher, with every job in flight ending KILLED on a signal.

Hydra's launcher runs the jobs in loky worker processes. On SIGINT/SIGTERM/SIGHUP the sweep process raised at once
and joblib tore its workers down (SIGKILL), so the jobs in flight left no ``summary.json`` and MLflow runs RUNNING.
Here the sweep waits in :func:`psbench.lifecycle.forwarding` (the signal is passed on to the workers), each worker
holds signals between jobs (:func:`psbench.lifecycle.hold_in_worker`, joblib's ``initializer``), each job ends KILLED
at an update boundary with its record, and once all have ended the sweep raises the signal (its parent run KILLED).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra_plugins.hydra_joblib_launcher import joblib_launcher

from psbench import lifecycle


class JoblibLauncher(joblib_launcher.JoblibLauncher):
    """``hydra/launcher=joblib``: Hydra's, with a signal ending each job in flight KILLED before the sweep ends."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        self.joblib["initializer"] = lifecycle.hold_in_worker
        returns = None
        try:
            with lifecycle.forwarding():
                returns = super().launch(job_overrides, initial_job_idx)
        except lifecycle.Killed as k:
            k.job_returns = returns  # what each job of the batch ended with (the Optuna sweeper tells the finished)
            raise
        return returns
