"""One multirun = one MLflow parent run, and a ledger of how each of its jobs ended.

The Hydra callback in :mod:`psbench.cli` calls, in the sweep's own process:

* :func:`begin` (``on_multirun_start``): creates the MLflow store and experiment, then :func:`start_sweep` —
  unless the sweeper decides its sweep dir later (``psbench_optuna``, whose default dir is its study's: it calls
  :func:`open_parent` once that dir is final and the study accepted, so a sweep refused before then has no
  parent). :func:`start_sweep` truncates the job ledger and, with the MLflow logger, creates the parent run —
  or reuses the one named in ``<sweep dir>/psbench_sweep.json`` when the same sweep dir is run again — and
  writes that file. Jobs read it (:func:`job_tags`), so the link works for any launcher, in-process or not.
* :func:`record_job` (``on_job_end``, in the job's process): appends one JSON line per job to
  ``<sweep dir>/psbench_jobs.jsonl`` (its ``status`` from ``summary.json``, ``failed`` for a
  raised exception).
* :func:`end_sweep` (``on_multirun_end``): counts the ledger, ends the parent FINISHED, or
  FAILED with the count as ``failure_reason``, and returns the count line if any job failed.
* :func:`closing_parent` (around the app in ``psbench.cli.main``): a sweep that ends by an
  exception ends its parent FAILED (KILLED on Ctrl-C) with the reason (:func:`abandon`).

A parent that no job run points at (every job had bad input, or none was launched) is ended, then deleted:
bad input leaves no MLflow run behind, and none RUNNING among the deleted ones.

Children carry MLflow's ``mlflow.parentRunId`` and ``sweep_id`` (the sweep dir, relative to
``paths.root_dir`` when inside it); the parent carries ``sweep_id`` and ``psbench.sweep_parent``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from psbench.errors import failure_reason
from psbench.summary import RunSummary, write_json

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
SWEEP_FILE = "psbench_sweep.json"
JOBS_FILE = "psbench_jobs.jsonl"
PARENT_TAG = "psbench.sweep_parent"
MAX_LINE = 400
log = logging.getLogger("psbench")

_begun: dict[str, str | None] = {}  # begin() ran in this process: the MLflow experiment id (None: no logger)
_started: set[str] = set()  # the sweep dirs whose ledger start_sweep began in this process
_open: dict[str, str] = {}  # the parent run this process started and has not ended: uri, run_id


def one_line(text: str, limit: int = MAX_LINE) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def error_line(err: BaseException) -> str:
    """:func:`~psbench.errors.failure_reason`, at most :data:`MAX_LINE` characters."""
    return one_line(failure_reason(err))


def sweep_id(config: DictConfig) -> str:
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    root = OmegaConf.select(config, "paths.root_dir")
    if root:
        try:
            return sweep_dir.relative_to(Path(str(root)).resolve()).as_posix()
        except ValueError:
            pass
    return str(sweep_dir)


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _reusable(uri: str, exp_id: str, run_id: str | None) -> bool:
    if not run_id:
        return False
    from mlflow.exceptions import MlflowException

    from psbench.tracking.mlflow_store import client

    try:
        run = client(uri).get_run(run_id)
    except MlflowException:
        return False
    return run.info.experiment_id == exp_id and run.info.lifecycle_stage == "active"


def defers_parent(config: DictConfig) -> bool:
    """Whether the sweeper opens the parent itself once its sweep dir is final (:func:`open_parent`)."""
    target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
    return target.startswith("hydra_plugins.psbench_optuna_sweeper.")


def begin(config: DictConfig) -> None:
    """``on_multirun_start``: the MLflow store and experiment (once, before parallel jobs race on them); the parent
    run unless the sweeper opens it later (:func:`defers_parent`). Raises :class:`~psbench.errors.ConfigError`."""
    from psbench.tracking import ensure_experiment

    lg, exp_id = config.get("logger"), None
    if lg is not None and lg.get("name") == "mlflow":
        exp_id = ensure_experiment(
            lg.tracking_uri, lg.experiment_name, lg.artifact_location, lg.get("lock_timeout_s", 30)
        )
    _begun["exp_id"] = exp_id
    if not defers_parent(config):
        start_sweep(config, exp_id)


def open_parent(config: DictConfig) -> None:
    """The sweeper's sweep dir is final and its study accepted: the parent run and ledger there (a no-op when
    :func:`begin` did not run in this process, e.g. the sweeper under another app)."""
    if "exp_id" in _begun and not _open:
        start_sweep(config, _begun["exp_id"])


def start_sweep(config: DictConfig, exp_id: str | None) -> None:
    """Before the jobs: empty ledger; with ``exp_id`` (the MLflow experiment), the parent run, new or reused."""
    from psbench.tracking import mlflow_store as ms
    from psbench.tracking.provenance import provenance, provenance_tags

    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / JOBS_FILE).write_text("")
    _started.add(str(sweep_dir))
    info: dict[str, Any] = {"sweep_id": sweep_id(config), "parent_run_id": None, "swept": swept_keys(config)}
    if exp_id is not None:
        uri = str(config.logger.tracking_uri)
        overrides = [str(o) for o in config.hydra.overrides.task]
        tags = {
            "sweep_id": info["sweep_id"],
            PARENT_TAG: "true",
            "sweep_dir": str(sweep_dir),
            "overrides": " ".join(overrides),
            "mlflow.source.name": "psbench",
            **provenance_tags(provenance(OmegaConf.select(config, "trainer.num_threads"))),
        }
        old = _read(sweep_dir / SWEEP_FILE)
        if old.get("tracking_uri") == uri and _reusable(uri, exp_id, old.get("parent_run_id")):
            run_id = old["parent_run_id"]
            ms.client(uri).update_run(run_id, status=ms.RUNNING)
            ms.set_tags(uri, run_id, tags)  # this invocation's provenance
            with contextlib.suppress(Exception):  # the last invocation's, if it failed
                ms.client(uri).delete_tag(run_id, "failure_reason")
        else:
            run_id = ms.start_run(uri, exp_id, one_line(" ".join(["sweep", *overrides]), 200), tags=tags)
        info.update(parent_run_id=run_id, tracking_uri=uri, experiment_id=exp_id)
        _open.update(uri=uri, run_id=run_id)
    write_json(sweep_dir / SWEEP_FILE, info)


def swept_keys(config: DictConfig) -> list[str]:
    """The keys a sweep varies, for its jobs' run names (:func:`psbench.tracking.run_info.run_name`): its command
    line's sweep overrides (``learners=4,8``, ``range(…)``, ``choice(…)``, ``interval(…)``, ``glob(…)``) and its
    sweeper's ``params`` (an ``hparams_search`` space, the basic sweeper's params)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []]
    try:
        keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(task) if o.is_sweep_override()]
    except Exception:  # Hydra parsed them already; a form it parses another way names no axis here
        keys = []
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return list(dict.fromkeys([*keys, *(str(k) for k in params)]))


def job_swept() -> list[str]:
    """The swept keys of this job's sweep (:func:`swept_keys`, in its sweep file); ``[]`` for a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return []
    return list(_read(Path(HydraConfig.get().sweep.dir) / SWEEP_FILE).get("swept") or [])


def in_basic_sweep() -> bool:
    """Whether this job belongs to a plain ``psbench -m`` grid (Hydra's basic sweeper).

    Its jobs record bad input as their failure and return, so the grid goes on; other sweepers
    (psbench_optuna) get the single run's exit 2, which they catch and record themselves.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return False
    return _hydra_target("sweeper") == BASIC_SWEEPER


def in_worker() -> bool:
    """Whether this job of a multirun runs in a launcher's worker (joblib, submitit, Ray), not in the sweep's process.

    There the job's error goes back to the sweeper as its result (Hydra's ``JobReturn``, pickled), so
    the sweeper records that trial and the others of its batch stand; exiting would take the worker down.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return False
    return _hydra_target("launcher") not in (None, BASIC_LAUNCHER)


def _hydra_target(node: str) -> str | None:
    """The ``_target_`` of ``hydra.<node>`` of the running job (Hydra's config is a DictConfig at run time)."""
    from hydra.core.hydra_config import HydraConfig

    return OmegaConf.select(cast(DictConfig, HydraConfig.get()), f"{node}._target_")


def job_tags(tracking_uri: str) -> dict[str, str]:
    """``mlflow.parentRunId`` and ``sweep_id`` for a job of a multirun (``{}`` for a single run)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return {}
    info = _read(Path(HydraConfig.get().sweep.dir) / SWEEP_FILE)
    tags = {"sweep_id": info["sweep_id"]} if info.get("sweep_id") else {}
    if info.get("parent_run_id") and info.get("tracking_uri") == tracking_uri:
        tags["mlflow.parentRunId"] = info["parent_run_id"]
    return tags


def record_job(config: DictConfig, job_return: Any) -> None:
    """Append how one job of a multirun ended to the sweep's ledger (one JSON line, ``O_APPEND``)."""
    from hydra.core.utils import JobStatus

    entry: dict[str, Any] = {
        "num": OmegaConf.select(config, "hydra.job.num"),
        "overrides": [str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or []],
    }
    if job_return.status == JobStatus.FAILED:
        from psbench.lifecycle import JobKilled

        err = job_return._return_value
        if isinstance(err, JobKilled):  # a worker's job ended by a signal (its summary.json says so too)
            entry.update(status="killed", reason=err.reason)
        else:
            entry.update(status="failed", reason=error_line(err))
    elif str(OmegaConf.select(config, "hydra.runtime.output_dir")) in _refused:  # its dir is another run's
        entry.update(status="failed", reason=_refused.pop(str(OmegaConf.select(config, "hydra.runtime.output_dir"))))
    else:
        out = OmegaConf.select(config, "hydra.runtime.output_dir")
        try:
            summary = RunSummary.read(Path(str(out)) / "summary.json")
        except (OSError, ValueError, TypeError):  # none written (or not by this psbench): it ended normally
            summary = RunSummary()
        status = summary.status
        if status == "killed" and summary.signal is None:  # trainer.stop_after_updates: stopped as asked
            status = "stopped"
        entry.update(status=status, reason=summary.failure_reason)
    _append(Path(str(config.hydra.sweep.dir)), entry)


def _append(sweep_dir: Path, entry: Mapping[str, Any]) -> None:
    line = json.dumps(entry) + "\n"
    fd = os.open(sweep_dir / JOBS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def append_ledger(config: DictConfig, num: int, overrides: list[str], status: str, reason: str | None) -> None:
    """A ledger line for job ``num`` written by the sweep itself (its worker died before ``on_job_end``)."""
    entry = {"num": num, "overrides": [str(o) for o in overrides], "status": status, "reason": reason}
    _append(Path(str(config.hydra.sweep.dir)), entry)


def end_lost_job(tracking_uri: str | None, run_dir: str | None, pid: Any, reason: str) -> None:
    """A job whose worker process died under it: ``summary.json`` with status ``failed`` and ``reason``, and its MLflow
    run — the RUNNING run of ``run_dir`` started by ``pid`` — ended FAILED with that reason."""
    from psbench.tracking.provenance import provenance

    run_id = None
    if tracking_uri and run_dir:
        from psbench.tracking import mlflow_store as ms

        with contextlib.suppress(Exception):
            run_id = ms.end_runs_of(tracking_uri, run_dir, str(pid), ms.FAILED, reason)
    if run_dir:
        with contextlib.suppress(Exception):
            write_json(
                Path(run_dir) / "summary.json",
                RunSummary(status="failed", failure_reason=reason, mlflow_run_id=run_id, provenance=provenance()),
            )


def end_orphaned_parent(sweep_dir: str, sweep_pid: int) -> None:
    """A worker whose sweep process ``sweep_pid`` died (:func:`psbench.lifecycle.on_orphaned_sweep`): the sweep's MLflow
    parent run (``<sweep dir>/psbench_sweep.json``) ends KILLED if it still runs."""
    from psbench.tracking import mlflow_store as ms

    info = json.loads((Path(sweep_dir) / "psbench_sweep.json").read_text())
    uri, run_id = info.get("tracking_uri"), info.get("parent_run_id")
    if uri and run_id and ms.client(uri).get_run(run_id).info.status == ms.RUNNING:
        ms.end_run(uri, run_id, ms.KILLED, f"its sweep process (pid {sweep_pid}) died; its jobs ended KILLED")


def read_jobs(sweep_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    path = Path(sweep_dir) / JOBS_FILE
    if not path.is_file():
        return []
    return [json.loads(s) for s in path.read_text().splitlines() if s.strip()]


def count_line(jobs: list[dict[str, Any]]) -> str | None:
    """``1 of 4 jobs failed: job 1 [learners=2 protocol.n=4]: protocol.n=4 is invalid: …`` (None if none failed).

    Each failed job shows the overrides that tell it apart (those shared by every job are left out).
    """
    failed = sorted((j for j in jobs if j.get("status") in ("failed", "killed")), key=lambda j: j.get("num") or 0)
    if not failed:
        return None
    shared = set.intersection(*(set(j.get("overrides") or []) for j in jobs))

    def job(j: dict[str, Any]) -> str:
        own = " ".join(o for o in j.get("overrides") or [] if o not in shared)
        return f"job {j.get('num')}" + (f" [{own}]" if own else "") + f": {j.get('reason') or j['status']}"

    return one_line(f"{len(failed)} of {len(jobs)} jobs failed: " + "; ".join(job(j) for j in failed))


def end_sweep(config: DictConfig) -> str | None:
    """After the jobs: end the parent with the ledger's counts; return the count line if a job failed (None for a
    sweep refused before its ledger began: an earlier invocation's ledger is not this one's)."""
    if str(config.hydra.sweep.dir) not in _started:
        return None
    jobs = read_jobs(str(config.hydra.sweep.dir))
    line = count_line(jobs)
    counts = Counter(str(j.get("status")) for j in jobs)
    metrics = {"jobs": len(jobs), **{f"jobs_{s}": counts[s] for s in ("finished", "diverged", "failed", "killed")}}
    _close("FAILED" if line else "FINISHED", line, metrics, _sweep_files(Path(str(config.hydra.sweep.dir))))
    return line


#: files a sweeper leaves in its sweep dir that become artifacts of the sweep's parent run (the Optuna sweeper's
#: results: best trial or Pareto front, crashed trials: hydra_plugins/psbench_optuna_sweeper/_results.py)
SWEEP_ARTIFACTS = ("optimization_results.yaml",)


def _sweep_files(sweep_dir: Path) -> list[Path]:
    return [sweep_dir / f for f in SWEEP_ARTIFACTS if (sweep_dir / f).is_file()]


def _close(
    status: str, reason: str | None, metrics: Mapping[str, float] | None = None, files: Iterable[Path] = ()
) -> None:
    """End the open parent run ``status`` with ``files`` as its artifacts; delete it too if no job run points at it
    (nothing to group). A failed upload is a warning and the tag ``artifacts_error``: the files stay in the sweep
    dir, and the sweep's result is not lost for it."""
    if not _open:
        return
    from psbench.tracking import mlflow_store as ms

    uri, run_id = _open["uri"], _open["run_id"]
    _open.clear()
    c = ms.client(uri)
    children = c.search_runs(
        [c.get_run(run_id).info.experiment_id], f"tags.`mlflow.parentRunId` = '{run_id}'", max_results=1
    )
    if metrics and children:
        ms.log_metrics(uri, run_id, metrics)
    if children and files:
        try:
            ms.log_artifacts(uri, run_id, files)
        except Exception as err:  # a full or unreachable artifact store
            line = error_line(err)
            log.warning("MLflow parent run %s: the sweep's files were not logged (%s)", run_id, line)
            with contextlib.suppress(Exception):
                ms.set_tags(uri, run_id, {"artifacts_error": line})
    ms.end_run(uri, run_id, status, reason)
    if not children:
        c.delete_run(run_id)


def fail_job(reason: str) -> None:
    """A grid job's bad input: ``summary.json`` with status ``failed`` and ``failure_reason`` (no MLflow run)."""
    from hydra.core.hydra_config import HydraConfig

    from psbench.tracking.provenance import provenance

    write_json(
        Path(HydraConfig.get().runtime.output_dir) / "summary.json",
        RunSummary(status="failed", failure_reason=reason, provenance=provenance()),
    )


_refused: dict[str, str] = {}  # job dirs refused as another run's (record_refusal): their summary.json is not theirs


def record_refusal(reason: str) -> None:
    """A grid job refused because its dir holds another run (:class:`psbench.run_dir.RunDirTaken`): nothing is
    written there; the ledger records the refusal (:func:`record_job`)."""
    from hydra.core.hydra_config import HydraConfig

    _refused[str(HydraConfig.get().runtime.output_dir)] = reason


@contextlib.contextmanager
def closing_parent() -> Iterator[None]:
    """Around the Hydra app: a sweep ended by an exception before :func:`end_sweep` still ends its parent."""
    try:
        yield
    except BaseException as err:
        with contextlib.suppress(Exception):
            abandon(err)
        raise


def abandon(err: BaseException) -> None:
    """The sweep ended by ``err`` before :func:`end_sweep`: its parent ends FAILED, or KILLED for Ctrl-C and
    exits 130/143/129 (SIGINT/SIGTERM/SIGHUP), with ``failure_reason``; a parent without job runs is deleted."""
    from psbench.lifecycle import Killed

    signalled = isinstance(err, SystemExit) and err.code in (130, 143, 129)
    killed = isinstance(err, KeyboardInterrupt | Killed) or signalled
    _close("KILLED" if killed else "FAILED", error_line(err))
