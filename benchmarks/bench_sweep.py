"""Benchmark: wall time of the Rudra Table 2 ``ci`` sweep, one job at a time vs in parallel.

Runs ``sweeps/rudra_table2.py scale=ci`` twice in fresh roots on this machine, one after the
other: (a) Hydra's basic launcher, ``hydra.sweeper.n_jobs=1``; (b) the joblib launcher with
``--jobs`` worker processes and the sweeper asking ``--jobs`` trials per batch (needs
``pip install hydra-joblib-launcher``, the ``sweeps`` extra; skipped with a note otherwise).
Prints wall time, trials and trials/hour of each and the ratio. ``--trials N`` runs only the
first N grid trials (the whole table is 23).

    python benchmarks/bench_sweep.py --trials 4 --jobs 2
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(root: Path, extra: list[str]) -> float:
    env = {**os.environ, "PSBENCH_ROOT": str(root)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "sweeps/rudra_table2.py"), "scale=ci", "logger=none", *extra],
                   cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=23)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    limit = [f"hydra.sweeper.n_trials={a.trials}"]
    settings = {"sequential (basic launcher, 1 job)": ["hydra.sweeper.n_jobs=1"]}
    if importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is not None:
        settings[f"parallel (joblib, {a.jobs} jobs)"] = [
            "hydra/launcher=joblib", f"hydra.launcher.n_jobs={a.jobs}", f"hydra.sweeper.n_jobs={a.jobs}"]
    else:
        print("parallel setting skipped: pip install hydra-joblib-launcher (the project's `sweeps` extra)")
    results = {}
    for label, extra in settings.items():
        with tempfile.TemporaryDirectory(prefix="bench_sweep_") as d:
            wall = run(Path(d), limit + extra)
        results[label] = wall
        print(f"{label}: {a.trials} trials in {wall:.1f} s = {3600 * a.trials / wall:.1f} trials/hour", flush=True)
    if len(results) == 2:
        seq, par = results.values()
        print(f"parallel / sequential wall time: {par / seq:.2f} (os.cpu_count() = {os.cpu_count()})")


if __name__ == "__main__":
    main()
