"""The ``psbench`` command end to end, through the real console entry in a subprocess.

Three kinds of tests:

* bad input that fails before training (validation, Hydra composition, unwritable run dir):
  one line ``psbench: error: …`` naming the key, exit 2, no traceback, no MLflow run left
  RUNNING;
* the CLI's handling of what training returns or raises, with a stand-in ``train`` that
  follows the contract of :func:`psbench.train.train` (diverged runs, DataError, crashes,
  multirun) — these pin the CLI's behaviour independently of the training numerics;
* real training runs (default digits run, schedule only, missing and corrupted data files: tiny files in
  the standard formats, ``tests/data_files.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_files import build_tiny_data
from psbench.cli import CONF_DIR, shared_datasets
from psbench.console import group_options

SUMMARY_KEYS = {
    "status",
    "diverged",
    "test_error",
    "test_loss",
    "train_loss",
    "staleness_mean",
    "staleness_max",
    "staleness_hist",
    "ps_updates",
    "gradients",
    "samples",
    "sim_time_s",
    "wall_time_s",
    "bytes_pushed",
    "bytes_pulled",
    "comm_overlap",
    "weights_sha256",
    "mlflow_run_id",
}

# A stand-in for psbench.train following its contract; PSBENCH_TEST_TRAIN picks the outcome:
# "ok" (seed 1 diverges), "data_error", "crash". It logs through the Lightning logger the CLI
# hands it, and finalizes it as Lightning does at the end of fit.
STAND_IN_TRAIN = r"""
import os, sys, types
from psbench.errors import DataError

from psbench.summary import RunSummary

def prepare(cfg, plan=None):
    if os.environ["PSBENCH_TEST_TRAIN"] == "data_error":  # found while the run is built: before any MLflow run
        raise DataError(f"{cfg.paths.data_dir}/mnist/train-images-idx3-ubyte.gz: file not found")
    return types.SimpleNamespace(cfg=cfg, threads=1, threads_from="stand-in", schedule=None)  # a RunSetup's fields

def run(setup, run_dir, logger, plan=None):
    cfg = setup.cfg
    mode = os.environ["PSBENCH_TEST_TRAIN"]
    if logger is not None:
        logger.log_metrics({"train_loss_step": 2.5}, step=1)
    if mode == "late_data_error":  # found while training (a streamed image): the MLflow run exists
        raise DataError(f"{cfg.paths.data_dir}/imagenet/train/n01/x.JPEG: cannot decode")
    if mode == "crash":
        raise RuntimeError("stand-in trainer crashed")
    diverged = cfg.seed == 1
    plot = run_dir / "staleness_hist.png"
    plot.write_bytes(b"\x89PNG stand-in")
    if logger is not None:
        logger.finalize("success")
    nan = float("nan")
    return RunSummary(
        status="diverged" if diverged else "finished", diverged=diverged,
        test_error=0.9 if diverged else 0.05, test_loss=nan if diverged else 0.2,
        train_loss=nan if diverged else 0.1, staleness_mean=1.0, staleness_max=2,
        staleness_hist={0: 3, 1: 4, 2: 3}, ps_updates=10, gradients=40, samples=1280,
        sim_time_s=0.5, wall_time_s=0.25, bytes_pushed=1000, bytes_pulled=2000,
        comm_overlap=0.75, weights_sha256=None if cfg.schedule_only else "ab" * 32,
        artifacts=[str(plot)],
    )

module = types.ModuleType("psbench.train")
module.prepare, module.run = prepare, run
sys.modules["psbench.train"] = module
from psbench.cli import main
main()
"""


# The console entry with the md5s of tests/data_files.py's tiny files registered as the known ones.
TINY_MD5_DRIVER = r"""
import json, os
from psbench.data.checksum import KNOWN_MD5
KNOWN_MD5.update(json.loads(os.environ["PSBENCH_TEST_MD5"]))
from psbench.cli import main
main()
"""


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def assert_one_line_error(proc, root: Path, mlflow_runs, *needles: str) -> str:
    """Exit 2, last stderr line ``psbench: error: …`` naming ``needles``, no traceback,
    nothing RUNNING in MLflow."""
    line = last_line(proc.stderr)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert line.startswith("psbench: error: "), proc.stderr[-3000:]
    for needle in needles:
        assert needle in line, (needle, line)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [r for r in mlflow_runs(root) if r["status"] == "RUNNING"] == []
    return line


def job_dirs(root: Path, kind: str = "outputs") -> list[Path]:
    return sorted(p.parent for p in (root / kind).rglob("resolved_config.yaml"))


# ----------------------------------------------------------------------------- help
def test_help_lists_every_group_and_option(run_psbench, tmp_path):
    proc = run_psbench("--help", root=tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    for group in groups:
        assert f"\n{group} " in proc.stdout, group
        for option in group_options(group):
            assert option in proc.stdout, (group, option)
    for key in ("learners", "batch_size", "epochs", "seed", "schedule_only"):
        assert key in proc.stdout


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["protocol=softsync", "protocol.n=0"], ["protocol.n=0", "learners"]),
        (["protocol=softsync", "protocol.n=5", "learners=4"], ["protocol.n=5", "λ=4"]),
        (["learners=0"], ["learners=0", ">= 1"]),
        (["batch_size=-1"], ["batch_size=-1", ">= 1"]),
        (["protocol=foo"], ["protocol", "'foo'", "hardsync", "softsync", "async", "ssp"]),
        (["experiment=rudra/nope"], ["experiment", "rudra/fig5_30softsync"]),
        (["protocol.n=3"], ["protocol.n"]),  # hardsync has no n
        (["+protocol.n=3"], ["protocol.n=3", "softsync"]),
        (["learners=["], ["learners=["]),
        (["paths.data_dir=${oc.env:PSBENCH_TEST_UNSET_VARIABLE}"], ["paths.data_dir"]),
        (["hydra.run.dir=/proc/forbidden/run"], ["hydra.run.dir", "/proc/forbidden/run"]),
        (["resume=no/such/run"], ["resume='no/such/run'", "checkpoint.pt"]),  # and the dir is not created
        (["-m", "seed=0,1", "resume=some/run"], ["resume='some/run'", "null or auto in a sweep"]),
    ],
)
def test_bad_input_is_one_clear_line(run_psbench, mlflow_runs, tmp_path, args, needles):
    proc = run_psbench(*args, root=tmp_path)
    assert_one_line_error(proc, tmp_path, mlflow_runs, *needles)
    assert mlflow_runs(tmp_path) == []  # refused before any run was started
    assert not (tmp_path / "no").exists()


def test_run_dir_under_a_regular_file_is_refused(run_psbench, mlflow_runs, tmp_path):
    # tests run as root, for whom chmod 0 does not block writes; a path under a file does
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = run_psbench(f"hydra.run.dir={blocker}/run", root=tmp_path)
    assert_one_line_error(proc, tmp_path, mlflow_runs, "hydra.run.dir", "writable directory")


def test_sweep_dir_under_a_regular_file_is_refused(run_psbench, mlflow_runs, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = run_psbench("-m", "learners=1,2", f"hydra.sweep.dir={blocker}/sweep", root=tmp_path)
    assert_one_line_error(proc, tmp_path, mlflow_runs, "hydra.sweep.dir")


def test_unwritable_tracking_store_is_refused(run_psbench, mlflow_runs, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = run_psbench(f"logger.tracking_uri=sqlite:///{blocker}/mlflow.db", root=tmp_path)
    assert_one_line_error(proc, tmp_path, mlflow_runs, "logger.tracking_uri")


def test_full_error_env_shows_the_traceback(run_psbench, tmp_path):
    proc = run_psbench("learners=0", root=tmp_path, env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "ConfigError" in proc.stderr


def test_a_runs_mlflow_metrics_are_its_summary_totals(run_psbench, mlflow_runs, psbench_root):
    """Per-update metrics are logged at steps 0…U−1; the run's totals are ``summary/<key>``."""
    import json

    proc = run_psbench(
        "learners=4",
        "protocol=async",
        "epochs=1",
        "trainer.progress=none",
        f"hydra.run.dir={psbench_root / 'run'}",
        root=psbench_root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((psbench_root / "run" / "summary.json").read_text())
    (run,) = mlflow_runs(psbench_root)
    for key in ("sim_time_s", "test_error", "staleness_mean", "ps_updates"):
        assert run["metrics"][f"summary/{key}"] == pytest.approx(summary[key], rel=1e-12), key


# ----------------------------------------------------------------------------- stand-in train
def test_multirun_tracks_finished_and_diverged_runs(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench(
        "-m",
        "seed=0,1",
        "+tags.paper=rudra",
        root=psbench_root,
        driver=STAND_IN_TRAIN,
        env={"PSBENCH_TEST_TRAIN": "ok"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # a diverged run does not stop a sweep
    runs = {r["params"]["seed"]: r for r in mlflow_runs(psbench_root)}
    assert sorted(runs) == ["0", "1"]
    assert {r["status"] for r in runs.values()} == {"FINISHED"}
    assert len({r["experiment_id"] for r in runs.values()}) == 1
    assert runs["0"]["tags"]["diverged"] == "false" and runs["0"]["tags"]["status"] == "finished"
    assert runs["1"]["tags"]["diverged"] == "true" and runs["1"]["tags"]["status"] == "diverged"

    ok = runs["0"]
    assert ok["name"] == "hardsync-seed0" and runs["1"]["name"] == "hardsync-seed1"  # the swept seed, both named
    assert ok["params"]["protocol.name"] == "hardsync" and ok["params"]["learners"] == "4"
    assert ok["params"]["optimizer.milestones"] == "[]"
    assert ok["tags"]["paper"] == "rudra" and ok["tags"]["protocol"] == "hardsync"
    assert ok["metrics"]["summary/test_error"] == 0.05 and ok["metrics"]["summary/comm_overlap"] == 0.75
    assert ok["metrics"]["train_loss_step"] == 2.5  # the Lightning logger wrote to this run

    dirs = job_dirs(psbench_root, "multirun")
    assert len(dirs) == 2
    by_id = {}
    for d in dirs:
        summary = json.loads((d / "summary.json").read_text())
        assert SUMMARY_KEYS <= set(summary)
        by_id[summary["mlflow_run_id"]] = summary
        artifacts = set(
            (
                Path(runs["0"]["artifact_uri"].removeprefix("file://")).parent.parent
                / summary["mlflow_run_id"]
                / "artifacts"
            ).iterdir()
        )
        assert {p.name for p in artifacts} >= {
            "summary.json",
            "resolved_config.yaml",
            "overrides.yaml",
            "staleness_hist.png",
        }
    assert set(by_id) == {r["run_id"] for r in runs.values()}
    assert by_id[runs["1"]["run_id"]]["status"] == "diverged"


def test_a_data_error_found_while_building_the_run_is_one_line_and_no_mlflow_run(
    run_psbench, mlflow_runs, psbench_root
):
    """Data is read before the MLflow run is created: refused input leaves no run, and its summary.json."""
    proc = run_psbench(root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "data_error"})
    assert_one_line_error(proc, psbench_root, mlflow_runs, "train-images-idx3-ubyte.gz")
    assert mlflow_runs(psbench_root) == []
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["mlflow_run_id"] is None
    assert summary["failure_reason"].endswith("train-images-idx3-ubyte.gz: file not found")


def test_a_data_error_during_training_fails_the_run_with_one_line(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench(root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "late_data_error"})
    assert_one_line_error(proc, psbench_root, mlflow_runs, "x.JPEG")
    (run,) = mlflow_runs(psbench_root)
    assert run["status"] == "FAILED"  # a handled error's reason is its message
    assert "x.JPEG: cannot decode" in run["tags"]["failure_reason"]
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["mlflow_run_id"] == run["run_id"]
    assert summary["failure_reason"] == run["tags"]["failure_reason"]


def test_crash_in_training_fails_the_run_in_one_line_with_the_traceback_in_the_log(
    run_psbench, mlflow_runs, psbench_root
):
    """An unhandled error while training: exit 1, one line (the error, the log that holds its traceback), the run
    FAILED with that line; ``HYDRA_FULL_ERROR=1`` shows the traceback instead."""
    proc = run_psbench(root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "crash"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    (run_dir,) = job_dirs(psbench_root)
    line = proc.stderr.strip().splitlines()[-1]
    reason = f"RuntimeError: stand-in trainer crashed; traceback in {run_dir / 'psbench.log'}"
    assert line == f"psbench: error: {reason}"
    assert "Traceback (most recent call last)" in (run_dir / "psbench.log").read_text()
    (run,) = mlflow_runs(psbench_root)
    assert run["status"] == "FAILED" and run["tags"]["failure_reason"] == reason
    assert json.loads((run_dir / "summary.json").read_text())["failure_reason"] == reason
    loud = run_psbench(
        root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "crash", "HYDRA_FULL_ERROR": "1"}
    )
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "stand-in trainer crashed" in loud.stderr


def test_logger_none_writes_summary_without_mlflow(run_psbench, tmp_path):
    proc = run_psbench("logger=none", root=tmp_path, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "ok"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = job_dirs(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mlflow_run_id"] is None and summary["status"] == "finished"
    assert not (tmp_path / "mlflow.db").exists()


# ----------------------------------------------------------------------------- real training
def test_default_run_trains_digits_to_under_ten_percent(run_psbench, mlflow_runs, psbench_root):
    """The README's first command: digits, hardsync, λ = 4 (issue acceptance: < 10%)."""
    proc = run_psbench(root=psbench_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["status"] == "finished" and summary["diverged"] is False
    assert summary["test_error"] < 0.10
    assert summary["staleness_max"] == 0  # hardsync
    (run,) = mlflow_runs(psbench_root)
    assert run["status"] == "FINISHED" and run["run_id"] == summary["mlflow_run_id"]
    assert run["name"] == "hardsync"
    assert run["metrics"]["summary/test_error"] == pytest.approx(summary["test_error"])
    assert (run_dir / "resolved_config.yaml").is_file()
    logged = Path(run["artifact_uri"].removeprefix("file://"))
    assert (logged / "timeline.png").read_bytes() == (run_dir / "timeline.png").read_bytes()  # the schedule's picture


def test_schedule_only_without_tracking(run_psbench, tmp_path):
    proc = run_psbench("schedule_only=true", "logger=none", "protocol=softsync", "protocol.n=2", root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = job_dirs(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["weights_sha256"] is None and summary["ps_updates"] > 0
    assert not (tmp_path / "mlflow.db").exists()
    assert str(run_dir / "timeline.png") in summary["artifacts"] and (run_dir / "timeline.png").is_file()


def test_missing_data_files_are_one_line_and_a_failed_run(run_psbench, mlflow_runs, psbench_root):
    missing = psbench_root / "nonexistent"
    proc = run_psbench("dataset=mnist", f"paths.data_dir={missing}", root=psbench_root)
    assert_one_line_error(proc, psbench_root, mlflow_runs, str(missing))
    assert {r["status"] for r in mlflow_runs(psbench_root)} <= {"FAILED"}


def test_data_dir_is_psbench_data_else_shared_datasets_beside_the_current_repo(compose_cfg, tmp_path, monkeypatch):
    repo = tmp_path / "work" / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert shared_datasets(repo / "sub") is None  # nothing beside the repo
    shared = tmp_path / "work" / "shared" / "datasets"
    shared.mkdir(parents=True)
    assert shared_datasets(repo / "sub") == shared
    (repo / "sub" / "inner" / ".git").mkdir(parents=True)
    assert shared_datasets(repo / "sub" / "inner") is None  # the nearest work tree decides
    monkeypatch.delenv("PSBENCH_DATA", raising=False)
    monkeypatch.chdir(repo / "sub")
    assert compose_cfg().paths.data_dir == str(shared)
    monkeypatch.setenv("PSBENCH_DATA", str(tmp_path / "mine"))
    assert compose_cfg().paths.data_dir == str(tmp_path / "mine")


def test_corrupted_data_file_is_one_line_naming_it(run_psbench, mlflow_runs, psbench_root, tmp_path):
    """A tiny MNIST in $PSBENCH_DATA trains; with one byte of one file flipped the run is refused naming it."""
    tiny = build_tiny_data(tmp_path / "data")
    env = {"PSBENCH_DATA": str(tiny.dir), "PSBENCH_TEST_MD5": json.dumps(tiny.md5)}
    args = ("dataset=mnist", "learners=2", "batch_size=3", "epochs=1", "trainer.progress=none")
    ok = run_psbench(*args, root=psbench_root, env=env, driver=TINY_MD5_DRIVER)
    assert ok.returncode == 0, ok.stderr[-3000:]
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["samples"] == 12  # the tiny copy's 12 images
    bad = tiny.dir / "mnist" / "t10k-labels-idx1-ubyte.gz"
    content = bytearray(bad.read_bytes())
    content[len(content) // 2] ^= 0xFF
    bad.write_bytes(bytes(content))
    proc = run_psbench(*args, root=psbench_root, env=env, driver=TINY_MD5_DRIVER)
    assert_one_line_error(proc, psbench_root, mlflow_runs, str(bad), "md5", tiny.md5["mnist/t10k-labels-idx1-ubyte.gz"])
    assert sorted(r["status"] for r in mlflow_runs(psbench_root)) == ["FINISHED"]  # refused before any run


@pytest.mark.slow
def test_readme_multirun_example(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench("-m", "protocol=hardsync,async", "learners=2,4", "epochs=1", root=psbench_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = mlflow_runs(psbench_root)
    assert len(runs) == 4 and {r["status"] for r in runs} == {"FINISHED"}
    assert len(job_dirs(psbench_root, "multirun")) == 4


@pytest.mark.slow
def test_real_divergence_ends_cleanly(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench("optimizer.lr=1e6", "epochs=1", root=psbench_root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["diverged"] is True and summary["status"] == "diverged"
    (run,) = mlflow_runs(psbench_root)
    assert run["status"] == "FINISHED" and run["tags"]["diverged"] == "true"
