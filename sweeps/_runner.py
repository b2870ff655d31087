"""Shared runner of the ``sweeps/`` entry points (see :mod:`sweeps`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SCALES = ("ci", "small", "paper")
REPO = Path(__file__).resolve().parents[1]
#: the seeds of a scale whose page decides learning claims (analysis.core: ≥ 3 seeds per configuration)
SEEDS = "hydra.sweeper.params.seed='choice(0,1,2)'"


def command(name: str, experiment: str, overrides: Sequence[str], scale: str, extra: Sequence[str] = (),
            resources: str | None = None) -> list[str]:
    """The ``psbench -m`` command line of one entry point at one scale.

    ``resources=<scale>`` is what each job asks a cluster launcher for (``resources``: the preset a schedule-only
    entry point asks for at every scale, ``ci`` — its paper scale is a few CPU minutes, no GPU); ``extra`` (the
    user's overrides, e.g. ``hydra/launcher=submitit_slurm hydra.sweeper.n_jobs=8``) comes last, so it wins.
    """
    study = f"{name}_{scale}"
    return [sys.executable, "-m", "psbench.cli", "-m", f"experiment={experiment}", *overrides,
            f"hydra.sweeper.study_name={study}", f"++tags.scale={scale}", f"resources={resources or scale}",
            "trainer.progress=none", *extra]


def main(name: str, experiment: str, scales: Mapping[str, Sequence[str]], argv: Sequence[str] | None = None,
         resources: str | None = None) -> int:
    """``python sweeps/<name>.py [scale=ci] [override ...]``: run the sweep, print its wall time."""
    args = list(sys.argv[1:] if argv is None else argv)
    scale = "ci"
    for a in list(args):
        if a.startswith("scale="):
            scale = a.split("=", 1)[1]
            args.remove(a)
    if scale not in scales:
        print(f"{name}: error: scale={scale!r} is invalid: allowed one of {', '.join(scales)}", file=sys.stderr)
        return 2
    cmd = command(name, experiment, scales[scale], scale, args, resources)
    print("+", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, cwd=os.environ.get("PSBENCH_ROOT") or os.getcwd())
    print(f"{name} scale={scale}: exit {rc} after {time.perf_counter() - t0:.1f} s", flush=True)
    return rc
