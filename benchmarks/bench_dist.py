"""engine=dist on loopback: PS throughput and the async-over-hardsync speedup, measured and simulated.

    python benchmarks/bench_dist.py [--pushes 300] [--learners 2 4 8] [--mu 16] [--threads 1]

1. PS throughput (pushes applied per second, after all learners joined) for the CIFAR CNN of
   Rudra §4.2 (``model=cifar_cnn``, 3×32×32 synthetic inputs so no data files are needed; the
   message is the model, 358 kB) with async free-runs at λ ∈ {2, 4, 8}.
2. Free-run async vs hardsync at λ = 4 with the same number of gradients: the measured speedup
   (hardsync run time / async run time), printed next to the simulator's prediction for the same
   costs — the cost model fitted (:mod:`psbench.calibration.free_run`) to each measured run, then both
   protocols simulated with the costs fitted to the async run.

Every run is a real ``psbench engine=dist`` command (subprocess, ``logger=none``); one machine,
so learners share its cores with the PS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from psbench.calibration.free_run import fit_cost
from psbench.cluster import Topology
from psbench.ps import Protocol, Schedule, Simulator

DATA = (
    "dataset=synthetic",
    "dataset.shape=[3,32,32]",
    "dataset.num_train=2000",
    "dataset.num_test=100",
    "model=cifar_cnn",
)


def run(root: Path, name: str, *args: str) -> tuple[dict, Path]:
    out = root / name
    cmd = [
        sys.executable,
        "-m",
        "psbench.cli",
        "engine=dist",
        "logger=none",
        "trainer.progress=none",
        f"hydra.run.dir={out}",
        *DATA,
        *args,
    ]
    r = subprocess.run(
        cmd,
        cwd=root,
        capture_output=True,
        text=True,
        env={
            "PSBENCH_ROOT": str(root),
            **{k: v for k, v in __import__("os").environ.items() if k != "HYDRA_FULL_ERROR"},
        },
    )
    if r.returncode != 0:
        raise SystemExit(f"{name} failed:\n{r.stderr[-3000:]}")
    return json.loads((out / "summary.json").read_text()), out


def simulate(protocol: Protocol, cost, mu: int, gradients: int) -> float:
    sim = Simulator(protocol, cost, Topology("rudra_base"), mu, gradients, 0)
    for _ in sim.run():
        pass
    return sim.stats.sim_time_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pushes", type=int, default=300)
    ap.add_argument("--learners", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--mu", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the PS and of each learner")
    a = ap.parse_args()
    common = (
        f"batch_size={a.mu}",
        "epochs=100",
        f"trainer.num_threads={a.threads}",
        f"engine.learner_threads={a.threads}",
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"PS throughput, CIFAR CNN, async free-run, μ={a.mu}, {a.pushes} pushes:")
        print(f"{'λ':>3} {'pushes/s':>9} {'MB/s in':>8} {'σ mean':>7} {'PS busy/push ms':>15}")
        for lam in a.learners:
            s, out = run(
                root, f"tp{lam}", f"learners={lam}", "protocol=async", f"trainer.max_updates={a.pushes}", *common
            )
            with np.load(out / "dist_timing.npz") as z:
                busy = (z["push_s"].sum() + z["grant_s"].sum() + z["apply_s"].sum()) / s["pushes_applied"]
            print(
                f"{lam:>3} {s['pushes_per_s']:>9.1f} {s['pushes_per_s'] * s['model_bytes'] / 1e6:>8.1f} "
                f"{s['staleness_mean']:>7.2f} {1e3 * busy:>15.2f}"
            )

        lam = 4
        runs = {}
        for proto in ("async", "hardsync"):
            updates = a.pushes if proto == "async" else a.pushes // lam
            runs[proto] = run(
                root, f"sp_{proto}", f"learners={lam}", f"protocol={proto}", f"trainer.max_updates={updates}", *common
            )
        (sa, da), (sh, dh) = runs["async"], runs["hardsync"]
        measured = sh["run_time_s"] / sa["run_time_s"]
        G = sa["gradients"]

        def fitted(d: Path, s: dict):
            with np.load(d / "dist_timing.npz") as z:
                return fit_cost(Schedule.load(d / "schedule.npz"), {k: z[k] for k in z.files}, s["model_bytes"], a.mu)

        cost_a = fitted(da, sa)
        pa, ph = Protocol("async", lam), Protocol("hardsync", lam)
        pred = simulate(ph, cost_a, a.mu, G) / simulate(pa, cost_a, a.mu, G)
        pred_own = simulate(ph, fitted(dh, sh), a.mu, G) / simulate(pa, cost_a, a.mu, G)
        print(f"\nλ={lam}, {G} gradients each: async {sa['run_time_s']:.2f} s, hardsync {sh['run_time_s']:.2f} s")
        print(
            f"speedup async/hardsync: measured {measured:.2f}x, simulated (costs fitted to the async run) "
            f"{pred:.2f}x, (each protocol with its own fitted costs) {pred_own:.2f}x"
        )
        cal = sa["calibration"]
        print(f"async calibration: KS(σ) {cal['ks_staleness']:.3f}, time/epoch error {cal['epoch_time_rel_error']:.1%}")


if __name__ == "__main__":
    main()
