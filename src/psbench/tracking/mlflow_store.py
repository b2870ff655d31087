"""MLflow bookkeeping for psbench runs: one store (a sqlite file, or a tracking server), one experiment,
one run per job.

Two traps shape this module (see the project's design notes):

* MLflow 3 refuses the old file store and Lightning's ``MLFlowLogger`` defaults to
  ``file:./mlruns``; psbench always passes an explicit ``sqlite:///…/mlflow.db`` URI and an
  explicit artifact location.
* Parallel jobs of a multirun that open a fresh sqlite file at the same time race on the
  schema creation and on ``create_experiment``. :func:`ensure_experiment` serializes the
  first creation with a lock on the database file and treats "already exists" as
  success, so it can be called by every job and also once before a sweep starts.

All functions take the tracking URI explicitly and use :class:`mlflow.MlflowClient`, never
the fluent ``mlflow.start_run`` API, so no global "active run" leaks between the jobs of a
multirun executed in one process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from psbench.errors import ConfigError

RUNNING, FINISHED, FAILED, KILLED = "RUNNING", "FINISHED", "FAILED", "KILLED"
SUMMARY_PREFIX = "summary/"  # summary.json's numbers, apart from the per-update metric series

# MLflow's own limits (mlflow.utils.validation): values longer than this are refused.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000

_NOISY_LOGGERS = ("alembic", "mlflow.store.db.utils", "mlflow.store.tracking.sqlalchemy_store")


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (``None`` for other schemes)."""
    if not tracking_uri.startswith("sqlite:"):
        return None
    parsed = urlparse(tracking_uri)
    # sqlite:////abs/path -> path "//abs/path"; sqlite:///rel/path -> path "/rel/path"
    raw = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    return Path(raw)


def artifact_uri(location: str | os.PathLike[str]) -> str:
    """An absolute ``file://`` URI for a local path; URIs with a scheme pass through."""
    text = os.fspath(location)
    if urlparse(text).scheme and not Path(text).drive:
        return text
    return Path(text).expanduser().resolve().as_uri()


def client(tracking_uri: str):
    """An :class:`mlflow.MlflowClient` bound to ``tracking_uri`` (imported lazily: slow)."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Hide alembic's migration chatter (INFO lines on stderr) while the store is created."""
    saved = [(name, logging.getLogger(name).level) for name in _NOISY_LOGGERS]
    for name, _ in saved:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, level in saved:
            logging.getLogger(name).setLevel(level)


#: seconds to wait for a store another process holds locked before giving up (``logger.lock_timeout_s``)
LOCK_TIMEOUT_S = 30.0


def _waiting(db: Path, timeout_s: float, holder: str) -> None:
    print(
        f"psbench: {db} is locked by {holder}; waiting up to {timeout_s:g} s (logger.lock_timeout_s)",
        file=sys.stderr,
        flush=True,
    )


def _locked(tracking_uri: str, db: Path, timeout_s: float) -> ConfigError:
    return ConfigError(
        "logger.tracking_uri",
        tracking_uri,
        f"a store that no other process holds locked ({db} stayed locked for {timeout_s:g} s, logger.lock_timeout_s)",
    )


def check_server(tracking_uri: str, timeout_s: float = LOCK_TIMEOUT_S) -> None:
    """Refuse an ``http(s)://`` tracking server that does not answer within ``timeout_s`` (no-op for others).

    Any HTTP answer counts (a proxy's 401 too): MLflow's client would otherwise retry a dead server
    for minutes before failing with a traceback.
    """
    import urllib.error
    import urllib.request

    if urlparse(tracking_uri).scheme not in ("http", "https"):
        return
    try:
        urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", None) or e
        raise ConfigError(
            "logger.tracking_uri",
            tracking_uri,
            f"an MLflow tracking server that answers ({why}; start one with `mlflow server`, see "
            "README 'On a cluster')",
        ) from None


def check_store(tracking_uri: str, timeout_s: float = LOCK_TIMEOUT_S) -> None:
    """Refuse a sqlite store that cannot be used, before any run exists; no-op for other schemes.

    Its directory must be creatable and an existing file must be a sqlite database that can be
    read. A database another process holds locked (a writer's exclusive lock) is waited for at
    most ``timeout_s`` seconds, with a message on stderr; then :class:`ConfigError`.
    """
    import sqlite3

    db = sqlite_path(tracking_uri)
    if db is None:
        return
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            "logger.tracking_uri", tracking_uri, f"a sqlite:/// URI in a writable directory ({e.strerror or e})"
        ) from None
    if not db.exists() or db.stat().st_size == 0:
        return
    for wait in (0.0, timeout_s):
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=wait)) as con:
                con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise ConfigError(
                    "logger.tracking_uri", tracking_uri, f"a readable MLflow sqlite database ({db}: {e})"
                ) from None
            if wait:
                raise _locked(tracking_uri, db, timeout_s) from None
            _waiting(db, timeout_s, "another process (an sqlite write lock)")
        except sqlite3.DatabaseError as e:
            raise ConfigError(
                "logger.tracking_uri",
                tracking_uri,
                f"an MLflow sqlite database or a new file ({db}: {e}; move it away or "
                "point logger.tracking_uri elsewhere)",
            ) from None


@contextlib.contextmanager
def _store_lock(tracking_uri: str, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the sqlite file (created empty if missing).

    sqlite itself uses POSIX record locks, which do not interact with ``flock`` on Linux,
    and treats an empty file as an empty database, so locking the database file itself
    leaves no lock file behind. A no-op for non-sqlite stores or without ``fcntl``. The
    parent directory is created; if that fails, :class:`ConfigError` names
    ``logger.tracking_uri``.
    """
    db = sqlite_path(tracking_uri)
    if db is None:
        yield
        return
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fh = open(db, "ab")  # closed by the with below
    except OSError as e:
        raise ConfigError(
            "logger.tracking_uri",
            tracking_uri,
            f"a sqlite:/// URI in a writable directory ({e.strerror or e})",
        ) from None
    with fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        _flock(fh.fileno(), tracking_uri, db, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _flock(fd: int, tracking_uri: str, db: Path, timeout_s: float) -> None:
    """An exclusive ``flock`` on ``fd``, waiting at most ``timeout_s`` (with a message) for its holder."""
    import fcntl

    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _locked(tracking_uri, db, timeout_s) from None
            if not told:
                _waiting(db, timeout_s, "another psbench creating the store")
                told = True
            time.sleep(0.1)


def ensure_store(tracking_uri: str) -> None:
    """Create the store's schema if needed (a fresh sqlite file takes ~10 s of migrations).

    Safe to call from parallel processes: creation happens under :func:`_store_lock`.
    """
    with _store_lock(tracking_uri), _quiet():
        client(tracking_uri).search_experiments(max_results=1)


def ensure_experiment(
    tracking_uri: str, name: str, artifact_location: str | None, lock_timeout_s: float = LOCK_TIMEOUT_S
) -> str:
    """Create (if needed) the store and the experiment ``name``; return its id.

    Idempotent and safe to call from parallel processes: the first creation of the sqlite
    schema and of the experiment happens under a lock on the database file, and a
    concurrent creation reported as ``RESOURCE_ALREADY_EXISTS`` (another machine, a store
    without the lock) is answered by reading the experiment back. A deleted experiment of
    that name is restored. ``artifact_location`` only applies when the experiment is new.
    A store that cannot be opened (not a database, locked past ``lock_timeout_s``, a tracking server
    that does not answer within it) raises :class:`ConfigError` naming ``logger.tracking_uri``; no run
    exists yet. A database server's store (``postgresql://``) has no such lock: processes that create
    its tables at once collide (a duplicate key), and the losers retry until ``lock_timeout_s``.
    """
    check_store(tracking_uri, lock_timeout_s)
    check_server(tracking_uri, lock_timeout_s)
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            return _ensure_experiment(tracking_uri, name, artifact_location, lock_timeout_s)
        except ConfigError:
            raise
        except Exception as e:  # a store MLflow cannot open: one line, not SQLAlchemy's traceback
            if not type(e).__module__.startswith(("sqlalchemy", "sqlite3", "mlflow", "alembic")):
                raise
            if _lost_creation_race(tracking_uri, e) and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            head = " ".join(str(e).split("[SQL:")[0].split())[:300] or type(e).__name__
            raise ConfigError(
                "logger.tracking_uri", tracking_uri, f"an MLflow store psbench can open ({head})"
            ) from None


def _lost_creation_race(tracking_uri: str, e: Exception) -> bool:
    """Another process created the same table or row first (a database server's store, not sqlite's)."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    return sqlite_path(tracking_uri) is None and isinstance(e, IntegrityError | ProgrammingError)


def _ensure_experiment(tracking_uri: str, name: str, artifact_location: str | None, lock_timeout_s: float) -> str:
    from mlflow.exceptions import MlflowException

    with _store_lock(tracking_uri, lock_timeout_s), _quiet():
        c = client(tracking_uri)
        exp = c.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                c.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        location = artifact_uri(artifact_location) if artifact_location else None
        try:
            return c.create_experiment(name, artifact_location=location)
        except MlflowException as e:
            if e.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            exp = c.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def start_run(
    tracking_uri: str,
    experiment_id: str,
    run_name: str,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Create a RUNNING run with ``params`` and ``tags``; return its id.

    If logging the params fails, the run is marked FAILED before the error propagates,
    so no run is left RUNNING.
    """
    from mlflow.entities import Param

    c = client(tracking_uri)
    run = c.create_run(
        experiment_id,
        run_name=run_name,
        tags={k: _clip(str(v), MAX_TAG_VALUE) for k, v in (tags or {}).items()},
    )
    run_id = run.info.run_id
    try:
        if params:
            c.log_batch(
                run_id,
                params=[Param(k, _clip(str(v), MAX_PARAM_VALUE)) for k, v in params.items()],
            )
    except BaseException:
        c.set_terminated(run_id, FAILED)
        raise
    return run_id


def set_tags(tracking_uri: str, run_id: str, tags: Mapping[str, Any]) -> None:
    from mlflow.entities import RunTag

    c = client(tracking_uri)
    c.log_batch(run_id, tags=[RunTag(k, _clip(str(v), MAX_TAG_VALUE)) for k, v in tags.items()])


def summary_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a run summary as MLflow metrics (bools as 0/1; others dropped).

    Non-finite values are kept: MLflow stores NaN and clamps ±inf, and a diverged run's
    NaN loss is information.
    """
    out: dict[str, float] = {}
    for key, value in summary.items():
        if isinstance(value, bool):
            out[key] = float(value)
        elif isinstance(value, int | float):
            out[key] = float(value)
    return out


def log_summary(tracking_uri: str, run_id: str, summary: Mapping[str, Any]) -> None:
    """A run's summary numbers as ``summary/<key>`` metrics (one point each, at step 0).

    Kept apart from the per-update series (``train_loss``, ``sim_time_s``, ``test_error``, …),
    so a series ends with its last measured value and the totals show as their own section.
    """
    log_metrics(tracking_uri, run_id, {SUMMARY_PREFIX + k: v for k, v in summary_metrics(summary).items()})


def log_metrics(tracking_uri: str, run_id: str, metrics: Mapping[str, float], step: int = 0):
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    c = client(tracking_uri)
    c.log_batch(
        run_id,
        metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()],
    )


def log_artifacts(tracking_uri: str, run_id: str, paths: Iterable[str | os.PathLike[str]]):
    """Upload each existing file in ``paths`` to the run's artifact root."""
    c = client(tracking_uri)
    for p in paths:
        if Path(p).is_file():
            c.log_artifact(run_id, os.fspath(p))


def end_run(tracking_uri: str, run_id: str, status: str, reason: str | None = None) -> None:
    """Set the run's terminal status (FINISHED, FAILED or KILLED); ``reason`` becomes tag ``failure_reason``."""
    if reason:
        set_tags(tracking_uri, run_id, {"failure_reason": " ".join(reason.split())})
    client(tracking_uri).set_terminated(run_id, status)


#: the tags by which a later job in the same run dir tells that a run's process is gone: its host and its pid
HOST_TAG, PID_TAG = "psbench.host", "psbench.pid"


def process_tags() -> dict[str, str]:
    """This process's :data:`HOST_TAG` and :data:`PID_TAG`."""
    import socket

    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def process_alive(pid: int) -> bool:
    """Is ``pid`` a running psbench (or Python) process here? A pid reused by another program counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # no /proc (macOS): the pid exists
        return True
    with contextlib.suppress(OSError):
        text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return "psbench" in text or "python" in text
    return False


def end_lost_runs(tracking_uri: str, experiment_id: str, run_dir: str) -> list[str]:
    """End KILLED the runs of ``run_dir`` left RUNNING by a process that is gone; return their ids.

    A SIGKILL, the kernel's OOM killer or a lost session end a process without a record, so its MLflow run stays
    RUNNING; the next job in the same dir (a re-run, an Optuna retry without a checkpoint) ends it, with tag
    ``failure_reason``. Only runs started on this host by a pid that no longer runs psbench are touched: a run of
    another machine, or one still going, is left as it is.
    """
    import socket

    host = socket.gethostname()
    quoted = run_dir.replace("'", "\\'")
    c = client(tracking_uri)
    lost = []
    for run in c.search_runs(
        [experiment_id], filter_string=f"tags.run_dir = '{quoted}' and attributes.status = 'RUNNING'", max_results=100
    ):
        tags = run.data.tags
        pid = tags.get(PID_TAG, "")
        if tags.get(HOST_TAG) != host or not pid.isdigit() or int(pid) == os.getpid() or process_alive(int(pid)):
            continue
        end_run(
            tracking_uri,
            run.info.run_id,
            KILLED,
            f"its process ({host}, pid {pid}) ended without a record (SIGKILL, out of memory or a lost session); "
            "a later job in the same dir ended it",
        )
        lost.append(run.info.run_id)
    return lost


def end_runs_of(tracking_uri: str, run_dir: str, pid: str, status: str, reason: str) -> str | None:
    """End ``status`` (with ``reason``) the RUNNING runs of ``run_dir`` that process ``pid`` of this host started
    (a job whose worker died under it); return the last one's id."""
    import socket

    c = client(tracking_uri)
    quoted = run_dir.replace("'", "\\'")
    found = None
    for exp in c.search_experiments():
        for run in c.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.run_dir = '{quoted}' and attributes.status = 'RUNNING'",
            max_results=100,
        ):
            tags = run.data.tags
            if tags.get(HOST_TAG) == socket.gethostname() and tags.get(PID_TAG) == pid:
                end_run(tracking_uri, run.info.run_id, status, reason)
                found = run.info.run_id
    return found


def reopen_run(
    tracking_uri: str, run_id: str, update: int, provenance: Mapping[str, str] | None = None
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Set a run back to RUNNING to resume it before ``update``; return the last step logged per metric, and the
    run's provenance changes with this resume's (``provenance``: this process's ``psbench.<key>`` tags; see
    :func:`psbench.tracking.provenance.changes`, recorded in tag ``psbench.provenance_changes``).

    A run missing from the store (or deleted) is a :class:`ConfigError` on ``resume``.
    """
    import json

    from mlflow.exceptions import MlflowException

    from psbench.tracking.provenance import CHANGES_TAG, changes, folded

    c = client(tracking_uri)
    try:
        run = c.get_run(run_id)
        last = {k: max(m.step for m in c.get_metric_history(run_id, k)) for k in run.data.metrics}
        c.update_run(run_id, status=RUNNING)
        if "failure_reason" in run.data.tags:  # why it stopped (killed, pre-empted) no longer holds
            c.delete_tag(run_id, "failure_reason")
    except MlflowException:
        raise ConfigError("resume", run_id, f"a run dir whose MLflow run exists (active) in {tracking_uri}") from None
    resumed = run.data.tags.get("psbench.resumed_from_update")
    tags: dict[str, Any] = {"psbench.resumed_from_update": f"{resumed},{update}" if resumed else update}
    found = folded(changes(run.data.tags, update, provenance or {}), MAX_TAG_VALUE)
    if found:
        tags[CHANGES_TAG] = json.dumps(found, separators=(",", ":"))
    set_tags(tracking_uri, run_id, tags)
    return last, found
