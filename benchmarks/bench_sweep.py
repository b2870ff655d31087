"""Benchmark: trials/hour of the Rudra Table 2 ``ci`` sweep under each Hydra launcher, in one run.

Runs ``python -m sweeps rudra_table2 scale=ci`` once per launcher, in a fresh root each, one after the other on
this machine: ``basic`` (one trial at a time, ``hydra.sweeper.n_jobs=1``), and ``joblib``,
``submitit_local`` (and ``ray`` if asked) with ``--jobs`` workers, the psbench Optuna sweeper handing
``--jobs`` trials to the launcher per batch. The parallel launchers come with the ``cluster`` extra
(``pip install -e '.[cluster]'``); one that is not installed is skipped with a note. Prints the wall time,
trials and trials/hour of each and its ratio against ``basic``. ``--trials N`` runs only the first N grid
trials (the whole table is 23); ``--logger mlflow`` tracks the runs (default none: the launchers, not the
store, are measured); ``--threads`` is every job's ``trainer.num_threads`` (default 1: the jobs compute alike
under every launcher, which otherwise differ in the threads they give torch — joblib's workers get one each).

    python benchmarks/bench_sweep.py --trials 4 --jobs 2
    python benchmarks/bench_sweep.py --trials 4 --jobs 2 --launchers basic,joblib,submitit_local,ray
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from psbench import launchers

REPO = Path(__file__).resolve().parents[1]


def run(root: Path, extra: list[str]) -> float:
    env = {**os.environ, "PSBENCH_ROOT": str(root)}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "sweeps", "rudra_table2", "scale=ci", *extra],
        cwd=REPO,  # `-m sweeps` from the repository root; the runner works in PSBENCH_ROOT
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def overrides(launcher: str, jobs: int) -> list[str]:
    """The launcher's overrides: ``basic`` one trial at a time, the others ``jobs`` trials at once."""
    if launcher == "basic":
        return ["hydra.sweeper.n_jobs=1"]
    own = {
        "joblib": [f"hydra.launcher.n_jobs={jobs}"],
        "submitit_local": [],
        "ray": [f"hydra.launcher.ray.init.num_cpus={jobs}"],
    }[launcher]
    return [f"hydra/launcher={launcher}", *own, f"hydra.sweeper.n_jobs={jobs}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=23)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--launchers",
        default="basic,joblib,submitit_local",
        help="comma-separated: basic, joblib, submitit_local, ray (basic is the reference)",
    )
    ap.add_argument("--logger", default="none", choices=("none", "mlflow"))
    ap.add_argument(
        "--threads",
        default="1",
        help="trainer.num_threads of every job (null: torch's default), "
        "so that every launcher's jobs compute alike and only their parallelism differs",
    )
    a = ap.parse_args()
    chosen = [n.strip() for n in a.launchers.split(",") if n.strip()]
    if "basic" not in chosen:
        chosen.insert(0, "basic")
    common = [f"hydra.sweeper.n_trials={a.trials}", f"logger={a.logger}", f"trainer.num_threads={a.threads}"]
    results: dict[str, float] = {}
    for name in chosen:
        if not launchers.installed(name):
            print(f"{name}: skipped, not installed: {launchers.INSTALL}", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="bench_sweep_") as d:
            wall = run(Path(d), common + overrides(name, a.jobs))
        results[name] = wall
        workers = "1 trial at a time" if name == "basic" else f"{a.jobs} workers"
        print(
            f"{name} ({workers}): {a.trials} trials in {wall:.1f} s = {3600 * a.trials / wall:.1f} trials/hour",
            flush=True,
        )
    base = results.get("basic")
    if base:
        for name, wall in results.items():
            if name != "basic":
                print(f"{name} / basic trials/hour: {base / wall:.2f}")
    print(f"os.cpu_count() = {os.cpu_count()}, load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
