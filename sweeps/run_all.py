"""Every paper entry point at one scale, then the report: ``python -m sweeps.run_all scale=ci [only=rudra,agn]
[override …]``.

Runs each entry of ``sweeps/entries.yaml`` that has the scale, in the file's order (a failing one is reported and the
rest go on; re-running resumes, since every study is persistent), then ``python -m analysis`` over the same store
(``$PSBENCH_ROOT`` or the current dir) and prints one line per entry point with its exit code and wall time. At
``scale=ci`` the whole set took 33 min on a 2-core machine (2026-11-24; README, "Paper sweeps"). An entry's
``run_all`` says when it runs at another scale than run_all's: the simulation-only ones (schedules, no training) run
their ``paper`` scale whatever ``scale`` says (a few minutes each; their claims are about the papers' clusters in
steady state, which smaller scales do not reach); ``cifar_jpeg_cost`` (what the JPEG re-encoding of ``full`` costs,
measured on the subset) runs its ``ci`` with ``scale=full``, first. ``--dry-run`` prints the commands only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from sweeps._runner import SERIAL, scale_of  # noqa: E402
from sweeps.entries import ENTRIES  # noqa: E402

#: the scales run_all takes: ``full`` is all 60,000 CIFAR-10 images as JPEG q75 (about an hour per entry here),
#: ``paper_jpeg`` the papers' 140 epochs on the same images (seed 0, the decisive cases)
RUN_ALL_SCALES = ("ci", "small", "full", "paper_jpeg", "paper")
#: the schedule-only entries: each runs its ``paper`` scale at every run_all scale but paper_jpeg
SIMULATION_ONLY = tuple(n for n, e in ENTRIES.items() if e.run_all and e.run_all[1] == "paper")


def commands(scale: str, only: list[str] | None = None, extra: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """(name, argv of ``python -m sweeps``) of every entry that runs at run_all's ``scale`` (and whose name starts
    with one of ``only``).

    ``extra`` overrides (``hydra/launcher=submitit_slurm``, ``hydra.launcher.partition=gpu``) go to every entry;
    ``hydra.sweeper.*`` ones and ``--serial`` only to those that batch their trials (not the serial ones, which run
    one trial at a time at every scale).
    """
    out = []
    for name, e in ENTRIES.items():
        along, run_at = e.run_all or (tuple(e.scales), scale)
        if scale not in along or (only and not any(name.startswith(o) for o in only)):
            continue
        own = [x for x in extra or [] if not (e.serial and x.startswith(("hydra.sweeper.", SERIAL)))]
        out.append((name, [sys.executable, "-m", "sweeps", name, f"scale={run_at}", *own]))
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        scale, rest = scale_of("run_all", args, RUN_ALL_SCALES)
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
    env = {**os.environ, "PSBENCH_ROOT": root}
    for name, cmd in todo:
        print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=HERE.parent, env=env)  # `-m sweeps` from the repository root, in the store
        results.append((name, rc, time.perf_counter() - t0))
    rc = subprocess.call(report, cwd=HERE.parent, env=env)
    print(f"\n{'entry point':<26} exit   wall s")
    for name, code, wall in results:
        print(f"{name:<26} {code:>4} {wall:>8.1f}")
    print(f"report: exit {rc}, {Path(root) / 'reports' / 'index.html'}")
    return max([rc] + [code for _, code, _ in results])


if __name__ == "__main__":
    sys.exit(main())
