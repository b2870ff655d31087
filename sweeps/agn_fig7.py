"""AGN Fig 7 (Hermans et al. §4): AGN vs AEASGD vs DynSGD with accumulated commits, training accuracy over time.

    python sweeps/agn_fig7.py scale=ci --panel a    # H = 10, n = 20 (experiment=agn/fig7a)
    python sweeps/agn_fig7.py scale=ci --panel b    # H = 3 (experiment=agn/fig7b)

The paper reports DynSGD *diverging* in panel a (its 1/(σ+1) scaling ignores how far an accumulated commit moves
the center) and less so in panel b. The three optimizers are the cases of one grid study per panel, with the same
hyperparameters (no per-optimizer tuning beyond AEASGD's ρ = 0.9/(nη)). The report (``python -m analysis``, page
``agn_fig7``) shows the measured curves (the learners' mini-batch training accuracy against simulated time), final
test accuracy and each optimizer's drop from its peak, and decides the claims; whatever the curves show is reported.

* ``ci``: 3 epochs of MNIST on an MLP 784-128-10, seeds 0, 1, 2 (the report decides its claims on ≥ 3 seeds:
  E(AGN, ·) and DynSGD's drop per seed). Cost at ci, seeds 0–2 (9 runs, 2 cores, 2026-11-24): panel a 26 min at
  load 13 (276 CPU s), panel b 18.6 min at load 2–13 (308 CPU s); one seed took ~3 min a panel when quiet.
* ``paper``: 40 epochs of the preset's convnet (agn_net), seed 0: a cluster job.

The trials run one at a time at every scale (as ``--serial``), with torch's default threads, as this figure's runs
always have.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, SERIAL
from sweeps._runner import main as run_sweep

SCALES = {
    "ci": ["epochs=3", "model=mlp", SEEDS],
    "paper": ["epochs=40"],
}
PANELS = ("a", "b")


def panel_of(argv: list[str]) -> tuple[str, list[str]]:
    """``(panel, the other arguments)`` of ``argv``: ``--panel a`` or ``--panel=a`` (default ``a``)."""
    panel, rest, args = "a", [], iter(argv)
    for a in args:
        if a == "--panel":
            panel = next(args, "")
        elif a.startswith("--panel="):
            panel = a.split("=", 1)[1]
        else:
            rest.append(a)
    return panel, rest


def main(argv: list[str] | None = None) -> int:
    panel, rest = panel_of(list(sys.argv[1:] if argv is None else argv))
    if panel not in PANELS:
        print(f"agn_fig7: error: --panel={panel!r} is invalid: allowed one of {', '.join(PANELS)}", file=sys.stderr)
        return 2
    return run_sweep(f"agn_fig7{panel}", f"agn/fig7{panel}", SCALES, [*rest, SERIAL])


if __name__ == "__main__":
    sys.exit(main())
