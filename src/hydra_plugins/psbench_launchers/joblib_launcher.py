"""``hydra/launcher=joblib``: Hydra's joblib launcher, with every job in flight ending KILLED on a signal.

Hydra's launcher runs the jobs in loky worker processes. On SIGINT/SIGTERM/SIGHUP the sweep process raised at once
and joblib tore its workers down (SIGKILL), so the jobs in flight left no ``summary.json`` and MLflow runs RUNNING.
Here the sweep waits in :func:`psbench.lifecycle.forwarding` (the signal is passed on to the workers, and left in a
file of the launcher's signal directory for those still starting), each worker holds signals between jobs
(:func:`psbench.lifecycle.hold_in_worker`, joblib's ``initializer``), each job ends KILLED at an update boundary with
its record — a job a worker takes after the signal ends before training — and once all have ended the sweep raises
the signal (its parent run KILLED).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra_plugins.hydra_joblib_launcher import joblib_launcher

from psbench import lifecycle


class JoblibLauncher(joblib_launcher.JoblibLauncher):
    """``hydra/launcher=joblib``: Hydra's, with a signal ending each job in flight KILLED before the sweep ends."""

    _signals: Path | None = None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        if self._signals is None:  # one per sweep: loky reuses its workers across batches with the same initargs
            self._signals = Path(tempfile.mkdtemp(prefix="psbench-signals-"))
            atexit.register(shutil.rmtree, self._signals, True)
        self.joblib.update(initializer=lifecycle.hold_in_worker, initargs=(str(self._signals),))
        returns = None
        try:
            with lifecycle.forwarding(self._signals):
                returns = super().launch(job_overrides, initial_job_idx)
        except lifecycle.Killed as k:
            k.job_returns = returns  # how each job of the batch ended (the Optuna sweeper tells the finished ones)
            raise
        return returns
