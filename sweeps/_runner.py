"""What every paper entry point shares (see :mod:`sweeps`): its ``psbench -m`` command line, the scale check, the
overrides that run its trials in parallel on this machine, and running the command in the store's dir."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

SCALES = ("ci", "small", "paper")
#: the scales of the CIFAR-10 entry points: ``full`` trains on all 60,000 images (``dataset=cifar10_jpeg``, JPEG q75)
#: for about an hour per entry point on this 2-core machine
CIFAR_SCALES = ("ci", "small", "full", "paper")
REPO = Path(__file__).resolve().parents[1]
#: the seeds of a scale whose page decides learning claims (analysis.verdicts: ≥ 3 seeds per configuration)
SEEDS = "hydra.sweeper.params.seed='choice(0,1,2)'"
#: scales whose jobs run in parallel on this machine by default (``paper`` is a cluster's: one local job at a time)
LOCAL_PARALLEL = ("ci", "small", "full", "paper_jpeg")
SERIAL = "--serial"
#: trials handed to the launcher at once, per core: joblib gives the next trial of a batch to whichever core is
#: free, so jobs of unequal length share the cores; with one trial per core each batch waits for its slowest
#: (Rudra Table 2 at ci: 23 trials of 3–6 s lost ~11 s of 72 s waiting in batches of 2)
TRIALS_PER_CORE = 4


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: taskset, SLURM, cgroup cpusets), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parallel(extra: Sequence[str], cores: int | None = None) -> list[str]:
    """Overrides that run a sweep's trials ``cores`` at a time on this machine, one torch thread each.

    On a few cores a μ = 4 gradient gains little from a second intra-op thread, while a second job doubles
    the throughput. The sweeper asks :data:`TRIALS_PER_CORE` trials per core at once (a grid's trials are fixed,
    so a batch only changes which core runs which; the sweeper records a batch's results when the whole batch
    is done, so a sweep killed mid-batch runs that batch's trials again).
    Empty when the user chose a launcher (``hydra/launcher=…``), the machine has one core or Hydra's joblib
    plugin is missing; the user's own ``hydra.launcher.n_jobs``, ``hydra.sweeper.n_jobs`` or
    ``trainer.num_threads`` come later and win. ``trainer.num_threads`` lands in each job's config: the
    weights' last bits depend on the thread count, and the same command gives the same results.
    """
    from psbench import launchers

    cores = cores or usable_cores()
    if cores < 2 or launchers.requested(extra) is not None or not launchers.installed("joblib"):
        return []
    return [
        "hydra/launcher=joblib",
        f"hydra.launcher.n_jobs={cores}",
        f"hydra.sweeper.n_jobs={TRIALS_PER_CORE * cores}",
        "trainer.num_threads=1",
    ]


def command(
    name: str,
    experiment: str,
    overrides: Sequence[str],
    scale: str,
    extra: Sequence[str] = (),
    resources: str | None = None,
) -> list[str]:
    """The ``psbench -m`` command line of one entry point at one scale.

    ``resources=<scale>`` is what each job asks a cluster launcher for (``resources``: the preset a schedule-only
    entry point asks for at every scale, ``ci`` — its paper scale is a few CPU minutes, no GPU); ``extra`` (the
    user's overrides, e.g. ``hydra/launcher=submitit_slurm hydra.sweeper.n_jobs=8``) comes last, so it wins.
    """
    study = f"{name}_{scale}"
    return [
        sys.executable,
        "-m",
        "psbench.cli",
        "-m",
        f"experiment={experiment}",
        *overrides,
        f"hydra.sweeper.study_name={study}",
        f"++tags.scale={scale}",
        f"resources={resources or scale}",
        "trainer.progress=none",
        *extra,
    ]


def scale_of(name: str, argv: Sequence[str], scales: Iterable[str] = SCALES) -> tuple[str, list[str]]:
    """``(scale, the other arguments)`` of ``argv``: ``scale=<s>`` (the last one wins; default ``ci``). A scale not in
    ``scales`` is a ``ValueError`` whose text is the one line to print: the scale check of every entry point."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("scale=")]
    scale = given[-1] if given else "ci"
    if scale not in scales:
        raise ValueError(f"{name}: error: scale={scale!r} is invalid: allowed one of {', '.join(scales)}")
    return scale, [a for a in argv if not a.startswith("scale=")]


def run(name: str, scale: str, cmd: Sequence[str]) -> int:
    """Run ``cmd`` in the store's dir (``$PSBENCH_ROOT`` or the current dir; a new one is created) and print its wall
    time; its exit code."""
    print("+", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    root = Path(os.environ.get("PSBENCH_ROOT") or os.getcwd())
    root.mkdir(parents=True, exist_ok=True)  # a new PSBENCH_ROOT is where this sweep's store begins
    rc = subprocess.call(cmd, cwd=root)
    print(f"{name} scale={scale}: exit {rc} after {time.perf_counter() - t0:.1f} s", flush=True)
    return rc
