"""The ``sweeps/`` entry points run their trials in parallel on this machine by default.

* the overrides: Hydra's joblib launcher, ``n_jobs`` = cores for the launcher (4 × cores for the sweeper), one thread
  per job — none when the user chose a launcher or set one of those keys, or the machine has one core;
* an entry point's command has them at ``ci`` and ``small``, not with ``--serial`` nor at ``paper`` (a cluster's
  scale);
* slow: a real ``scale=ci`` sweep in parallel gives, trial by trial, the cases and weights of the same
  jobs run one at a time (``--serial trainer.num_threads=1``): parallel execution changes no result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from psbench import launchers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps import _runner


@pytest.mark.skipif(not launchers.installed("joblib"), reason="hydra-joblib-launcher (the cluster extra) missing")
def test_parallel_runs_one_job_per_core_with_one_thread_each():
    assert _runner.parallel([], cores=2) == [
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.n_jobs=8",
        "trainer.num_threads=1",
    ]
    assert _runner.parallel(["epochs=1"], cores=8)[1:3] == ["hydra.launcher.n_jobs=8", "hydra.sweeper.n_jobs=32"]


def test_parallel_yields_to_a_launcher_of_the_users_choice():
    for launcher in ("submitit_slurm", "basic", "joblib"):
        assert _runner.parallel(["epochs=1", f"hydra/launcher={launcher}"], cores=2) == []


def test_parallel_needs_two_cores():
    assert _runner.parallel([], cores=1) == []


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not launchers.installed("joblib"),
    reason="no CPU affinity here or no joblib plugin",
)
def test_parallel_counts_the_cores_this_process_may_use():
    """Under ``taskset -c 0`` (or a SLURM cpuset) one core is usable, whatever the machine has: one job at a time."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); from sweeps import _runner; print(_runner.parallel([]))"
    one = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code, str(_runner.REPO)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert one.returncode == 0 and one.stdout.strip() == "[]", one.stderr[-2000:]


def _entry(*argv: str) -> list[str]:
    from sweeps.entries import get

    scale, cmd = get("zhang_fig3").command(list(argv))
    assert f"++tags.scale={scale}" in cmd and "--serial" not in cmd and not any(a.startswith("scale=") for a in cmd)
    return cmd[cmd.index("trainer.progress=none") + 1 :]  # what follows the entry point's own overrides


@pytest.mark.skipif(
    _runner.usable_cores() < 2 or not launchers.installed("joblib"),
    reason="one core or no joblib plugin: the entry points run one job at a time",
)
def test_entry_point_is_parallel_at_ci_small_and_full_and_serial_on_request_or_at_paper_scale():
    par = _runner.parallel([])
    assert par and _entry() == par and _entry("scale=small", "epochs=1") == [*par, "epochs=1"]
    assert _entry("scale=full") == par  # all of CIFAR-10 on this machine
    assert _entry("scale=ci", "--serial", "epochs=1") == ["epochs=1"]
    assert _entry("scale=paper") == []
    # the user's keys come last: Hydra takes the last value of a key
    assert _entry("hydra.launcher.n_jobs=1")[-1] == "hydra.launcher.n_jobs=1"
    with pytest.raises(ValueError, match="scale='huge' is invalid"):
        _entry("scale=huge")


def _trials(root: Path) -> dict[int, tuple[str, str, int]]:
    """trial number -> (case, weights hash, threads) of a finished ``rudra_fig5_ci`` study under ``root``."""
    out = {}
    for f in (root / "sweeps" / "rudra_fig5_ci").glob("*/summary.json"):
        s = json.loads(f.read_text())
        over = yaml.safe_load((f.parent / ".hydra" / "overrides.yaml").read_text())
        [case] = [o.split("=", 1)[1] for o in over if o.startswith("++tags.case=")]
        out[int(f.parent.name)] = (case, s["weights_sha256"], s["provenance"]["threads"])
    return out


@pytest.mark.slow
@pytest.mark.skipif(_runner.usable_cores() < 2, reason="one core: the entry points run one job at a time")
def test_a_parallel_sweep_gives_the_results_of_its_jobs_run_one_at_a_time(tmp_path, mlflow_runs):
    tiny = ["dataset.subset=640", "epochs=2", "trainer.max_updates=2"]  # one update of c = 7 gradients of μ = 128
    roots = {}
    for mode, extra in (("parallel", []), ("serial", ["--serial", "trainer.num_threads=1"])):
        root = roots[mode] = tmp_path / mode
        root.mkdir()
        proc = subprocess.run(
            [sys.executable, "-m", "sweeps", "rudra_fig5", "scale=ci", *extra, *tiny],
            cwd=_runner.REPO,  # `-m sweeps` from the repository root; the runner works in PSBENCH_ROOT
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "PSBENCH_ROOT": str(root)},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert ("hydra/launcher=joblib" in proc.stdout) == (mode == "parallel")
    par, ser = _trials(roots["parallel"]), _trials(roots["serial"])
    assert len(par) == 4 and par == ser  # same trial numbers, cases, weights; one thread per job
    assert {t for _, _, t in par.values()} == {1}
    runs = mlflow_runs(roots["parallel"])
    assert len(runs) == 4 and {r["status"] for r in runs} == {"FINISHED"}
    assert {r["tags"]["psbench.threads"] for r in runs} == {"1"}


def test_run_all_passes_serial_to_the_entry_points_that_take_it():
    from sweeps import run_all

    for name, argv in run_all.commands("ci", extra=["--serial"]):
        assert ("--serial" in argv) == (not name.startswith("agn_")), (name, argv)


def test_an_entry_point_creates_a_new_psbench_root(tmp_path):
    """``PSBENCH_ROOT=<a dir that does not exist yet> python -m sweeps <name>`` starts the sweep there (it used to
    end in a FileNotFoundError traceback before psbench ran); an invalid key then ends it at once, exit 2."""
    root = tmp_path / "new" / "root"
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps", "zhang_fig1", "scale=ci", "hydra.sweeper.n_jobs=0"],
        cwd=_runner.REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PSBENCH_ROOT": str(root)},
    )
    assert "zhang_fig1 scale=ci: exit 2" in proc.stdout, proc.stderr[-2000:]
    assert root.is_dir() and "n_jobs=0" in proc.stderr and "Traceback" not in proc.stderr
