"""Bad input through the real ``psbench`` command: one line naming the key, exit 2, no MLflow run.

One row per case a user met: each is refused by the config
schema or the store checks before any MLflow run exists — before, each crashed with a traceback
after the run was created, or was silently ignored.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def _file(name: str, data: bytes) -> Callable[[Path], list[str]]:
    def setup(root: Path) -> list[str]:
        (root / name).write_bytes(data)
        return []

    return setup


def _garbage_schedule(root: Path) -> list[str]:
    (root / "schedule.npz").write_bytes(b"this is not a schedule\n" * 10)
    return ["engine=dist", "engine.mode=replay", f"engine.schedule={root / 'schedule.npz'}"]


# (overrides, setup(root) -> more overrides, key, words the line must hold)
CASES = {
    "seed_negative": (["seed=-5"], None, "seed", ["4294967295"]),
    "seed_2_pow_70": ([f"seed={2**70}"], None, "seed", ["4294967295"]),
    "seed_2_pow_70_as_typed": (["seed=2**70"], None, "seed", ["4294967295"]),
    "lr_not_float32": (["optimizer.lr=1e308"], None, "optimizer.lr", ["finite float32"]),
    "lr_policy_unknown_key": (["+lr_policy.foo=1"], None, "lr_policy.foo", ["lr_policy=constant"]),
    "adam_betas_out_of_range": (["optimizer=adam", "optimizer.betas=[2,3]"], None, "optimizer.betas", ["[0, 1)"]),
    "nesterov_without_momentum": (
        ["+optimizer.nesterov=true", "optimizer.momentum=0"],
        None,
        "optimizer.nesterov",
        ["momentum > 0"],
    ),
    "batching_unknown": (["trainer.batching=foo"], None, "trainer.batching", ["auto", "vmap", "loop"]),
    "artifacts_unwritable": (
        [],
        _file("mlartifacts", b"a file, not a directory"),
        "logger.artifact_location",
        ["writable directory"],
    ),
    "mlflow_db_garbage": ([], _file("mlflow.db", b"\x00garbage" * 512), "logger.tracking_uri", ["not a database"]),
    "experiment_name_empty": (["logger.experiment_name=''"], None, "logger.experiment_name", ["non-empty"]),
    "tracking_uri_file_store": (
        ["logger.tracking_uri=file:./mlruns"],
        None,
        "logger.tracking_uri",
        ["sqlite:///", "http(s)://", "file store"],
    ),
    "engine_schedule_garbage": ([], _garbage_schedule, "engine.schedule", ["schedule.npz"]),
    "optimizer_unknown_key": (["+optimizer.foo=1"], None, "optimizer.foo", ["lr", "momentum"]),
    "optimizer_key_typo": (["+optimizer.momentun=0.9"], None, "optimizer.momentun", ["did you mean momentum?"]),
    "gradient_clip_negative": (["trainer.gradient_clip_val=-1"], None, "trainer.gradient_clip_val", [">= 0"]),
    "top_level_typo": (["learner=8"], None, "learner", ["did you mean learners?"]),
    "top_level_typo_appended": (["+learner=8"], None, "learner", ["did you mean learners?", "learners"]),
}


def _error_line(proc: subprocess.CompletedProcess, key: str) -> str:
    """Exit 2 and exactly one ``psbench: error:`` line, the last one, naming ``key``; no traceback."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("psbench: error:")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr[-3000:]
    assert errors[0].startswith(f"psbench: error: {key}="), errors[0]
    assert "is invalid: allowed" in errors[0] and "Traceback" not in proc.stderr
    return errors[0]


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_before_any_mlflow_run(run_psbench, mlflow_runs, psbench_root, case):
    args, setup, key, words = CASES[case]
    db = psbench_root / "mlflow.db"
    args = [*args, *(setup(psbench_root) if setup else [])]
    before = db.read_bytes()
    proc = run_psbench(*args, "trainer.progress=none", root=psbench_root, timeout=120)
    line = _error_line(proc, key)
    for w in words:
        assert w in line, (w, line)
    other = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("psbench: error:")]
    assert other == [], other  # the line is all the user sees
    assert db.read_bytes() == before  # the store is untouched: no experiment, no run
    if case != "mlflow_db_garbage":
        assert mlflow_runs(psbench_root) == []


HOLD_SQLITE_LOCK = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def test_a_store_locked_by_sqlite_is_waited_for_then_refused(run_psbench, mlflow_runs, psbench_root):
    """Another process holds an exclusive sqlite lock on mlflow.db: a bounded wait, a message, one line, exit 2."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_SQLITE_LOCK, str(psbench_root / "mlflow.db")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        proc = run_psbench("logger.lock_timeout_s=1", root=psbench_root, timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    line = _error_line(proc, "logger.tracking_uri")
    assert "stayed locked for 1 s" in line and "logger.lock_timeout_s" in line
    assert "is locked by another process" in proc.stderr and "waiting up to 1 s" in proc.stderr
    assert elapsed < 30, elapsed  # bounded: the 1 s wait plus start-up, not sqlite's or MLflow's retries
    assert mlflow_runs(psbench_root) == []


def test_a_store_locked_by_another_psbench_is_waited_for_then_refused(run_psbench, mlflow_runs, psbench_root):
    """Another psbench holds the store-creation lock (flock) on mlflow.db: bounded wait, one line, exit 2."""
    with open(psbench_root / "mlflow.db", "ab") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        proc = run_psbench("logger.lock_timeout_s=1", "trainer.progress=none", root=psbench_root, timeout=120)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    line = _error_line(proc, "logger.tracking_uri")
    assert "stayed locked for 1 s" in line
    assert "another psbench creating the store" in proc.stderr
    assert mlflow_runs(psbench_root) == []
