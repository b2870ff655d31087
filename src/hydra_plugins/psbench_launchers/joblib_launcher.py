"""``hydra/launcher=joblib``: Hydra's joblib launcher, with every job in flight ending KILLED on a signal, and every
job of a dead worker ending with its record.

Hydra's launcher runs the jobs in loky worker processes. On SIGINT/SIGTERM/SIGHUP the sweep process raised at once
and joblib tore its workers down (SIGKILL), so the jobs in flight left no ``summary.json`` and MLflow runs RUNNING.
Here the sweep waits in :func:`psbench.lifecycle.forwarding` (the signal is passed on to the workers, and left in a
file of the launcher's signal directory for those still starting), each worker holds signals between jobs
(:func:`psbench.lifecycle.hold_in_worker`, joblib's ``initializer``), each job ends KILLED at an update boundary with
its record — a job a worker takes after the signal ends before training — and once all have ended the sweep raises
the signal (its parent run KILLED).

A worker that dies under a job (SIGKILL, the out-of-memory killer, a crash in native code) makes loky end every
worker of the pool and fail the whole batch (``TerminatedWorkerError``): the jobs in flight left no
``summary.json``, their MLflow runs stayed RUNNING, the finished jobs' results were lost and the rest never ran.
Here the results are gathered as each job ends, so those stand; each job that was in flight when the pool broke
gets its record from the sweep — ``summary.json`` status ``failed`` and its MLflow run FAILED, with a reason naming
its worker's pid and exit — and a ledger line, so the sweep's count line says which; the jobs not started yet run in
a fresh pool. A worker whose sweep process dies ends its job KILLED and exits
(:func:`psbench.lifecycle.hold_in_worker`).
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, setup_globals
from hydra_plugins.hydra_joblib_launcher import _core, joblib_launcher
from joblib import Parallel, delayed
from omegaconf import OmegaConf

from psbench import lifecycle

log = logging.getLogger(__name__)


def _execute(idx: int, *args: Any) -> tuple[int, JobReturn]:
    """Hydra's ``execute_job`` in a worker, its result tagged with the job's number (results come back unordered)."""
    return idx, _core.execute_job(idx, *args)


class JoblibLauncher(joblib_launcher.JoblibLauncher):
    """``hydra/launcher=joblib``: Hydra's, with a signal ending each job in flight KILLED before the sweep ends, and
    a dead worker's jobs ending FAILED with their records while the others run."""

    _signals: Path | None = None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        if self._signals is None:  # one per sweep: loky reuses its workers across batches with the same initargs
            self._signals = Path(tempfile.mkdtemp(prefix="psbench-signals-"))
            atexit.register(shutil.rmtree, self._signals, True)
        self.joblib.update(initializer=lifecycle.hold_in_worker, initargs=(str(self._signals),))
        done: dict[int, JobReturn] = {}
        nums = [initial_job_idx + i for i in range(len(job_overrides))]
        try:
            with lifecycle.forwarding(self._signals):
                pending = dict(zip(nums, job_overrides, strict=True))
                while pending and lifecycle.pending() is None:
                    self._run(pending, done)
                    pending = {n: ov for n, ov in pending.items() if n not in done}
        except lifecycle.Killed as k:
            k.job_returns = [done.get(n) for n in nums]  # how each job ended (the Optuna sweeper tells finished ones)
            raise
        return [done[n] for n in nums]

    def _run(self, pending: dict[int, Sequence[str]], done: dict[int, JobReturn]) -> None:
        """Hydra's joblib launch of ``pending`` (number → overrides), each result into ``done`` as it ends; a broken
        pool ends the records of the jobs it had in flight (:meth:`_lost`)."""
        from joblib.externals.loky.process_executor import BrokenProcessPool

        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.joblib
        cfg["backend"] = "loky"  # Hydra's: the threading backend is incompatible with Hydra
        _core.process_joblib_cfg(cfg)
        log.info("Joblib.Parallel(%s) is launching %d jobs", ",".join(f"{k}={v}" for k, v in cfg.items()), len(pending))
        log.info("Launching jobs, sweep output dir : %s", sweep_dir)
        for n, ov in pending.items():
            log.info("\t#%d : %s", n, " ".join(filter_overrides(ov)))
        state = Singleton.get_state()
        args = (self.hydra_context, self.config, self.task_function, state)
        try:
            for n, ret in Parallel(**cfg, return_as="generator_unordered")(
                delayed(_execute)(n, ov, *args) for n, ov in pending.items()
            ):
                done[n] = ret
        except BrokenProcessPool as err:
            self._lost(pending, done, err)

    def _lost(self, pending: dict[int, Sequence[str]], done: dict[int, JobReturn], err: BaseException) -> None:
        """The pool broke (a worker died; loky then kills the others): each job of ``pending`` that a worker had
        started and that did not come back gets its result here — what its own ``summary.json`` says if it wrote one
        before its worker went, else FAILED: ``summary.json``, its MLflow run and the sweep's ledger say its worker
        died; the jobs not started stay pending."""
        from psbench.errors import RunFailure
        from psbench.tracking import sweep

        assert self._signals is not None and self.config is not None
        found = re.search(r"exit codes of the workers are (\{[^}]*\})", str(err))
        exits = found.group(1) if found else "unknown"
        started = lifecycle.started_jobs(self._signals)
        lg = self.config.get("logger") or {}
        uri = lg.get("tracking_uri") if lg.get("name") == "mlflow" else None
        basic = OmegaConf.select(self.config, "hydra.sweeper._target_") == sweep.BASIC_SWEEPER
        for n, ov in pending.items():
            if n in done or n not in started:
                continue
            pid, run_dir = started[n].get("pid"), str(started[n].get("run_dir") or "")
            ret = JobReturn(
                overrides=list(ov),
                hydra_cfg=OmegaConf.create({"hydra": {"runtime": {"output_dir": run_dir}}}),
                working_dir=run_dir,
                task_name=str(self.config.hydra.job.name),
            )
            own = _own_summary(Path(run_dir) / "summary.json", self._signals / f"job.{n}.json") if run_dir else None
            if own is not None:  # it ended before its worker went: as it says
                ret.status, ret.return_value = JobStatus.COMPLETED, own.test_error
                sweep.append_ledger(self.config, n, list(ov), own.status, own.failure_reason)
                done[n] = ret
                continue
            reason = (
                f"its joblib worker (pid {pid}) died while it ran (the pool's workers exited {exits}: one was killed "
                "or crashed, and joblib then ends them all); resume=auto runs it again"
            )
            sweep.end_lost_job(uri, run_dir or None, pid, reason)
            sweep.append_ledger(self.config, n, list(ov), "failed", reason)
            log.error("job %d [%s]: %s", n, " ".join(filter_overrides(ov)), reason)
            if basic:  # a grid goes on past a failed job (as after bad input); its ledger counts it at the end
                ret.status, ret.return_value = JobStatus.COMPLETED, None
            else:
                ret.status, ret.return_value = JobStatus.FAILED, RunFailure(reason)
            done[n] = ret


def _own_summary(summary: Path, started: Path) -> Any:
    """The job's own ``summary.json`` (written since the job started: ``started`` is its marker), else None."""
    from psbench.summary import RunSummary

    try:
        if summary.stat().st_mtime_ns < started.stat().st_mtime_ns:
            return None
        return RunSummary.read(summary)
    except (OSError, ValueError, TypeError):
        return None
