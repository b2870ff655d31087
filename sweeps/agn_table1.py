"""AGN Table 1 (Hermans et al. §4): AGN vs asynchronous EASGD per (n, H), paper numbers beside ours.

    python sweeps/agn_table1.py --scale ci      # n ∈ {10, 20}, H ∈ {10, 20, 40}, 3 epochs (minutes)
    python sweeps/agn_table1.py --scale paper   # n ∈ {10, 20, 40}, H ∈ {10, 15, …, 40}, 40 epochs

Runs the ``psbench`` CLI (one Hydra multirun per optimizer and n, MLflow store under ``--root``),
then prints a Markdown table per cell: accuracy (test accuracy of the center; the learners' final
mini-batch training accuracy, which is what the paper's curves show), simulated training time,
and the temporal efficiency E(AGN, AEASGD) (Eq 4) computed from the MLflow histories of
``train_accuracy`` over ``sim_time_s`` — with the paper's Table 1 values in the same row.
AEASGD uses ρ = 0.9/(n·η) (elastic β = nηρ = 0.9, Zhang et al. §5). Simulated times come from
our cost model (``hardware=laptop``), so only their ratios are comparable with the paper's.
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
sys.path.insert(0, str(REPO / "src"))

# Table 1 of the paper: (n, H) -> (AGN t [s], AGN acc [%], AEASGD t [s], AEASGD acc [%], E(AGN, AEASGD))
PAPER = {
    (10, 10): (1066.08, 100.00, 953.61, 99.22, 1.009), (10, 15): (864.01, 99.53, 846.86, 99.38, 1.012),
    (10, 20): (886.34, 99.38, 804.07, 98.91, 1.003), (10, 25): (855.51, 98.75, 784.46, 98.91, 0.999),
    (10, 30): (886.01, 99.22, 930.73, 98.91, 0.988), (10, 35): (850.87, 98.44, 798.74, 99.22, 0.990),
    (10, 40): (845.21, 98.75, 791.04, 97.66, 0.990), (20, 10): (839.94, 99.26, 821.12, 97.90, 0.983),
    (20, 15): (571.17, 100.00, 610.88, 98.52, 1.018), (20, 20): (432.93, 99.38, 510.72, 97.78, 1.022),
    (20, 25): (479.72, 99.63, 421.50, 97.86, 1.009), (20, 30): (433.36, 99.42, 429.16, 98.36, 1.007),
    (20, 35): (418.83, 98.52, 409.86, 98.19, 1.002), (20, 40): (434.86, 98.44, 420.46, 97.66, 0.997),
    (40, 10): (748.94, 94.17, 1256.09, 96.57, 1.044), (40, 15): (506.25, 95.99, 534.42, 96.88, 0.964),
    (40, 20): (383.51, 99.24, 412.37, 96.65, 1.027), (40, 25): (308.15, 98.86, 347.50, 96.65, 1.025),
    (40, 30): (351.54, 98.66, 305.50, 96.47, 0.997), (40, 35): (279.30, 98.73, 252.70, 96.32, 1.009),
    (40, 40): (257.62, 97.88, 250.74, 96.65, 1.009),
}
SCALES = {"ci": ("agn/table1_ci", (10, 20), (10, 20, 40)),
          "paper": ("agn/table1", (10, 20, 40), tuple(range(10, 41, 5)))}
LR = 0.001


def multirun(root: Path, preset: str, protocol: str, n: int, hs: tuple[int, ...], extra: list[str]) -> list[dict]:
    sweep = root / "multirun" / f"{protocol}_n{n}"
    args = [sys.executable, "-m", "psbench.cli", "-m", f"experiment={preset}", f"protocol={protocol}", f"learners={n}",
            f"protocol.local_steps={','.join(map(str, hs))}", f"optimizer.lr={LR}", "trainer.progress=none",
            f"hydra.sweep.dir={sweep}", *extra]
    if protocol == "aeasgd":
        args.append(f"protocol.rho={0.9 / (n * LR):g}")
    env = {**os.environ, "PSBENCH_ROOT": str(root)}
    print("$", " ".join(args[1:]), flush=True)
    subprocess.run(args, cwd=root, env=env, check=True, stdout=subprocess.DEVNULL)
    out = []
    for f in sorted(sweep.glob("*/summary.json")):
        s = json.loads(f.read_text())
        cfg = (f.parent / "resolved_config.yaml").read_text()
        h = next(int(line.split(":")[1]) for line in cfg.splitlines() if line.strip().startswith("local_steps:"))
        out.append({**s, "H": h})
    return out


def final_train_accuracy(client, run_id: str, last: int = 5) -> float:
    hist = sorted(client.get_metric_history(run_id, "train_accuracy"), key=lambda m: m.step)
    return float(np.mean([m.value for m in hist[-last:]])) if hist else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="ci")
    ap.add_argument("--root", type=Path, default=REPO / "outputs" / "agn_table1")
    ap.add_argument("--report", action="store_true", help="only print the table of an existing --root")
    ap.add_argument("overrides", nargs="*", help="extra psbench overrides, e.g. trainer.num_threads=1")
    args = ap.parse_args()
    preset, ns, hs = SCALES[args.scale]
    root = args.root.resolve() / args.scale
    root.mkdir(parents=True, exist_ok=True)
    runs: dict[tuple[str, int, int], dict] = {}
    for protocol in ("agn", "aeasgd"):
        for n in ns:
            got = [] if args.report else multirun(root, preset, protocol, n, hs, args.overrides)
            if args.report:
                for f in sorted((root / "multirun" / f"{protocol}_n{n}").glob("*/summary.json")):
                    cfg = (f.parent / "resolved_config.yaml").read_text()
                    h = next(int(x.split(":")[1]) for x in cfg.splitlines() if x.strip().startswith("local_steps:"))
                    got.append({**json.loads(f.read_text()), "H": h})
            for s in got:
                runs[(protocol, n, s["H"])] = s

    from mlflow import MlflowClient

    from psbench.analysis.temporal_efficiency import compare_runs

    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(uri)
    print(f"\n### AGN Table 1, scale {args.scale} (ours | paper)\n")
    print("| n | H | AGN test acc | AGN train acc | AGN t_sim | AEASGD test acc | AEASGD train acc | AEASGD t_sim "
          "| E(AGN,AEASGD) | paper AGN t | paper AGN acc | paper AEASGD t | paper AEASGD acc | paper E |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wins = 0
    for n in ns:
        for h in hs:
            a, b = runs.get(("agn", n, h)), runs.get(("aeasgd", n, h))
            if not a or not b:
                continue
            e = compare_runs(uri, a["mlflow_run_id"], b["mlflow_run_id"], "train_accuracy")
            wins += e > 1
            ta, tb = (final_train_accuracy(client, r["mlflow_run_id"]) for r in (a, b))
            p = PAPER.get((n, h))
            paper = f"{p[0]:.2f}s | {p[1]:.2f}% | {p[2]:.2f}s | {p[3]:.2f}% | {p[4]:.3f}" if p else "– | – | – | – | –"
            print(f"| {n} | {h} | {100 * (1 - a['test_error']):.2f}% | {100 * ta:.2f}% | {a['sim_time_s']:.2f}s "
                  f"| {100 * (1 - b['test_error']):.2f}% | {100 * tb:.2f}% | {b['sim_time_s']:.2f}s | {e:.3f} "
                  f"| {paper} |")
    cells = sum(1 for n in ns for h in hs if ("agn", n, h) in runs and ("aeasgd", n, h) in runs)
    paper_wins = sum(PAPER[(n, h)][4] > 1 for n in ns for h in hs if (n, h) in PAPER)
    print(f"\nAGN more temporally efficient than AEASGD in {wins}/{cells} cells "
          f"(paper, same cells: {paper_wins}/{sum((n, h) in PAPER for n in ns for h in hs)}).")


if __name__ == "__main__":
    main()
