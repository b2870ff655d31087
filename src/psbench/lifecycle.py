"""How a run ends on SIGINT, SIGTERM or SIGHUP: the signal becomes :class:`Killed`, raised where it is safe.

:func:`install` (called by the ``psbench`` entry point) replaces Python's SIGINT handling
(``KeyboardInterrupt``) and the default SIGTERM and SIGHUP actions with one handler: SIGHUP (a closed terminal,
a dropped ssh session) ends a run as SIGTERM does, KILLED with a checkpoint and its ``summary.json``. Outside a
:func:`deferred` section the handler raises :class:`Killed` at once; inside one (the training
loop, the dist PS loop, creating or closing the MLflow run, stopping learner processes) it only
records the signal, and :func:`check` raises it at the next safe point — an update boundary — or
the section raises it on leaving. :class:`Killed` is a ``BaseException``, so ``except
Exception`` in Hydra's job runner, MLflow or Lightning does not swallow it; it carries
``progress`` (updates done, samples, simulated or measured time, test error) filled in by the code it
passes through, and the exit code 128 + signal (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

A signal that arrives after the :class:`Killed` was raised (clean-up is running, bounded in
time) is ignored; a third one ends the process the default way. A :class:`Killed` raised inside a
finalizer or a weakref callback (garbage collection runs them at arbitrary points) is swallowed by
Python; :func:`install` hooks ``sys.unraisablehook`` so that such a signal stays pending and the
next safe point raises it (long loops outside the fit, e.g. the simulation, go through
:func:`checked`).

A sweep whose jobs run in a launcher's worker processes (``hydra/launcher=joblib``): the sweep process waits in a
:func:`forwarding` section, which passes each signal on to its workers (and leaves it in a file for those still
starting); a worker holds signals between jobs (:func:`hold_in_worker`, its initializer) and each job runs in
:func:`worker_job`, which ends it KILLED like a single run and hands the sweep a :class:`JobKilled` as the job's
result. Two copies of one signal within :data:`COPY_S` (the process group's and the one the sweep forwarded) count
once. Each job a worker starts leaves ``job.<num>.json`` (its pid and run dir) in that directory, so the sweep can
end the records of the jobs a dead worker took with it. A worker whose sweep process dies (SIGKILL, out of memory)
notices within a second (:func:`_watch_sweep`): its job in flight ends KILLED with its record as after a SIGTERM,
the sweep's MLflow parent run ends KILLED, and the worker exits — before, orphaned workers finished their jobs under a
RUNNING parent and then ignored SIGTERM.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from psbench import files
from psbench.summary import RunSummary

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Killed(BaseException):
    """The run was stopped by signal ``signum``; ``reason`` is one line (``killed by SIGTERM``)."""

    def __init__(self, signum: int, reason: str | None = None) -> None:
        self.signum = signum
        self.reason = reason or f"killed by {signal.Signals(signum).name}"
        self.progress: dict[str, Any] = {}
        self.job_returns: Any = None  # a sweep's: what each job of the batch in flight ended with (joblib launcher)
        self.reported = False  # the CLI printed its line and ended the MLflow run
        super().__init__(self.reason)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class JobKilled(Exception):
    """A job in a launcher's worker ended KILLED (its record is written): the job's result for the sweep, an
    ``Exception`` so that Hydra returns it as a failed ``JobReturn`` and the launcher's other jobs go on."""

    def __init__(self, reason: str, signum: int) -> None:
        super().__init__(reason, signum)
        self.reason, self.signum = reason, signum

    def __str__(self) -> str:
        return self.reason


#: two copies of one signal within this many seconds are one signal (a process group's, and the sweep's forward)
COPY_S = 0.25

_received: list[int] = []
_last = 0.0
_depth = 0
_raised = False
_held = False
_forwarding: Path | None = None  # the sweep's signal directory while its jobs run in workers
_worker: Path | None = None  # in a launcher's worker process: the sweep's signal directory
_in_job = False  # a worker: a job runs now (worker_job)
_orphan_hooks: list[Callable[[str, int], None]] = []  # on_orphaned_sweep's
_sweep_dir: str | None = None  # a worker: the sweep dir of its last job (psbench_sweep.json: the parent run)
_watch_stop: threading.Event | None = None  # a worker: stops _watch_sweep (reset)
_orphaned: str | None = None  # a worker whose sweep process died: which (the reason its job ends KILLED)
#: in :func:`forwarding`'s directory: the sweep's signal, for workers not ready when it came
SIGNAL_FILE = "signal"
_installed: set[int] = set()


def killed(signum: int, reason: str | None = None) -> Killed:
    """The one :class:`Killed` of this process (later signals are then ignored)."""
    global _raised
    _raised = True
    if reason is None and _orphaned is not None and signum == signal.SIGTERM:
        reason = f"killed by SIGTERM: its sweep process ({_orphaned}) died"
    return Killed(signum, reason)


def _handler(signum: int, frame: object) -> None:
    global _last
    now = time.monotonic()
    if _received and _received[-1] == signum and now - _last < COPY_S:
        return  # a copy of the signal just received
    _last = now
    _received.append(signum)
    if _forwarding is not None:
        _forward(signum)
    if len(_received) >= 3:  # the user insists: the default action, now
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _raised or _depth:
        return
    raise killed(signum)


def _unraisable(unraisable: Any) -> None:
    """A :class:`Killed` that a finalizer swallowed is not lost: it stays pending for the next safe point."""
    global _raised
    if isinstance(unraisable.exc_value, Killed):
        _raised = False
        return
    _next_unraisable_hook(unraisable)


_next_unraisable_hook = sys.unraisablehook


def install(hold: bool = False) -> None:
    """Take over :data:`SIGNALS` in this (main) thread; a signal ignored by the parent stays ignored (``nohup``).

    ``hold``: the process is starting: a signal is only recorded until :func:`release` (the ``psbench`` entry
    point holds from its first instant, so a job stopped while it starts up still writes its record).
    """
    global _depth, _held
    if threading.current_thread() is not threading.main_thread():
        return
    if hold and not _held:
        _held = True
        _depth += 1
    sys.unraisablehook = _unraisable
    files.hold_signals = deferred  # a signal waits for the file being written (psbench.files)
    for s in SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _handler)
            _installed.add(s)


def release() -> None:
    """End :func:`install`'s start-up hold (idempotent); a signal received meanwhile is raised now."""
    global _depth, _held
    if _held:
        _held = False
        _depth -= 1
        if _depth == 0:
            check()


def reclaim() -> None:
    """Put the handler back on the signals :func:`install` took, if a library (Lightning) replaced it."""
    if threading.current_thread() is threading.main_thread():
        for s in _installed:
            signal.signal(s, _handler)


def pending() -> int | None:
    """The first signal received and not yet raised as :class:`Killed`, if any."""
    return _received[0] if _received and not _raised else None


def check() -> None:
    """A safe point: raise :class:`Killed` if a signal came."""
    s = pending()
    if s is not None:
        raise killed(s)


def checked(items: Iterable[Any], every: int = 256) -> Iterator[Any]:
    """``items``, with a safe point (:func:`check`) every ``every`` of them."""
    for i, item in enumerate(items):
        if i % every == 0:
            check()
        yield item


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold signals inside; :func:`check` raises them, and so does leaving the outermost section normally.

    Outside the main thread, where no signal handler runs, it holds nothing and raises nothing."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if _depth == 0:
        check()


def _forward(signum: int) -> None:
    """The sweep's signal, for its workers: written to the signal file (a worker that is still starting, or not
    started yet, reads it once its handler is in place) and sent to each worker that is ready (its handler is)."""
    assert _forwarding is not None
    with contextlib.suppress(OSError):
        (_forwarding / SIGNAL_FILE).write_text(str(signum))
    for child in multiprocessing.active_children():
        if child.pid and (_forwarding / f"ready.{child.pid}").exists():
            with contextlib.suppress(OSError):
                os.kill(child.pid, signum)


@contextlib.contextmanager
def forwarding(signals: Path) -> Iterator[None]:
    """The sweep process while its jobs run in worker processes (its ``multiprocessing`` children, started with
    :func:`hold_in_worker` and ``signals``, a directory): a signal is held here and passed on to them; leaving the
    section raises it, once every job has ended and left its record."""
    global _forwarding
    was, _forwarding = _forwarding, signals
    try:
        with deferred():
            yield
    finally:
        _forwarding = was


def hold_in_worker(signals: str) -> None:
    """A launcher's worker process starts (joblib's initializer; ``signals``: the sweep's :func:`forwarding`
    directory): a signal between jobs is only recorded — an idle worker is never ended by one, which would make loky
    kill every worker — and the next job (:func:`worker_job`) ends KILLED before training."""
    global _worker
    _worker = Path(signals)
    install(hold=True)
    with contextlib.suppress(OSError):
        (_worker / f"ready.{os.getpid()}").touch()  # from now on the sweep sends its signals here
    _read_sweep_signal()
    _watch_sweep(os.getppid())


#: seconds between a worker's looks at whether its sweep process still runs
WATCH_S = 0.5


def _watch_sweep(sweep_pid: int) -> None:
    """A worker's thread: when its sweep process ``sweep_pid`` is gone (the worker's parent changes), the job in
    flight ends KILLED at its next update boundary (a SIGTERM to itself, with its record), the sweep's parent run
    ends KILLED, and the worker exits (an orphaned worker used to finish its job under a RUNNING parent, then ignore
    SIGTERM)."""
    global _watch_stop
    stop = _watch_stop = threading.Event()

    def watch() -> None:
        while not stop.wait(WATCH_S):
            if os.getppid() != sweep_pid:
                break
        else:
            return
        global _orphaned
        _orphaned = f"pid {sweep_pid}"
        os.kill(os.getpid(), signal.SIGTERM)
        while _in_job and not stop.wait(0.2):
            pass
        time.sleep(1.0)  # the job's last record (the sweep's ledger) after its summary
        if stop.is_set():
            return
        _end_orphaned_sweep(sweep_pid)
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, name="psbench-watch-sweep", daemon=True).start()


def on_orphaned_sweep(hook: Callable[[str, int], None]) -> None:
    """Call ``hook(sweep_dir, sweep_pid)`` when this worker's sweep process dies (:func:`_watch_sweep`): the tracking
    layer ends the sweep's MLflow parent run there (:func:`psbench.tracking.sweep.end_orphaned_parent`); lifecycle
    imports nothing above it."""
    if hook not in _orphan_hooks:
        _orphan_hooks.append(hook)


def _end_orphaned_sweep(sweep_pid: int) -> None:
    """The sweep process died: the hooks of :func:`on_orphaned_sweep` run (its parent run ends KILLED), and its signal
    directory goes (its own clean-up never ran)."""
    import shutil

    if _sweep_dir is not None:
        for hook in _orphan_hooks:
            with contextlib.suppress(Exception):
                hook(_sweep_dir, sweep_pid)
    if _worker is not None:
        shutil.rmtree(_worker, ignore_errors=True)


def _read_sweep_signal() -> None:
    """In a worker: the sweep's signal, if it got one (held: recorded, not raised)."""
    assert _worker is not None
    try:
        signum = int((_worker / SIGNAL_FILE).read_text())
    except (OSError, ValueError):
        return
    if signum not in _received:
        _received.append(signum)


def started_as_worker() -> bool:
    """Whether this process is a launcher's worker started by :func:`hold_in_worker` (joblib's loky workers)."""
    return _worker is not None


@contextlib.contextmanager
def worker_job(num: int | None = None, run_dir: str | None = None, sweep_dir: str | None = None) -> Iterator[None]:
    """One job in a worker (:func:`started_as_worker`): signals act as in a single run; one the worker got while
    idle, or the sweep's, ends the job at its first safe point (before training). Afterwards the worker holds
    signals again and forgets its own (a worker signalled alone does not end its later jobs).

    ``num``, ``run_dir``: the job's number and run dir, left in the sweep's signal directory as ``job.<num>.json``
    with this worker's pid (:func:`started_jobs`), so the sweep can end the record of a job whose worker died."""
    global _depth, _held, _raised, _in_job, _sweep_dir
    _read_sweep_signal()
    _raised = False
    if sweep_dir is not None:
        _sweep_dir = sweep_dir
    if _worker is not None and num is not None:
        import json

        with contextlib.suppress(OSError):
            (_worker / f"job.{num}.json").write_text(json.dumps({"pid": os.getpid(), "run_dir": run_dir}))
    _in_job = True
    try:
        yield
    finally:
        _in_job = False
        _received.clear()
        _raised = False
        if not _held:
            _held = True
            _depth += 1


def started_jobs(signals: Path) -> dict[int, dict[str, Any]]:
    """The jobs that workers started under the signal directory ``signals``: number → ``{pid, run_dir}``."""
    import json

    out = {}
    for f in signals.glob("job.*.json"):
        with contextlib.suppress(OSError, ValueError):
            out[int(f.name.split(".")[1])] = json.loads(f.read_text())
    return out


def reset() -> None:
    """Forget received signals (a fresh start, e.g. in tests that run jobs in-process)."""
    global _raised, _depth, _held, _forwarding, _worker, _in_job, _sweep_dir, _watch_stop, _orphaned
    _received.clear()
    _raised, _depth, _held, _forwarding, _worker = False, 0, False, None, None
    _in_job, _sweep_dir, _orphaned = False, None, None
    if _watch_stop is not None:
        _watch_stop.set()
        _watch_stop = None


def summary(k: Killed) -> RunSummary:
    """``summary.json`` of a killed run: status, signal, reason and what was done so far (a divergence found when the
    updates applied before the signal were read back included)."""
    p = k.progress
    done = int(p.get("updates_done") or 0)
    return RunSummary(
        status="killed",
        signal=k.signal_name,
        failure_reason=describe(k),
        diverged=p.get("diverged_at_update") is not None,
        diverged_at_update=p.get("diverged_at_update"),
        divergence=p.get("divergence"),
        updates_done=done,
        updates_total=p.get("updates_total"),
        ps_updates=done,
        samples=int(p.get("samples") or 0),
        sim_time_s=p.get("sim_time_s"),
        run_time_s=p.get("run_time_s"),
        test_error=p.get("test_error"),
        test_loss=p.get("test_loss"),
    )


def describe(k: Killed) -> str:
    """``killed by SIGTERM after 37 of 120 PS updates`` (the MLflow ``failure_reason``), ``…; diverged at update 37 (a
    non-finite loss or update)`` where the updates read back at the signal had."""
    p = k.progress
    total = p.get("updates_total")
    if "updates_done" not in p:
        return f"{k.reason} before training"
    of = f" of {total}" if total is not None else ""
    line = f"{k.reason} after {int(p['updates_done'])}{of} PS updates"
    if p.get("diverged_at_update") is not None:
        line += f"; diverged at update {p['diverged_at_update']} ({p.get('divergence')})"
    return line
