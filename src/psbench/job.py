"""One job, start to end: check, build, track, run, record (:func:`execute`, the Hydra task of ``psbench``).

In order: the composed config is checked (:func:`psbench.validate.validate`), the run is built
(:func:`psbench.train.prepare`: data, model, schedule and every check they make possible), and only then is its
MLflow run created (:class:`~psbench.tracking.job_run.JobRun`) and the engine started. ``resume=<run dir>|auto``
reopens a checkpoint's run instead (:mod:`psbench.checkpoint`); a requested stop (``trainer.stop_after_updates``)
ends the run KILLED with its checkpoint kept. Whatever ends the job once its run dir exists leaves its
``summary.json`` — finished, diverged (still FINISHED, tag ``diverged=true``), killed by a signal
(:mod:`psbench.lifecycle`: KILLED at an update boundary), failed (bad input, a handled failure, a crash) — and
its MLflow run, if it has one, ends with the same status and ``failure_reason``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from psbench import lifecycle
from psbench.console import print_config
from psbench.errors import ConfigError, DataError, JobCrashed, RunFailure, crash_line, failure_reason
from psbench.files import DiskFull, disk_full, disk_full_line
from psbench.summary import RunSummary, write_json
from psbench.tracking.job_run import JobRun
from psbench.validate import validate

log = logging.getLogger("psbench")


def add_user_paths() -> list[str]:
    """Put the folders a user's ``_target_`` modules live in on ``sys.path``, after the environment's own packages
    (a ``torch.py`` there never replaces torch): the launch directory and the parent of every ``--config-dir`` /
    ``hydra.searchpath`` folder (:func:`psbench.target.user_paths`)."""
    from hydra.core.hydra_config import HydraConfig

    from psbench.conf import CONF_DIR
    from psbench.target import add_to_sys_path, user_paths

    sources = HydraConfig.get().runtime.config_sources if HydraConfig.initialized() else []
    return add_to_sys_path(user_paths([{"schema": s.schema, "path": s.path} for s in sources], CONF_DIR))


def execute(cfg: DictConfig) -> float | None:
    """Run one job for a composed config; return its test error (``None`` if not trained).

    In order: the config is checked (:func:`~psbench.validate.validate`), the run is built
    (:func:`psbench.train.prepare`: data, model, schedule and the checks they make possible), and only then is
    the MLflow run created and the engine started — input refused at any of these steps leaves no MLflow run.
    Whatever ends the job after its run dir exists (success, bad input, a signal, a failure) leaves its
    ``summary.json``.
    """
    resolved = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True))
    run_dir = Path(resolved["paths"]["output_dir"])
    summary_file = run_dir / "summary.json"
    engine = resolved.get("engine") or {}
    note = (resolved.get("dataset") or {}).get("data_note")  # in every summary.json of the run (RunSummary.data_note)
    run: JobRun | None = None
    prov: dict[str, Any] | None = None
    try:
        lifecycle.release()  # a signal held since start-up is raised here, where this job's record is kept
        print_config(resolved)
        add_user_paths()
        validate(cfg)
        # torch, Lightning and the training code load before the MLflow run exists, with signals held: one
        # raised inside a native library's import aborted the process (SIGABRT, no record; SIGTERM 1.5 s into
        # `import pytorch_lightning`, seen in CI) — it is raised after them instead
        with lifecycle.deferred():
            from psbench.checkpoint import CHECKPOINT_FILE, Plan, RunStopped, resume_state
            from psbench.train import prepare
            from psbench.train import run as run_engine

        mode, found = resume_state(resolved.get("resume"), run_dir, resolved)
        if mode == "fresh":  # an earlier run here is never overwritten unasked (psbench.run_dir)
            from psbench import run_dir as rd

            if resolved.get("overwrite"):
                gone = rd.clear(run_dir)
                if gone:
                    log.info("overwrite=true: removed the earlier run's %s from %s", ", ".join(gone), run_dir)
            else:
                refused = rd.reuse_refusal("hydra.run.dir", run_dir, resolved.get("resume"), False, resolved)
                if refused is not None:
                    raise refused
        if mode == "done":
            print(f"psbench: {run_dir} already finished ({found.status}); not run again", file=sys.stderr)
            return None if found.test_error is None else float(found.test_error)
        config_file = run_dir / "resolved_config.yaml"
        OmegaConf.save(OmegaConf.create(resolved), config_file)
        overrides = run_dir / ".hydra" / "overrides.yaml"
        files = [summary_file, config_file, overrides]

        from psbench.tracking.provenance import provenance

        prov = provenance(resolved["trainer"].get("num_threads"))
        tr = resolved["trainer"]
        plan = Plan(
            run_dir / CHECKPOINT_FILE,
            int(tr.get("checkpoint_every") or 0),
            tr.get("stop_after_updates"),
            {"config": resolved},
            found if mode == "resume" else None,
        )
        setup = prepare(cfg, plan)  # every check that can refuse the job, before any MLflow run
        prov.update(threads=setup.threads, threads_from=setup.threads_from)  # the count it trains with, and why
        with lifecycle.deferred():  # a signal while the MLflow run is created ends it once it exists
            run = JobRun(resolved, run_dir, prov, plan.state)
        plan.meta["mlflow_run_id"] = run.run_id
        _say_writing(setup, run_dir)
        try:
            summary = run_engine(setup, run_dir, run.lightning_logger(resolved), plan)
        except RunStopped as stop:  # a requested stop (trainer.stop_after_updates): KILLED, with its checkpoint
            stopped = RunSummary(
                status="killed",
                updates_done=stop.update,
                checkpoint=str(stop.path),
                failure_reason=str(stop),
                engine="sim",
                mlflow_run_id=run.run_id,
                provenance=prov,
                provenance_changes=run.provenance_changes or None,
                data_note=note,
            )
            write_json(summary_file, stopped)
            run.abort("KILLED", str(stop), stopped, files)
            log.info("%s; resume with resume=%s", stop, run_dir)
            return None
        summary = replace(
            summary,
            mlflow_run_id=run.run_id,
            provenance=prov,
            provenance_changes=run.provenance_changes or None,
            data_note=note,
            data_warning=getattr(getattr(setup, "data", None), "unseen_labels", None),
        )
        artifacts = [*files, *(Path(p) for p in summary.artifacts)]
        with lifecycle.deferred():
            write_json(summary_file, summary)
            lost = run.finish(summary, artifacts)
            if lost:  # FINISHED all the same: what trained is recorded; summary.json says what did not upload
                summary = replace(summary, artifacts_error=lost)
                write_json(summary_file, summary)
                print(f"psbench: warning: the run finished, but {lost}", file=sys.stderr, flush=True)
            plan.path.unlink(missing_ok=True)  # finished: the weights are an artifact, summary.json says done
    except lifecycle.Killed as k:
        if run is None or not run.ended:
            _end_killed(k, run, summary_file, prov, engine, note)
        raise
    except BaseException as err:
        from psbench.run_dir import RunDirTaken

        if isinstance(err, RunDirTaken):  # the dir is another run's: its summary.json stays as it is
            raise
        status, reason = _ended_by(err)
        full = disk_full(err)
        crashed = _crashed(err) and not full
        if full:  # a full disk (run dir, checkpoint, store): one line naming the file, no .tmp left (psbench.files)
            reason = disk_full_line(err, run_dir)
        elif crashed:  # the user's code (or a bug) raised: one line, the traceback in the job's log file
            reason = f"{crash_line(err)}; traceback in {_log_traceback(err, run_dir)}"
        ended = RunSummary(
            status=status.lower(),
            failure_reason=" ".join(reason.split()),
            engine=engine.get("name"),
            mlflow_run_id=run.run_id if run is not None else None,
            provenance=prov,
            provenance_changes=(run.provenance_changes or None) if run is not None else None,
            data_note=note,
        )
        with contextlib.suppress(OSError, DiskFull):  # an output dir that cannot be written is the error itself
            write_json(summary_file, ended)
        if run is not None:
            run.abort(status, reason, ended, [summary_file])
        if crashed:
            raise JobCrashed(ended.failure_reason) from err
        if full and not isinstance(err, RunFailure):
            raise DiskFull(reason) from err
        raise
    clock = "sim_time_s" if summary.run_time_s is None else "run_time_s"  # simulated, or measured (dist)
    log.info(
        "%s: test_error=%s staleness_mean=%s %s=%s -> %s",
        summary.status,
        summary.test_error,
        summary.staleness_mean,
        clock,
        getattr(summary, clock),
        summary_file,
    )
    return None if summary.test_error is None else float(summary.test_error)


#: a schedule of this many gradients or more takes seconds to minutes to write (npz, plots): the CLI says so first
LONG_SCHEDULE = 1_000_000


def _say_writing(setup: Any, run_dir: Path) -> None:
    """Before the engine writes a long schedule and its plots (``schedule_only`` of a huge epoch count used to run
    for minutes without a word after the simulation's last line), one line saying so."""
    schedule = getattr(setup, "schedule", None)
    if schedule is None or setup.trainer.progress == "none" or schedule.num_gradients < LONG_SCHEDULE:
        return
    print(
        f"psbench: writing the schedule ({schedule.num_gradients:,} gradients) and its plots to {run_dir}",
        file=sys.stderr,
        flush=True,
    )


def _crashed(err: BaseException) -> bool:
    """An error nobody handled: not bad input, a handled failure or a signal (each says itself in one line)."""
    from omegaconf.errors import OmegaConfBaseException

    handled = (ConfigError, DataError, RunFailure, OmegaConfBaseException)
    return isinstance(err, Exception) and not isinstance(err, handled)


def _log_traceback(err: BaseException, run_dir: Path) -> Path:
    """Append ``err``'s traceback to the job's log file (Hydra's ``<run dir>/psbench.log``, or the file psbench's
    log goes to); return the file."""
    import traceback

    files = [
        Path(h.baseFilename)
        for lg in (log, logging.getLogger())
        for h in lg.handlers
        if isinstance(h, logging.FileHandler)
    ]
    where = files[0] if files else run_dir / "psbench.log"
    text = "".join(traceback.format_exception(err))
    with contextlib.suppress(OSError):
        for h in (x for lg in (log, logging.getLogger()) for x in lg.handlers):
            h.flush()
        with open(where, "a", encoding="utf-8") as fh:
            fh.write(f"psbench: the job ended by an error; its traceback:\n{text}")
    return where


def _ended_by(err: BaseException) -> tuple[str, str]:
    """MLflow status and ``failure_reason`` of a job ended by ``err``: KILLED when submitit requeues it
    (:mod:`hydra_plugins.psbench_launchers.requeue`: pre-empted or timed out, it resumes), else FAILED."""
    requeue = sys.modules.get("hydra_plugins.psbench_launchers.requeue")
    if isinstance(err, SystemExit) and requeue is not None and requeue.requeued:
        return "KILLED", requeue.requeued[-1]
    return "FAILED", failure_reason(err)


def _end_killed(
    k: lifecycle.Killed,
    run: JobRun | None,
    summary_file: Path,
    prov: dict[str, Any] | None,
    engine: Mapping[str, Any],
    note: str | None = None,
) -> None:
    """A killed job: ``summary.json`` (status killed), its MLflow run (if one exists yet) KILLED with
    ``failure_reason``, one line on stderr."""
    dist = engine.get("name") == "dist"
    summary = replace(
        lifecycle.summary(k),
        engine=engine.get("name", "sim"),
        mode=engine.get("mode", "free_run") if dist else None,
        mlflow_run_id=run.run_id if run is not None else None,
        provenance=prov,
        provenance_changes=(run.provenance_changes or None) if run is not None else None,
        data_note=note,
    )
    with contextlib.suppress(OSError, DiskFull):  # a full disk: the summary where space allows
        write_json(summary_file, summary)
    if run is not None:
        d = summary_file.parent
        run.abort(
            "KILLED",
            str(summary.failure_reason),
            summary,
            [summary_file, d / "resolved_config.yaml", d / ".hydra" / "overrides.yaml"],
        )
    print(f"psbench: {summary.failure_reason}; summary in {summary_file}", file=sys.stderr, flush=True)
    k.reported = True
