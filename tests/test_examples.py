"""The examples of ``examples/`` run as the README says, from a clean clone, at a tiny budget.

A temporary git repository holds the project's ``.gitignore`` and ``examples/``; the installed ``psbench`` command
runs in it with ``PSBENCH_ROOT`` and ``PYTHONPATH`` unset, so the user's modules (``resnet20.py``, ``shapes.py``,
``regressor.py``) are found only as psbench promises: in the folder above ``--config-dir``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PSBENCH = str(Path(sys.executable).with_name("psbench"))  # the console script: cwd is not on its sys.path


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def clone(tmp_path, mlflow_template_db) -> Path:
    c = tmp_path / "clone"
    c.mkdir()
    shutil.copyfile(REPO / ".gitignore", c / ".gitignore")
    shutil.copytree(REPO / "examples", c / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    git(c, "init", "-q")
    git(c, "add", ".")
    git(c, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone")
    shutil.copyfile(mlflow_template_db, c / "mlflow.db")  # the store a first run would create (10 s of migrations)
    return c


def run(clone: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PSBENCH_ROOT", "HYDRA_FULL_ERROR", "PYTHONPATH")}
    proc = subprocess.run(
        [PSBENCH, *args, "trainer.progress=none", "trainer.num_threads=1"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_resnet20_example_and_its_optuna_search_finish_with_runs_in_mlflow(clone, mlflow_runs):
    """``psbench --config-dir examples/resnet20/conf experiment=resnet20_softsync`` and the ``-m`` Optuna search
    over (n, μ, λ) on the user's ResNet-20 and shapes: FINISHED MLflow runs, tagged with the user's model and data."""
    conf = (
        "--config-dir",
        "examples/resnet20/conf",
        "experiment=resnet20_softsync",
        "dataset.num_train=48",
        "dataset.num_test=16",
    )
    run(clone, *conf, "trainer.max_updates=2")
    [one] = mlflow_runs(clone)
    assert one["status"] == "FINISHED" and one["tags"]["model"] == "resnet20" and one["tags"]["dataset"] == "shapes"
    assert one["params"]["model._target_"] == "resnet20.ResNet20" and "summary/test_error" in one["metrics"]

    run(
        clone,
        "-m",
        *conf,
        "hparams_search=resnet20_nmu",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.sampler.population_size=2",
        "trainer.max_updates=1",
    )
    trials = [r for r in mlflow_runs(clone) if r["run_id"] != one["run_id"]]
    assert len(trials) == 2 and all(r["status"] == "FINISHED" for r in trials)
    assert all(r["tags"].get("hparams_search") == "resnet20_nmu" for r in trials)
    assert all(int(r["params"]["protocol.n"]) <= int(r["params"]["learners"]) for r in trials)
    [results] = (clone / "multirun" / "optuna").glob("resnet20_nmu-*/optimization_results.yaml")
    assert "test_error" in results.read_text()
    status = git(clone, "status", "--porcelain")
    assert status == "", status  # runs, study and the examples' __pycache__ are ignored


def test_the_regression_example_compares_protocols(clone, mlflow_runs):
    """A user's regression (``_target_`` model and data, ``loss: mse``) under hardsync and async in one grid: each
    run FINISHED with its test loss well below the zero predictor's (the targets' mean square), no test error."""
    run(clone, "-m", "--config-dir", "examples/regression/conf", "experiment=friedman1", "protocol=hardsync,async")
    runs = mlflow_runs(clone)
    assert sorted(r["tags"]["protocol"] for r in runs) == ["async", "hardsync"]
    sys.path.insert(0, str(clone / "examples" / "regression"))
    try:
        from regressor import friedman1
    finally:
        sys.path.remove(str(clone / "examples" / "regression"))
    _, test = friedman1(2000, 500, seed=0)  # the example's
    zero = float((test.tensors[1] ** 2).mean())
    for r in runs:
        summary = json.loads(Path(r["tags"]["run_dir"], "summary.json").read_text())
        assert r["status"] == "FINISHED" and summary["status"] == "finished"
        assert summary["test_error"] is None and "summary/test_error" not in r["metrics"]
        assert summary["test_loss"] < 0.5 * zero, (r["tags"]["protocol"], summary["test_loss"], zero)
