"""AGN Table 1 (Hermans et al. §4): AGN vs asynchronous EASGD per (n, H), paper numbers beside ours.

    python sweeps/agn_table1.py --scale ci      # n ∈ {10, 20}, H ∈ {10, 20, 40}, 3 epochs, seeds 0–2 (minutes)
    python sweeps/agn_table1.py --scale paper   # n ∈ {10, 20, 40}, H ∈ {10, 15, …, 40}, 40 epochs, seed 0

Runs the ``psbench`` CLI (one Hydra multirun per optimizer and n, MLflow store under ``--root``),
then prints a Markdown table per cell: accuracy (test accuracy of the center; the learners' final
mini-batch training accuracy, which is what the paper's curves show), simulated training time,
and the temporal efficiency E(AGN, AEASGD) (Eq 4) computed from the MLflow histories of
``train_accuracy`` over ``sim_time_s`` — with the paper's Table 1 values in the same row.
AEASGD uses ρ = 0.9/(n·η) (elastic β = nηρ = 0.9, Zhang et al. §5). Simulated times come from
our cost model (``hardware=laptop``), so only their ratios are comparable with the paper's.

``ci`` runs seeds 0, 1, 2 of every cell (the report decides a claim on ≥ 3 seeds per configuration; the table
below prints one row per seed; one seed took ~5 min here, so about 15 min, not re-timed); ``paper`` one seed (a
cluster job). ``--seeds`` runs a subset (e.g. to add seeds
to a store).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.pages.agn_paper import TABLE1 as PAPER  # noqa: E402

SCALES = {"ci": ("agn/table1_ci", (10, 20), (10, 20, 40)),
          "paper": ("agn/table1", (10, 20, 40), tuple(range(10, 41, 5)))}
SEEDS = {"ci": (0, 1, 2), "paper": (0,)}
LR = 0.001


def command(root: Path, scale: str, preset: str, protocol: str, n: int, hs: tuple[int, ...], extra: list[str],
            seeds: tuple[int, ...] = (0,)) -> list[str]:
    """The ``psbench -m`` command of one (optimizer, n): every H and seed of the scale."""
    sweep = sweep_dir(root, scale, protocol, n)
    args = [sys.executable, "-m", "psbench.cli", "-m", f"experiment={preset}", f"protocol={protocol}", f"learners={n}",
            f"protocol.local_steps={','.join(map(str, hs))}", f"seed={','.join(map(str, seeds))}",
            f"optimizer.lr={LR}", "trainer.progress=none",
            f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=seed${seed}_H${protocol.local_steps}",
            f"++tags.scale={scale}", f"resources={scale}", *extra]
    if protocol == "aeasgd":
        args.append(f"protocol.rho={0.9 / (n * LR):g}")
    return args


def multirun(root: Path, scale: str, preset: str, protocol: str, n: int, hs: tuple[int, ...],
             extra: list[str], seeds: tuple[int, ...] = (0,)) -> list[dict]:
    args = command(root, scale, preset, protocol, n, hs, extra, seeds)
    env = {**os.environ, "PSBENCH_ROOT": str(root)}
    print("$", " ".join(args[1:]), flush=True)
    subprocess.run(args, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    return summaries(sweep_dir(root, scale, protocol, n))


def summaries(sweep: Path) -> list[dict]:
    """The runs' summary.json under ``sweep``, each with its H and seed (from its resolved config)."""
    out = []
    for f in sorted(sweep.glob("*/summary.json")):
        lines = (f.parent / "resolved_config.yaml").read_text().splitlines()
        h = next(int(x.split(":")[1]) for x in lines if x.strip().startswith("local_steps:"))
        seed = next(int(x.split(":")[1]) for x in lines if x.startswith("seed:"))
        out.append({**json.loads(f.read_text()), "H": h, "seed": seed})
    return out


def sweep_dir(root: Path, scale: str, protocol: str, n: int) -> Path:
    return root / "sweeps" / f"agn_table1_{scale}" / f"{protocol}_n{n}"


def final_train_accuracy(client, run_id: str, last: int = 5) -> float:
    hist = sorted(client.get_metric_history(run_id, "train_accuracy"), key=lambda m: m.step)
    return float(np.mean([m.value for m in hist[-last:]])) if hist else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="ci")
    ap.add_argument("--root", type=Path, default=Path(os.environ.get("PSBENCH_ROOT") or os.getcwd()),
                    help="MLflow store and sweep dirs (default $PSBENCH_ROOT or the current dir, as psbench)")
    ap.add_argument("--report", action="store_true", help="only print the table of an existing --root")
    ap.add_argument("--seeds", type=int, nargs="+", help="seeds to run (default: the scale's, see SEEDS)")
    ap.add_argument("overrides", nargs="*", help="extra psbench overrides, e.g. trainer.num_threads=1")
    # `scale=ci` as the other entry points take it, or --scale ci
    args = ap.parse_args([f"--scale={a[6:]}" if a.startswith("scale=") else a for a in sys.argv[1:]])
    preset, ns, hs = SCALES[args.scale]
    root = args.root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    seeds = tuple(args.seeds or SEEDS[args.scale])
    runs: dict[tuple[str, int, int, int], dict] = {}
    for protocol in ("agn", "aeasgd"):
        for n in ns:
            got = summaries(sweep_dir(root, args.scale, protocol, n)) if args.report else multirun(
                root, args.scale, preset, protocol, n, hs, args.overrides, seeds)
            for s in got:
                runs[(protocol, n, s["H"], s["seed"])] = s
    seeds = tuple(sorted({k[3] for k in runs}))

    from mlflow import MlflowClient

    from psbench.tracking.temporal_efficiency import compare_runs

    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    print(f"\n### AGN Table 1, scale {args.scale} (ours | paper)\n")
    print("| n | H | seed | AGN test acc | AGN train acc | AGN t_sim | AEASGD test acc | AEASGD train acc "
          "| AEASGD t_sim | E(AGN,AEASGD) "
          "| paper AGN t | paper AGN acc | paper AEASGD t | paper AEASGD acc | paper E |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wins = cells = 0
    for n, h, seed in ((n, h, seed) for n in ns for h in hs for seed in seeds):
        a, b = runs.get(("agn", n, h, seed)), runs.get(("aeasgd", n, h, seed))
        if not a or not b:
            continue
        cells += 1
        e = compare_runs(uri, a["mlflow_run_id"], b["mlflow_run_id"], "train_accuracy")
        wins += e > 1
        ta, tb = (final_train_accuracy(client, r["mlflow_run_id"]) for r in (a, b))
        p = PAPER.get((n, h))
        paper = f"{p[0]:.2f}s | {p[1]:.2f}% | {p[2]:.2f}s | {p[3]:.2f}% | {p[4]:.3f}" if p else "– | – | – | – | –"
        print(f"| {n} | {h} | {seed} | {100 * (1 - a['test_error']):.2f}% | {100 * ta:.2f}% | {a['sim_time_s']:.2f}s "
              f"| {100 * (1 - b['test_error']):.2f}% | {100 * tb:.2f}% | {b['sim_time_s']:.2f}s | {e:.3f} "
              f"| {paper} |")
    paper_wins = sum(PAPER[(n, h)][4] > 1 for n in ns for h in hs if (n, h) in PAPER)
    print(f"\nAGN more temporally efficient than AEASGD in {wins}/{cells} (cell, seed) pairs "
          f"(paper, same cells: {paper_wins}/{sum((n, h) in PAPER for n in ns for h in hs)}).")


if __name__ == "__main__":
    main()
