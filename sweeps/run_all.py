"""Every paper sweep at one scale, then the report: ``python sweeps/run_all.py scale=ci [only=rudra,agn] [override …]``.

Runs each entry point of ``sweeps/`` in turn (a failing one is reported and the rest go on; re-running
resumes, since every study is persistent), then ``python -m analysis`` over the same store
(``$PSBENCH_ROOT`` or the current dir) and prints one line per entry point with its exit code and wall
time. At ``scale=ci`` the whole set took 33 min on a 2-core machine (2026-11-24; README, "Paper sweeps").
The simulation-only entry points (:data:`SIMULATION_ONLY`: schedules, no training) always run their
``paper`` scale, whatever ``scale`` says: each takes a few minutes, and their claims are about the
papers' clusters in steady state, which smaller scales do not reach.
``scale=full`` (all 60,000 CIFAR-10 images as JPEG q75, :data:`sweeps._runner.CIFAR_SCALES`) runs the CIFAR entry
points that have it, the simulation-only ones at ``paper``, and ``cifar_jpeg_cost`` (what the JPEG re-encoding
costs, measured on the subset at its one scale, ``ci``), first, and ``terngrad_adam_pace`` (why TernGrad trails fp32
in Table 1 at ``full``) and ``rudra_table2_no_staleness`` (Table 2's μλ ≈ 128 rows without their staleness) after
the CIFAR entry points.
``--dry-run`` prints the commands only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from sweeps._runner import CIFAR_SCALES, SCALES, scale_of  # noqa: E402

#: the decisive CIFAR entry points that also run the papers' budget on the JPEG re-encoding (``paper_jpeg``: 140
#: epochs, seed 0, the cases their claims rest on)
PAPER_JPEG = ("rudra_fig5", "zhang_fig3")
WITH_PAPER_JPEG = ("ci", "small", "full", "paper_jpeg", "paper")

#: the entry points that train on CIFAR-10 (they have ``full``)
CIFAR = ("rudra_table2", "rudra_table3", "rudra_fig5", "rudra_fig6_7", "zhang_fig3", "terngrad_table1")
#: entry point -> scales it has (the AGN ones have no `small`)
ENTRY_POINTS: dict[str, tuple[str, ...]] = {
    "cifar_jpeg_cost": ("ci",),
    **{
        name: WITH_PAPER_JPEG if name in PAPER_JPEG else CIFAR_SCALES if name in CIFAR else SCALES
        for name in (
            "rudra_table1",
            "rudra_fig4",
            "rudra_table2",
            "rudra_table3",
            "rudra_table4",
            "rudra_fig5",
            "rudra_fig6_7",
            "rudra_fig8",
            "zhang_fig1",
            "zhang_fig2",
            "zhang_fig3",
            "terngrad_fig3",
            "terngrad_table1",
            "terngrad_fig5",
            "ssp_fig2_4",
            "ssp_fig3_5",
        )
    },
    "terngrad_adam_pace": ("full",),  # why TernGrad trails fp32 in Table 1 at full (after terngrad_table1)
    "rudra_table2_no_staleness": ("full",),  # why Table 2's μλ ≈ 128 rows spread at full: the rows without σ
    "rudra_table2_nominal": ("full", "paper_jpeg"),  # Table 2 under Eq 6 as written, α0/n
    "agn_table1": ("ci", "paper"),
    "agn_fig7": ("ci", "paper"),
}
#: schedule-only entry points: run at ``paper`` at every scale
SIMULATION_ONLY = (
    "rudra_table1",
    "rudra_fig4",
    "rudra_fig8",
    "rudra_table4",
    "zhang_fig1",
    "zhang_fig2",
    "terngrad_fig5",
)
#: entry points that run at one scale whatever run_all's: (the run_all scales that include them, the scale they run)
FIXED: dict[str, tuple[tuple[str, ...], str]] = {
    "cifar_jpeg_cost": (("full",), "ci"),  # the cost of full's JPEG pixels, on the subset
    **{name: (CIFAR_SCALES, "paper") for name in SIMULATION_ONLY},
}


def commands(scale: str, only: list[str] | None = None, extra: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """(name, argv) of every entry point that has ``scale`` (and whose name starts with one of ``only``).

    ``extra`` overrides (``hydra/launcher=submitit_slurm``, ``hydra.launcher.partition=gpu``) go to every entry
    point; ``hydra.sweeper.*`` ones and ``--serial`` only to those that batch their trials (not the AGN ones, which
    run one trial at a time at every scale).
    """
    out = []
    for name, scales in ENTRY_POINTS.items():
        along, run_at = FIXED.get(name, (scales, scale))
        if scale not in along or (only and not any(name.startswith(o) for o in only)):
            continue
        own = [e for e in extra or [] if not (name.startswith("agn_") and e.startswith(("hydra.sweeper.", "--serial")))]
        script = [sys.executable, str(HERE / f"{name}.py"), f"scale={run_at}", *own]
        out += [(f"{name} 7{p}", [*script, f"--panel={p}"]) for p in "ab"] if name == "agn_fig7" else [(name, script)]
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        scale, rest = scale_of("run_all", args, WITH_PAPER_JPEG)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    opts = dict(a.split("=", 1) for a in rest if a.startswith("only="))
    only = [o for o in opts.get("only", "").split(",") if o]
    extra = [a for a in rest if not a.startswith(("only=", "--dry-run"))]  # psbench overrides
    todo = commands(scale, only, extra)
    root = os.environ.get("PSBENCH_ROOT") or os.getcwd()
    report = [sys.executable, "-m", "analysis", "--root", root]
    if "--dry-run" in args:
        for _, cmd in todo:
            print(" ".join(cmd[1:]))
        print(" ".join(report[1:]))
        return 0
    results = []
    for name, cmd in todo:
        print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=root)
        results.append((name, rc, time.perf_counter() - t0))
    rc = subprocess.call(report, cwd=HERE.parent, env={**os.environ, "PSBENCH_ROOT": root})
    print(f"\n{'entry point':<16} exit   wall s")
    for name, code, wall in results:
        print(f"{name:<16} {code:>4} {wall:>8.1f}")
    print(f"report: exit {rc}, {Path(root) / 'reports' / 'index.html'}")
    return max([rc] + [code for _, code, _ in results])


if __name__ == "__main__":
    sys.exit(main())
