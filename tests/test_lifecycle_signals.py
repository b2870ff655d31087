"""SIGINT/SIGTERM/SIGHUP end a run KILLED, at every phase; handled engine=dist failures are one line.

Each test starts the real ``psbench`` (``python -m psbench.cli``) in a subprocess with the
MLflow store of ``psbench_root``, waits for a marker of the phase it targets (the MLflow run
exists; a progress line; the PS waiting for learners), sends the signal, and checks what a
user or a job scheduler sees: the exit code (130 / 143), one line on stderr, ``summary.json``
with ``status: killed`` and what was done, the MLflow run KILLED with ``failure_reason``, no
process of the run left and no ``learner_data.pt``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from psbench import launchers

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]  # SIGHUP: a closed terminal, a dropped ssh session


def _sigint_as_in_a_terminal() -> None:
    """SIGINT and SIGHUP at their defaults in the child, as a terminal starts a command: a test run from a
    background job (``cmd &`` in a script) inherits SIGINT ignored, one run under ``nohup`` SIGHUP ignored, and
    psbench, like any Unix program, leaves an ignored signal ignored (``lifecycle.install``; see
    :func:`test_under_nohup_a_hangup_is_ignored_and_the_run_finishes`), so the signals these tests send would never
    arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _as_under_nohup() -> None:
    """The child as ``nohup psbench …`` starts it: SIGHUP ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


class Psbench:
    """A running ``psbench`` whose stdout/stderr go to files under ``root``."""

    def __init__(self, root: Path, *args: str, preexec=_sigint_as_in_a_terminal) -> None:
        env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
        env["PSBENCH_ROOT"] = str(root)
        self.root, self.out, self.err = root, root / "stdout.txt", root / "stderr.txt"
        with open(self.out, "w") as o, open(self.err, "w") as e:  # its own group: killpg = Ctrl-C in a terminal
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "psbench.cli", *args],
                cwd=root,
                env=env,
                stdout=o,
                stderr=e,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=preexec,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def wait_for(self, ready, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, f"psbench ended early ({self.proc.returncode}): {self.text()[-3000:]}"
            assert time.monotonic() < deadline, f"marker not seen: {self.text()[-3000:]}"
            time.sleep(0.05)

    def kill(self, sig: int, group: bool = False, timeout: float = 120) -> tuple[int, str]:
        os.killpg(self.proc.pid, sig) if group else os.kill(self.proc.pid, sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        return rc, self.err.read_text(errors="replace")


@pytest.fixture
def handlers():
    """psbench's handlers installed in this process for one test, then pytest's put back."""
    from psbench import lifecycle

    saved = {s: signal.getsignal(s) for s in lifecycle.SIGNALS}
    hook = sys.unraisablehook
    lifecycle.reset()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, even where SIGINT came in ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    lifecycle.install()
    yield lifecycle
    lifecycle.reset()
    sys.unraisablehook = hook
    for s, h in saved.items():
        signal.signal(s, h)


def test_a_signal_swallowed_by_a_finalizer_is_raised_at_the_next_safe_point(handlers):
    """Garbage collection runs finalizers at arbitrary points; Python swallows what they raise. A signal
    delivered inside one (seen under load: an sqlalchemy weakref callback) must not be lost."""

    class Dropped:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10_000):  # the handler runs here, inside the finalizer
                pass

    x = Dropped()
    del x  # Killed raised inside __del__ and swallowed
    with pytest.raises(handlers.Killed) as k:
        for _ in handlers.checked(range(10)):  # a safe point (the simulation's loop) raises it
            pass
    assert k.value.exit_code == 143


def test_a_signal_waits_for_the_boundary_inside_deferred_and_is_raised_once(handlers):
    lifecycle = handlers
    steps = []
    with pytest.raises(lifecycle.Killed) as k:
        with lifecycle.deferred():
            for step in range(3):
                if step == 1:
                    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here and only records it
                steps.append(step)
                if step == 1:
                    lifecycle.check()  # the boundary after step 1
    assert steps == [0, 1] and k.value.exit_code == 143 and k.value.reason == "killed by SIGTERM"
    os.kill(os.getpid(), signal.SIGINT)  # a second signal during the clean-up is not raised again
    lifecycle.check()
    with pytest.raises(lifecycle.Killed) as fresh:  # outside a deferred section a signal raises at once
        lifecycle.reset()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    assert fresh.value.exit_code == 130 and fresh.value.signal_name == "SIGINT"


@pytest.mark.parametrize("writer", ["savez", "torch_save"])
def test_a_signal_inside_a_file_writer_waits_for_the_whole_file_then_ends_the_run(handlers, tmp_path, writer):
    """A signal that arrived inside ``np.savez``'s ``zipfile`` (seen in CI, a SIGHUP while schedule.npz was written)
    made zipfile's own clean-up raise ``ValueError: Can't close the ZIP file while there is an open writing handle``,
    so the job ended FAILED, not KILLED. The write now finishes, the file is whole, then Killed is raised."""
    import numpy as np
    import torch

    from psbench import files

    lifecycle = handlers
    path = tmp_path / "out.bin"

    class SignalledMidWrite:
        """An array whose buffer export (inside the zip member's writer) delivers the signal."""

        def __init__(self) -> None:
            self.data = np.arange(1000)

        def __array__(self, dtype=None, copy=None):
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(10_000):  # the handler runs here, inside the writer
                pass
            return self.data

    def savez(fh) -> None:
        import zipfile

        with zipfile.ZipFile(fh, "w") as zf, zf.open("a.npy", "w") as member:
            np.lib.format.write_array(member, np.asarray(SignalledMidWrite()))

    with pytest.raises(lifecycle.Killed) as k:
        if writer == "savez":
            files.write_atomic(path, savez)
        else:
            files.torch_save({"a": torch.arange(3), "b": SignalledMidWriteTensor()}, path)
    assert k.value.signal_name == "SIGHUP"
    if writer == "savez":
        import zipfile

        with zipfile.ZipFile(path) as zf:
            assert np.array_equal(np.lib.format.read_array(zf.open("a.npy")), np.arange(1000))
    else:
        assert torch.load(path, weights_only=False)["a"].tolist() == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no .tmp left


class SignalledMidWriteTensor:
    """Pickled by ``torch.save``: its ``__reduce__`` runs inside the serializer and delivers the signal there."""

    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(10_000):
            pass
        return (SignalledMidWriteTensor, ())


def test_a_worker_holds_a_signal_between_jobs_and_only_its_next_job_ends_killed(handlers, tmp_path):
    """A joblib worker (``hold_in_worker``, its initializer): a signal while idle is recorded, not raised (an idle
    worker that died would make loky kill every worker), and copies of it within COPY_S count once; the next job
    raises it at its first safe point; the job after runs (the worker was signalled alone); once the sweep itself
    was signalled (its signal file), every job the worker takes ends at once."""
    lifecycle = handlers
    lifecycle.hold_in_worker(str(tmp_path))
    assert lifecycle.started_as_worker() and (tmp_path / f"ready.{os.getpid()}").exists()
    os.kill(os.getpid(), signal.SIGTERM)  # idle: held
    os.kill(os.getpid(), signal.SIGTERM)  # the sweep's forwarded copy: the same signal
    time.sleep(0.1)
    assert lifecycle._received == [signal.SIGTERM]

    def job() -> str:
        with lifecycle.worker_job():
            lifecycle.release()  # what psbench.job.execute does first
            lifecycle.check()  # an update boundary
        return "ran"

    with pytest.raises(lifecycle.Killed) as k:
        job()
    assert k.value.signal_name == "SIGTERM"
    assert job() == "ran"
    (tmp_path / lifecycle.SIGNAL_FILE).write_text(str(int(signal.SIGINT)))
    for _ in range(2):
        with pytest.raises(lifecycle.Killed) as k:
            job()
        assert k.value.signal_name == "SIGINT"


def test_the_sweep_forwards_a_signal_only_to_workers_that_are_ready_and_raises_it_at_the_end(handlers, tmp_path):
    """``forwarding``: the signal is left in the signal file for workers still starting (whose default action would
    end them, and loky would then kill the others), sent to the ready ones, and raised when the section ends."""
    import multiprocessing

    lifecycle = handlers
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,))
    child.start()
    try:
        with pytest.raises(lifecycle.Killed) as k:
            with lifecycle.forwarding(tmp_path):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)
                assert child.is_alive()  # not ready: not signalled, the file says it
                assert (tmp_path / lifecycle.SIGNAL_FILE).read_text() == str(int(signal.SIGTERM))
                (tmp_path / f"ready.{child.pid}").touch()
                os.kill(os.getpid(), signal.SIGTERM)  # a second signal (not a copy: 0.5 s later): now passed on
                child.join(30)
        assert k.value.signal_name == "SIGTERM"
        assert child.exitcode == -signal.SIGTERM
    finally:
        child.kill()


def _runs(root: Path) -> list[tuple[str, str, dict[str, str]]]:
    """(run id, status, tags) of every job's run in root/mlflow.db (a sweep's parent run left out), via sqlite."""
    with sqlite3.connect(root / "mlflow.db", timeout=30) as db:
        runs = db.execute(
            "select run_uuid, status from runs where lifecycle_stage = 'active' order by start_time"
        ).fetchall()
        out = [
            (rid, status, dict(db.execute("select key, value from tags where run_uuid = ?", (rid,))))
            for rid, status in runs
        ]
    parents = {tags.get("mlflow.parentRunId") for _, _, tags in out}
    return [r for r in out if r[0] not in parents]


def _left_processes(root: Path) -> list[str]:
    """Command lines of live processes that mention ``root`` (psbench itself, learners)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(root) in cmd and state != "Z":
            found.append(cmd)
    return found


def _training(root: Path) -> int:
    """How many job runs in root/mlflow.db have logged a training loss."""
    with sqlite3.connect(root / "mlflow.db", timeout=30) as db:
        return db.execute("select count(distinct run_uuid) from metrics where key = 'train_loss'").fetchone()[0]


def _in_session(sid: int) -> list[str]:
    """Command lines of live processes of session ``sid`` (psbench started with ``start_new_session``)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat[3]) == sid and stat[0] != "Z":
            found.append(cmd)
    return found


def _assert_killed(root: Path, run_dir: Path, sig: int, rc: int, err: str) -> dict:
    """Exit 128 + sig, one ``psbench: killed by`` line, summary killed, MLflow KILLED, nothing left; the summary."""
    name = signal.Signals(sig).name
    assert rc == EXIT[sig], err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [s for s in err.splitlines() if s.startswith("psbench: killed")]
    assert len(lines) == 1 and lines[0].startswith(f"psbench: killed by {name}"), err[-3000:]
    assert lines[0].endswith(f"summary in {run_dir / 'summary.json'}")
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "killed" and s["signal"] == name
    ((run_id, status, tags),) = _runs(root)
    assert status == "KILLED" and s["mlflow_run_id"] == run_id
    assert tags["failure_reason"] == s["failure_reason"] == lines[0].removeprefix("psbench: ").split(";")[0]
    assert tags["status"] == "killed"
    assert not _left_processes(root)
    assert not list(root.rglob("learner_data.pt"))
    return s


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_before_training_ends_the_run_killed(psbench_root, sig):
    """Signalled as soon as the MLflow run exists: the schedule of ~86 k gradients is still being simulated."""
    run_dir = psbench_root / "run"
    p = Psbench(psbench_root, "batch_size=1", "epochs=60", "trainer.progress=plain", f"hydra.run.dir={run_dir}")
    p.wait_for(lambda: bool(_runs(psbench_root)))
    rc, err = p.kill(sig)
    s = _assert_killed(psbench_root, run_dir, sig, rc, err)
    assert s["updates_done"] == s["samples"] == 0 and s["test_error"] is None
    assert s["failure_reason"] == f"killed by {sig.name} before training"
    assert "update " not in p.out.read_text()  # no training step ran


def test_a_run_whose_process_was_sigkilled_is_ended_killed_by_the_next_job_in_its_dir(psbench_root):
    """SIGKILL (or the OOM killer, or a lost session) leaves no record: the run stays RUNNING. The next job in the
    same run dir finds it (tag ``run_dir``, this host, a pid that no longer runs) and ends it KILLED with the
    reason, before its own run starts; its own run then finishes."""
    run_dir = psbench_root / "run"
    p = Psbench(psbench_root, "batch_size=1", "epochs=60", "trainer.progress=plain", f"hydra.run.dir={run_dir}")
    p.wait_for(lambda: bool(_runs(psbench_root)))
    os.killpg(p.proc.pid, signal.SIGKILL)
    p.proc.wait(timeout=60)
    ((lost, status, tags),) = _runs(psbench_root)
    assert status == "RUNNING" and tags["psbench.pid"] == str(p.proc.pid)
    again = Psbench(psbench_root, "trainer.progress=plain", f"hydra.run.dir={run_dir}")
    assert again.proc.wait(timeout=300) == 0, again.text()[-3000:]
    (first, second) = _runs(psbench_root)
    assert first[0] == lost and first[1] == "KILLED"
    assert first[2]["failure_reason"].startswith(f"its process ({tags['psbench.host']}, pid {p.proc.pid}) ended")
    assert second[1] == "FINISHED"
    assert f"MLflow run {lost} of an earlier job in {run_dir} ended KILLED" in again.text()


def test_under_nohup_a_hangup_is_ignored_and_the_run_finishes(psbench_root):
    """``nohup psbench …`` asks to survive a closed terminal: psbench leaves the inherited SIG_IGN in place, so the
    SIGHUP that ends an interactive run (exit 129, KILLED) changes nothing here — the run finishes, FINISHED."""
    run_dir = psbench_root / "run"
    p = Psbench(psbench_root, "trainer.progress=plain", f"hydra.run.dir={run_dir}", preexec=_as_under_nohup)
    p.wait_for(lambda: bool(_runs(psbench_root)))
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.proc.wait(timeout=300) == 0, p.text()[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "finished" and s["updates_done"] > 0
    ((_, status, _),) = _runs(psbench_root)
    assert status == "FINISHED"


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_a_signal_while_psbench_starts_up_still_leaves_the_jobs_record(psbench_root, mlflow_runs, delay):
    """The ``psbench`` command holds a signal from its first instant (after the interpreter's own start-up, tens of
    ms) until the job's run dir exists: SIGTERM at 0.5 / 1.5 s (imports, composition, validation) ends the job
    KILLED with its summary.json, and no MLflow run."""
    run_dir = psbench_root / "run"
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PSBENCH_ROOT"] = str(psbench_root)
    psbench = Path(sys.executable).parent / "psbench"  # the console script a user types
    proc = subprocess.Popen(
        [str(psbench), "trainer.progress=none", f"hydra.run.dir={run_dir}"],
        cwd=psbench_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["status"] == "killed" and s["signal"] == "SIGTERM" and s["mlflow_run_id"] is None
    assert s["failure_reason"] == "killed by SIGTERM before training"
    last = err.strip().splitlines()[-1]
    assert last == f"psbench: killed by SIGTERM before training; summary in {run_dir}/summary.json"
    assert mlflow_runs(psbench_root) == []


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_during_training_stops_at_an_update_boundary(psbench_root, sig):
    """Lightning's SIGTERM handling (exit 0, run FAILED) does not get the signal; the summary says how far it got."""
    run_dir = psbench_root / "run"
    p = Psbench(
        psbench_root, "epochs=3000", "trainer.progress=plain", "trainer.eval_every_epochs=1", f"hydra.run.dir={run_dir}"
    )
    p.wait_for(lambda: "update " in p.out.read_text())
    rc, err = p.kill(sig)
    s = _assert_killed(psbench_root, run_dir, sig, rc, err)
    assert 0 < s["updates_done"] < s["updates_total"] and s["samples"] == 128 * s["updates_done"]  # λμ per update
    assert s["failure_reason"] == f"killed by {sig.name} after {s['updates_done']} of {s['updates_total']} PS updates"
    assert 0 <= s["test_error"] < 0.9 and s["sim_time_s"] > 0  # trained weights, evaluated at the boundary
    # every update's metrics logged before the signal are in the store (MLflow's asynchronous queue drained):
    # train_loss at updates 0, 10, 20, … (trainer.log_every_n_updates) up to the last update done
    ((run_id, _, _),) = _runs(psbench_root)
    with sqlite3.connect(psbench_root / "mlflow.db", timeout=30) as db:
        steps = [
            r[0]
            for r in db.execute(
                "select step from metrics where run_uuid = ? and key = 'train_loss' order by step", (run_id,)
            )
        ]
    assert steps == list(range(0, s["updates_done"], 10))


def test_a_signal_stops_a_multirun(psbench_root):
    """The job running ends KILLED, no further job starts, the sweep exits 143."""
    sweep = psbench_root / "sweep"
    p = Psbench(psbench_root, "-m", "seed=0,1,2", "epochs=3000", "trainer.progress=plain", f"hydra.sweep.dir={sweep}")
    p.wait_for(lambda: "update " in p.out.read_text())
    rc, err = p.kill(signal.SIGTERM)
    _assert_killed(psbench_root, sweep / "0", signal.SIGTERM, rc, err)
    assert not (sweep / "1").exists()


@pytest.mark.skipif(not launchers.installed("joblib"), reason="hydra-joblib-launcher (the cluster extra) missing")
@pytest.mark.parametrize("group", [True, False], ids=["group", "sweep_process_only"])
def test_a_signal_stops_a_joblib_sweep_and_every_job_in_flight_ends_killed(psbench_root, group):
    """hydra/launcher=joblib: the jobs run in loky worker processes. Ctrl-C (the whole group) or a SIGTERM to the sweep
    process alone (``kill <pid>``, ``docker stop``; the sweep forwards it): each job in flight ends KILLED at an update
    boundary with its summary.json, the job a worker takes after the signal ends before training (no MLflow run), the
    sweep waits for their records, ends its parent run KILLED and exits 143 — no run left RUNNING, no worker left
    behind."""
    sweep = psbench_root / "sweep"
    p = Psbench(
        psbench_root,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "seed=0,1,2",
        "epochs=3000",
        "trainer.progress=plain",
        f"hydra.sweep.dir={sweep}",
    )
    p.wait_for(lambda: _training(psbench_root) == 2)
    rc, err = p.kill(signal.SIGTERM, group=group)
    assert rc == EXIT[signal.SIGTERM], err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    runs = _runs(psbench_root)
    assert len(runs) == 2 and {status for _, status, _ in runs} == {"KILLED"}, runs
    for n in (0, 1):
        s = json.loads((sweep / str(n) / "summary.json").read_text())
        assert s["status"] == "killed" and s["signal"] == "SIGTERM" and s["updates_done"] > 0
        assert s["failure_reason"].startswith("killed by SIGTERM after ")
        line = f"psbench: {s['failure_reason']}; summary in {sweep / str(n) / 'summary.json'}"
        assert err.count(line) == 1, err[-3000:]
    late = json.loads((sweep / "2" / "summary.json").read_text())
    assert late["status"] == "killed" and late["failure_reason"] == "killed by SIGTERM before training"
    with sqlite3.connect(psbench_root / "mlflow.db", timeout=30) as db:
        statuses = dict(db.execute("select run_uuid, status from runs"))
    assert len(statuses) == 3 and set(statuses.values()) == {"KILLED"}  # the parent too
    deadline = time.monotonic() + 30  # the loky workers, and its resource tracker once it sees the sweep gone
    while _in_session(p.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _in_session(p.proc.pid)


@pytest.mark.skipif(not launchers.installed("joblib"), reason="hydra-joblib-launcher (the cluster extra) missing")
def test_a_signal_to_an_optuna_study_under_joblib_keeps_the_trial_that_finished(psbench_root):
    """A batch of two trials in joblib's workers: the one that finished before the signal is COMPLETE with its
    result, the one in flight is KILLED (its run, its summary.json) and FAIL ``interrupted`` (rerun on resume)."""
    import optuna
    from optuna.trial import TrialState

    p = Psbench(
        psbench_root,
        "-m",
        "hydra/sweeper=psbench_optuna",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "hydra.sweep.dir=s",
        "hydra.sweeper.study_name=pair",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.n_jobs=2",
        "hydra.sweeper.cases={short: {epochs: 1}, long: {epochs: 3000}}",
        "trainer.progress=plain",
    )
    sweep = psbench_root / "s"

    def short_done() -> bool:
        return (
            any(json.loads(f.read_text()).get("status") == "finished" for f in sweep.glob("*/summary.json"))
            and _training(psbench_root) == 2
        )

    p.wait_for(short_done)
    rc, err = p.kill(signal.SIGTERM)
    assert rc == EXIT[signal.SIGTERM], err[-3000:]
    trials = {
        t.params["case"]: t
        for t in optuna.load_study(study_name="pair", storage=f"sqlite:///{sweep}/optuna.db").get_trials()
    }
    assert trials["short"].state == TrialState.COMPLETE and trials["short"].value is not None
    assert trials["long"].state == TrialState.FAIL and trials["long"].user_attrs["interrupted"]
    statuses = {tags["case"]: status for _, status, tags in _runs(psbench_root)}
    assert statuses == {"short": "FINISHED", "long": "KILLED"}
    s = json.loads((sweep / str(trials["long"].number) / "summary.json").read_text())
    assert s["status"] == "killed" and s["signal"] == "SIGTERM"


def test_a_signal_stops_an_optuna_search_and_its_trial_runs_again_on_resume(psbench_root):
    """hydra/sweeper=psbench_optuna: the trial killed is FAIL ``interrupted``, nothing runs after it."""
    import optuna
    from optuna.trial import TrialState

    p = Psbench(
        psbench_root,
        "-m",
        "hparams_search=rudra_pareto",
        "hydra.sweeper.n_trials=3",
        "epochs=3000",
        "trainer.progress=plain",
    )
    p.wait_for(lambda: "update " in p.out.read_text())
    rc, err = p.kill(signal.SIGINT)
    (sweep,) = (psbench_root / "multirun/optuna").glob("rudra_pareto-*")  # the study's default dir
    trials = optuna.load_study(study_name="rudra_pareto", storage=f"sqlite:///{sweep}/optuna.db").get_trials()
    (killed,) = [t for t in trials if t.user_attrs.get("interrupted")]
    assert killed.state == TrialState.FAIL
    _assert_killed(psbench_root, sweep / str(killed.number), signal.SIGINT, rc, err)
    # the next run of the same command reruns it in its job dir (tests/test_sweeper_resume.py)
    assert not [t for t in trials if t.state == TrialState.COMPLETE]  # nothing ran after it


def _external(root: Path, *args: str) -> Psbench:
    return Psbench(
        root,
        "engine=dist",
        "engine.launch=external",
        "engine.master_addr=127.0.0.2",
        "learners=2",
        "trainer.progress=none",
        f"hydra.run.dir={root / 'run'}",
        *args,
    )


def test_learners_that_do_not_join_fail_the_run_in_one_line(psbench_root):
    """engine.connect_timeout_s bounds the wait; what it waits for is said once; no traceback; FAILED + reason."""
    p = _external(psbench_root, "engine.connect_timeout_s=2")
    rc = p.proc.wait(timeout=300)
    err = p.err.read_text()
    assert rc == 1, err[-3000:]
    assert err.count("waiting up to 2 s (engine.connect_timeout_s) for 2 learners") == 1
    assert err.strip().splitlines()[-1] == (
        "psbench: error: learner ranks [1, 2] did not join within 2 s (engine.connect_timeout_s)"
    )
    assert "Traceback" not in err and "Error executing job" not in err
    ((_, status, tags),) = _runs(psbench_root)
    assert status == "FAILED" and tags["failure_reason"] == err.strip().splitlines()[-1].removeprefix(
        "psbench: error: "
    )
    assert not (psbench_root / "run" / "learner_data.pt").exists()


def test_ctrl_c_while_the_ps_waits_for_learners_ends_the_run_killed(psbench_root):
    p = _external(psbench_root, "engine.connect_timeout_s=600")
    p.wait_for(lambda: "waiting up to 600 s" in p.err.read_text())
    rc, err = p.kill(signal.SIGINT, group=True)
    s = _assert_killed(psbench_root, psbench_root / "run", signal.SIGINT, rc, err)
    assert s["updates_done"] == 0 and s["failure_reason"] == "killed by SIGINT before training"


def test_a_master_addr_of_another_host_is_refused_before_any_run(psbench_root):
    """The PS listens on engine.master_addr: an address not of this host would hang in connect; exit 2 at once."""
    p = _external(psbench_root, "engine.master_addr=192.0.2.1")  # TEST-NET-1: never a local address
    rc = p.proc.wait(timeout=300)
    err = p.err.read_text()
    assert rc == 2 and err.strip().splitlines()[-1].startswith(
        "psbench: error: engine.master_addr='192.0.2.1' is invalid: allowed an address of this host"
    ), err
    assert _runs(psbench_root) == []


# ---------------------------------------------------------------------------- real learner processes
def _learner_pids(run_dir: Path) -> list[int]:
    return [pid for k, pid in json.loads((run_dir / "dist_pids.json").read_text()).items() if k != "ps"]


def _dist(root: Path) -> tuple[Psbench, Path]:
    run_dir = root / "run"
    p = Psbench(
        root,
        "engine=dist",
        "learners=2",
        "protocol=async",
        "epochs=500",
        "trainer.progress=none",
        f"hydra.run.dir={run_dir}",
    )
    p.wait_for(
        lambda: (
            "learners joined" in (run_dir / "psbench.log").read_text() if (run_dir / "psbench.log").exists() else False
        )
    )
    time.sleep(1)  # mid-run
    return p, run_dir


@pytest.mark.slow
@pytest.mark.parametrize("sig,group", [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["SIGTERM-PS", "Ctrl-C"])
def test_a_signal_to_the_dist_ps_ends_the_run_killed_and_stops_the_learners(psbench_root, sig, group):
    """SIGTERM to the PS, or Ctrl-C to the process group (learners ignore it: the PS stops them)."""
    p, run_dir = _dist(psbench_root)
    learners = _learner_pids(run_dir)
    rc, err = p.kill(sig, group=group)
    s = _assert_killed(psbench_root, run_dir, sig, rc, err)
    assert 0 < s["updates_done"] < s["updates_total"] and s["test_error"] is not None
    assert not [pid for pid in learners if Path(f"/proc/{pid}").exists()]


@pytest.mark.slow
def test_sigterm_to_a_learner_ends_the_run_killed(psbench_root):
    p, run_dir = _dist(psbench_root)
    os.kill(_learner_pids(run_dir)[1], signal.SIGTERM)
    rc = p.proc.wait(timeout=120)
    err = p.err.read_text()
    s = _assert_killed(psbench_root, run_dir, signal.SIGTERM, rc, err)
    assert s["failure_reason"].startswith("killed by SIGTERM (learner rank 2) after ")


def test_a_learner_that_cannot_reach_the_ps_says_so_in_one_line(tmp_path):
    """A learner started by hand or torchrun against a PS that is not there: bounded by connect_timeout_s."""
    import torch

    torch.save({"x": torch.zeros(4, 64), "y": torch.zeros(4, dtype=torch.long)}, tmp_path / "data.pt")
    from psbench.distributed.spec import LearnerSpec

    spec = LearnerSpec(
        addr="127.0.0.2",
        port=9,
        world_size=2,
        timeout_s=5,
        connect_timeout_s=1,
        model={"name": "mlp"},
        input_shape=[64],
        output_size=10,
        task="classification",
        python_path=[],
        data_file=str(tmp_path / "data.pt"),
        seed=0,
        samples_per_gradient=1,
        threads=1,
        delay_s={},
        rank_offset=0,
        window=None,
        compression=None,
    )
    spec.save(tmp_path / "spec.json")
    r = subprocess.run(
        [sys.executable, "-m", "psbench.distributed.learner", str(tmp_path / "spec.json"), "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == (
        "psbench learner rank 1: error: no PS at 127.0.0.2:9 within 1 s (engine.connect_timeout_s)"
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_pre_empted_run_checkpoints_and_its_resume_equals_the_uninterrupted_run(psbench_root, sig):
    """SIGTERM (a scheduler's pre-emption) or SIGHUP (the terminal closed) mid-fit: a checkpoint at the update
    boundary, exit 143 / 129, and ``resume=<run dir>`` then ends with the uninterrupted run's weights, in the same
    MLflow run."""
    args = (
        "epochs=40",
        "trainer.num_threads=1",
        "trainer.checkpoint_every=0",
        "trainer.progress=plain",
        "trainer.log_every_n_updates=1",
    )
    full = Psbench(psbench_root, *args, f"hydra.run.dir={psbench_root / 'full'}")
    assert full.proc.wait(timeout=600) == 0, full.text()[-3000:]
    want = json.loads((psbench_root / "full" / "summary.json").read_text())["weights_sha256"]

    run_dir = psbench_root / "cut"
    p = Psbench(psbench_root, *args, f"hydra.run.dir={run_dir}")
    p.wait_for(lambda: "update 20" in p.out.read_text())
    rc, err = p.kill(sig)
    assert rc == EXIT[sig], err[-3000:]
    killed = json.loads((run_dir / "summary.json").read_text())
    assert killed["signal"] == sig.name
    assert killed["status"] == "killed" and 0 < killed["updates_done"] < killed["updates_total"]
    assert (run_dir / "checkpoint.pt").is_file()  # written although checkpoint_every=0: the signal asked for it

    again = Psbench(psbench_root, *args, f"resume={run_dir}")
    assert again.proc.wait(timeout=600) == 0, again.text()[-3000:]
    done = json.loads((run_dir / "summary.json").read_text())
    assert done["status"] == "finished" and done["weights_sha256"] == want
    assert done["mlflow_run_id"] == killed["mlflow_run_id"]
    assert not (run_dir / "checkpoint.pt").exists()
