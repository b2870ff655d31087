"""AGN Fig 7 (Hermans et al. §4): AGN vs AEASGD vs DynSGD with accumulated commits, training accuracy over time.

    python sweeps/agn_fig7.py --panel a --scale ci     # H = 10, n = 20, 3 epochs of MNIST
    python sweeps/agn_fig7.py --panel b --scale paper  # H = 3, 40 epochs

The paper reports DynSGD *diverging* in panel a (its 1/(σ+1) scaling ignores how far an
accumulated commit moves the center) and less so in panel b. This script runs the three
optimizers with the same hyperparameters (no per-optimizer tuning beyond AEASGD's ρ = 0.9/(nη)),
prints the measured curves — the learners' mini-batch training accuracy (``train_accuracy``)
against simulated time, binned — plus final test accuracy and whether a run diverged, and saves
``fig7<panel>.png`` under ``--root``. Whatever the curves show is reported as measured.

``ci`` runs each optimizer with seeds 0, 1, 2 (the report decides its claims on ≥ 3 seeds: E(AGN, ·) and
DynSGD's drop per seed); the printed bins average the seeds, the last table has one row per run. ``paper``
runs seed 0 (a cluster job). ``--seeds`` runs a subset. Cost at ci, seeds 0–2 (9 runs, 2 cores, 2026-11-24): panel a
26 min at load 13 (276 CPU s), panel b 18.6 min at load 2–13 (308 CPU s); one seed took ~3 min a panel when quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LR = 0.001
#: ci: 3 epochs and an MLP 784-128-10 (minutes here); paper: 40 epochs of the preset's convnet (agn_net)
SCALES = {"ci": ["epochs=3", "model=mlp"], "paper": ["epochs=40"]}
SEEDS = {"ci": (0, 1, 2), "paper": (0,)}


def command(out: Path, preset: str, protocol: str, n: int, scale: str, extra: list[str], seed: int = 0) -> list[str]:
    """The ``psbench`` command of one optimizer and seed; its run dir is ``out/seed<seed>/<protocol>``."""
    out = out / f"seed{seed}" / protocol
    args = [sys.executable, "-m", "psbench.cli", f"experiment={preset}", f"protocol={protocol}", *SCALES[scale],
            f"seed={seed}", "trainer.progress=none", f"optimizer.lr={LR}", f"hydra.run.dir={out}",
            f"++tags.scale={scale}", *extra]
    if protocol == "aeasgd":
        args.append(f"protocol.rho={0.9 / (n * LR):g}")
    return args


def run(root: Path, out: Path, preset: str, protocol: str, n: int, scale: str, extra: list[str],
        seed: int = 0) -> dict:
    args = command(out, preset, protocol, n, scale, extra, seed)
    print("$", " ".join(args[1:]), flush=True)
    subprocess.run(args, cwd=root, env={**os.environ, "PSBENCH_ROOT": str(root)}, check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads((out / f"seed{seed}" / protocol / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--panel", choices=("a", "b"), default="a")
    ap.add_argument("--scale", choices=("ci", "paper"), default="ci")
    ap.add_argument("--root", type=Path, default=Path(os.environ.get("PSBENCH_ROOT") or os.getcwd()),
                    help="MLflow store and run dirs (default $PSBENCH_ROOT or the current dir, as psbench)")
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", help="seeds to run (default: the scale's, see SEEDS)")
    ap.add_argument("overrides", nargs="*")
    # `scale=ci` as the other entry points take it, or --scale ci
    args = ap.parse_args([f"--scale={a[6:]}" if a.startswith("scale=") else a for a in sys.argv[1:]])
    root = args.root.resolve()
    out = root / "sweeps" / f"agn_fig7{args.panel}_{args.scale}"
    out.mkdir(parents=True, exist_ok=True)
    preset, n = f"agn/fig7{args.panel}", 20
    seeds = tuple(args.seeds or SEEDS[args.scale])
    runs = {(p, k): run(root, out, preset, p, n, args.scale, args.overrides, k)
            for k in seeds for p in ("agn", "aeasgd", "dynsgd")}

    from mlflow import MlflowClient

    from psbench.tracking.temporal_efficiency import mlflow_curve

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    curves = {key: mlflow_curve(client, s["mlflow_run_id"]) for key, s in runs.items()}
    opts = ("agn", "aeasgd", "dynsgd")
    t_end = max(c[0][-1] for c in curves.values())
    edges = np.linspace(0, t_end, args.bins + 1)
    print(f"\n### AGN Fig 7{args.panel} (n = {n}, H = {'10' if args.panel == 'a' else '3'}, scale {args.scale}, "
          f"seeds {', '.join(map(str, seeds))}): learners' training accuracy, mean per simulated-time bin over the "
          "seeds\n")
    print("| t_sim up to | " + " | ".join(opts) + " |")
    print("|---|" + "---|" * len(opts))
    for lo, hi in pairwise(edges):
        cells = []
        for o in opts:
            sel = np.concatenate([f[(t > lo) & (t <= hi)] if lo > 0 else f[t <= hi]
                                  for (p, _), (t, f) in curves.items() if p == o])
            cells.append(f"{100 * sel.mean():.1f}%" if len(sel) else "–")
        print(f"| {hi:.3f}s | " + " | ".join(cells) + " |")
    print("\n| optimizer | seed | status | test acc | final train acc | min train acc after 1st bin | t_sim |")
    print("|---|---|---|---|---|---|---|")
    for (p, k), s in sorted(runs.items(), key=lambda kv: (opts.index(kv[0][0]), kv[0][1])):
        t, f = curves[(p, k)]
        late = f[t > edges[1]]
        err = s.get("test_error")
        acc = f"{100 * (1 - err):.2f}%" if err is not None else "–"
        print(f"| {p} | {k} | {s['status']} | {acc} | {100 * f[-5:].mean():.2f}% | "
              f"{100 * late.min() if len(late) else float('nan'):.2f}% | {s['sim_time_s']:.3f}s |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, o in enumerate(opts):
        for k, (p, seed) in enumerate(key for key in curves if key[0] == o):
            t, f = curves[(p, seed)]
            ax.plot(t, f, color=f"C{i}", label=p if k == 0 else None, lw=1, alpha=1.0 if k == 0 else 0.5)
    ax.set_xlabel("simulated time [s]")
    ax.set_ylabel("training accuracy (learners' mini-batches)")
    ax.set_title(f"AGN Fig 7{args.panel}, n = {n}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"fig7{args.panel}.png", dpi=100)
    print(f"\nplot: {out / f'fig7{args.panel}.png'}")


if __name__ == "__main__":
    main()
