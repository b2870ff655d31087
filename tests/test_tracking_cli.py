"""MLflow you can browse, through the real ``psbench`` command and sqlite store.

A run's per-update series end with measured values and ``epoch`` is the PS's epoch; summary
values are ``summary/<key>``; runs record provenance; a multirun has one parent run; a plain
grid goes on past a job with bad input and ends with a one-line count and exit 1.
"""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from test_cli import STAND_IN_TRAIN, last_line

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout under test


def _history(root, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow import MlflowClient

    hist = MlflowClient(f"sqlite:///{root / 'mlflow.db'}").get_metric_history(run_id, key)
    return sorted((m.step, m.value) for m in hist)


def _parent(mlflow_runs, root) -> dict:
    (parent,) = [r for r in mlflow_runs(root, parents=True) if r["tags"].get("psbench.sweep_parent") == "true"]
    return parent


def test_series_end_with_training_values_epoch_counts_epochs_and_provenance_is_recorded(
    run_psbench, mlflow_runs, psbench_root
):
    proc = run_psbench(
        "epochs=2",
        "trainer.log_every_n_updates=1",
        "trainer.num_threads=1",
        "trainer.progress=none",
        f"hydra.run.dir={psbench_root / 'run'}",
        root=psbench_root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((psbench_root / "run" / "summary.json").read_text())
    (run,) = mlflow_runs(psbench_root)
    metrics, updates = run["metrics"], summary["ps_updates"]

    # the run's totals are summary/<key>, each exactly summary.json's value
    for key in ("sim_time_s", "test_error", "train_loss", "staleness_mean", "ps_updates", "epochs_done"):
        assert metrics[f"summary/{key}"] == pytest.approx(summary[key], rel=1e-12), key

    # train_loss: one training value per update, none appended after; the summary (mean of the last
    # 100) is not its last point
    loss = _history(psbench_root, run["run_id"], "train_loss")
    assert [s for s, _ in loss] == list(range(updates))
    assert metrics["train_loss"] == loss[-1][1] != pytest.approx(summary["train_loss"])
    assert summary["train_loss"] == pytest.approx(sum(v for _, v in loss[-100:]) / len(loss[-100:]), rel=1e-6)
    assert _history(psbench_root, run["run_id"], "sim_time_s")[-1][0] == updates - 1

    # epoch = samples consumed / N after each update (also at the evaluations), up to epochs_done
    epoch = _history(psbench_root, run["run_id"], "epoch")
    by_step = dict(epoch)
    assert sorted(by_step) == list(range(updates)) and len(epoch) > updates  # evaluations log it too
    assert all(dict(epoch)[s] == v for s, v in epoch)  # an evaluation's epoch is its update's
    values = [by_step[s] for s in range(updates)]
    assert all(b > a for a, b in itertools.pairwise(values))
    assert values[0] == pytest.approx(summary["epochs_done"] / updates, rel=1e-6)
    assert values[-1] == pytest.approx(summary["epochs_done"], rel=1e-6)

    # provenance: tags and summary.json agree, and say which code and machine ran
    commit = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    prov = summary["provenance"]
    assert prov["git_commit"] == commit and isinstance(prov["git_dirty"], bool)
    assert prov["threads"] == 1 and prov["host"] == socket.gethostname()
    assert prov["version"] == metadata.version("psbench") and prov["mlflow_version"] == metadata.version("mlflow")
    assert prov["lightning_version"] == metadata.version("pytorch-lightning")
    import torch

    assert prov["torch_version"] == torch.__version__
    tags = run["tags"]
    assert {k: tags[f"psbench.{k}"] for k in prov} == {
        k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in prov.items()
    }
    assert run["name"] == "hardsync"  # nothing differs from the defaults but the protocol is always named


def test_a_sweep_has_one_parent_run_reused_when_its_dir_runs_again(run_psbench, mlflow_runs, psbench_root):
    args = ("-m", "seed=0,1", "hydra.sweep.dir=multirun/grid")
    for rerun in (False, True):  # the dir holds the first sweep's runs: training them again is overwrite=true
        again = ("overwrite=true",) if rerun else ()
        proc = run_psbench(*args, *again, root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "ok"})
        assert proc.returncode == 0, proc.stderr[-3000:]  # seed 1 diverges: not a failure
        parent = _parent(mlflow_runs, psbench_root)
        jobs = mlflow_runs(psbench_root)
        assert len(jobs) == (4 if rerun else 2)
        assert {r["tags"]["mlflow.parentRunId"] for r in jobs} == {parent["run_id"]}
        assert {r["tags"]["sweep_id"] for r in jobs} == {parent["tags"]["sweep_id"]} == {"multirun/grid"}
        # the swept seed is named at its default too
        assert sorted(r["name"] for r in jobs) == sorted(["hardsync-seed0", "hardsync-seed1"] * (2 if rerun else 1))
    assert parent["status"] == "FINISHED" and "failure_reason" not in parent["tags"]
    assert parent["metrics"]["jobs"] == 2 and parent["metrics"]["jobs_diverged"] == 1
    assert parent["metrics"]["jobs_failed"] == 0
    assert (
        parent["tags"]["psbench.git_commit"]
        == json.loads(next((psbench_root / "multirun/grid").glob("*/summary.json")).read_text())["provenance"][
            "git_commit"
        ]
    )


def test_a_grid_goes_on_past_an_invalid_combination_and_ends_with_the_count(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench(
        "-m",
        "learners=4,2,8",
        "protocol=softsync",
        "protocol.n=4",
        "hydra.sweep.dir=sw",
        root=psbench_root,
        driver=STAND_IN_TRAIN,
        env={"PSBENCH_TEST_TRAIN": "ok"},
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    reason = "protocol.n=4 is invalid: allowed an integer with 1 <= n <= learners (λ=2)"
    assert f"psbench: error: {reason}" in proc.stderr.splitlines()  # the job's own line, as a single run prints it
    assert last_line(proc.stderr) == f"psbench: 1 of 3 jobs failed: job 1 [learners=2]: {reason}"

    jobs = mlflow_runs(psbench_root)  # the invalid job started no MLflow run; the others ran after it
    assert sorted(r["params"]["learners"] for r in jobs) == ["4", "8"] and {r["status"] for r in jobs} == {"FINISHED"}
    assert sorted(r["name"] for r in jobs) == ["4-softsync-λ4", "4-softsync-λ8"]  # λ swept: named at its default 4
    parent = _parent(mlflow_runs, psbench_root)
    assert parent["status"] == "FAILED" and parent["tags"]["failure_reason"] == last_line(proc.stderr)[9:]
    assert (parent["metrics"]["jobs"], parent["metrics"]["jobs_failed"]) == (3, 1)
    failed = json.loads((psbench_root / "sw" / "1" / "summary.json").read_text())
    assert failed["status"] == "failed" and failed["failure_reason"] == reason


def test_failed_runs_and_a_crashed_sweep_carry_the_reason(run_psbench, mlflow_runs, psbench_root):
    proc = run_psbench("-m", "seed=0,1", root=psbench_root, driver=STAND_IN_TRAIN, env={"PSBENCH_TEST_TRAIN": "crash"})
    assert proc.returncode == 1 and "stand-in trainer crashed" in proc.stderr and "Traceback" not in proc.stderr
    jobs = mlflow_runs(psbench_root)
    assert [r["status"] for r in jobs] == ["FAILED", "FAILED"]
    crash = "RuntimeError: stand-in trainer crashed; traceback in "  # each job's own log holds its traceback
    assert {r["tags"]["failure_reason"] for r in jobs} == {f"{crash}{r['tags']['run_dir']}/psbench.log" for r in jobs}
    parent = _parent(mlflow_runs, psbench_root)
    assert parent["status"] == "FAILED" and parent["tags"]["failure_reason"].startswith(crash)


def test_a_sweep_of_bad_input_only_leaves_no_parent_run(run_psbench, mlflow_runs, running_runs, psbench_root):
    proc = run_psbench("-m", "protocol=hardsync,nope", root=psbench_root)  # refused before any job
    assert proc.returncode == 2 and last_line(proc.stderr).startswith("psbench: error: protocol")
    assert mlflow_runs(psbench_root, parents=True) == []
    proc = run_psbench("-m", "learners=1,2", "protocol=softsync", "protocol.n=3", root=psbench_root)
    assert proc.returncode == 1 and last_line(proc.stderr).startswith("psbench: 2 of 2 jobs failed: job 0 [learners=1]")
    assert mlflow_runs(psbench_root, parents=True) == []
    assert running_runs(psbench_root) == []  # the deleted parent was ended first


@pytest.mark.slow
def test_joblib_jobs_find_their_parent_and_the_count(run_psbench, mlflow_runs, psbench_root):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    proc = run_psbench(
        "-m",
        "learners=2,4",
        "protocol=softsync",
        "protocol.n=1,4",
        "schedule_only=true",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        root=psbench_root,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert last_line(proc.stderr).startswith("psbench: 1 of 4 jobs failed: job 1 [learners=2 protocol.n=4]: ")
    parent = _parent(mlflow_runs, psbench_root)
    jobs = mlflow_runs(psbench_root)
    assert len(jobs) == 3 and {r["tags"]["mlflow.parentRunId"] for r in jobs} == {parent["run_id"]}
    assert sorted(r["name"] for r in jobs) == ["1-softsync", "1-softsync-λ2", "4-softsync"]
