"""Outputs where they belong: run from a clone, psbench leaves ``git status`` clean.

A temporary git repository holds the project's ``.gitignore`` (and a tracked ``sweeps/`` entry point, as a clone
has); the real commands run in it with ``PSBENCH_ROOT`` unset, so the root dir is the launch dir, as for a user who
cloned and typed them. Every output lands in one of the places the README names, each ignored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# where the README says a run from a clone writes (paths.root_dir = the launch dir)
DOCUMENTED = {"outputs/", "multirun/", "mlflow.db", "mlartifacts/", "reports/"}


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def clone(tmp_path, mlflow_template_db) -> Path:
    c = tmp_path / "clone"
    (c / "sweeps").mkdir(parents=True)
    shutil.copyfile(REPO / ".gitignore", c / ".gitignore")
    for f in ("__init__.py", "__main__.py", "_runner.py", "entries.py", "entries.yaml"):
        shutil.copyfile(REPO / "sweeps" / f, c / "sweeps" / f)
    git(c, "init", "-q")
    git(c, "add", ".")
    git(c, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clone")
    shutil.copyfile(mlflow_template_db, c / "mlflow.db")  # the store a first run would create (10 s of migrations)
    return c


def run(clone: Path, *cmd: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PSBENCH_ROOT", "HYDRA_FULL_ERROR")}
    env["PYTHONPATH"] = str(REPO)  # `analysis` is not installed: a clone runs it from its root
    proc = subprocess.run(
        list(cmd), cwd=clone, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def ignored(clone: Path) -> set[str]:
    """The top-level paths git ignores (``!!``), after asserting nothing shows as changed or untracked."""
    assert git(clone, "status", "--porcelain") == ""
    return {line[3:] for line in git(clone, "status", "--porcelain", "--ignored").splitlines()}


def test_a_paper_sweep_entry_point_leaves_a_clone_clean(clone):
    """``python -m sweeps rudra_table1`` (on digits, embedded: it runs in a clone without data files, a tenth of its
    ci updates): its study dir ``sweeps/rudra_table1_ci/`` with the jobs and ``optuna.db`` sits beside the entry
    points, ignored, as are the MLflow store and artifacts."""
    run(clone, sys.executable, "-m", "sweeps", "rudra_table1", "scale=ci", "trainer.max_updates=5")
    assert ignored(clone) == {"mlflow.db", "mlartifacts/", "sweeps/rudra_table1_ci/"}
    assert (clone / "sweeps" / "rudra_table1_ci" / "optuna.db").is_file()
    assert len(list((clone / "sweeps" / "rudra_table1_ci").glob("*/summary.json"))) == 3


@pytest.mark.slow
def test_a_run_a_grid_and_the_report_leave_a_clone_clean(clone):
    """``psbench``, ``psbench -m`` and ``python -m analysis`` from a clone: outputs/, multirun/, reports/."""
    psbench = (sys.executable, "-m", "psbench.cli")
    run(clone, *psbench, "epochs=1", "trainer.progress=none", "trainer.num_threads=1")
    run(clone, *psbench, "-m", "seed=0,1", "schedule_only=true", "trainer.progress=none")
    run(clone, sys.executable, "-m", "analysis")  # from the clone, as the README says (--root defaults to .)
    assert ignored(clone) == DOCUMENTED
    assert (
        list((clone / "outputs").glob("*/*/summary.json"))
        and len(list((clone / "multirun").glob("*/*/*/summary.json"))) == 2
    )
    assert (clone / "reports" / "index.html").is_file()
