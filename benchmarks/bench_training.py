"""Simulated-training throughput against the equivalent large-batch PyTorch loop, in one run.

    python benchmarks/bench_training.py [--epochs 1] [--threads 2] [--repeats 5] [--skip-scaling] [--skip-rss]
                                        [--malloc pinned|default]

Case: CIFAR CNN (Rudra §4.2) on ``cifar10_subset``, μ = 4, momentum SGD, executed by
:class:`ParameterServerStrategy` inside a Lightning Trainer (look-ahead execution, K updates per Trainer
step as psbench chooses them) — against a plain loop of one learner with batch μλ = 120 over the same samples.
This machine's speed drifts by tens of percent within minutes, so the two are timed in rounds, back to back in
every round, each ratio is taken within its round and the median of the rounds' ratios is printed. Every batch
shape is warmed up first (oneDNN is several times slower on a new shape's first calls): one untimed round.

1. samples/s of hardsync, 1-softsync, 30-softsync, async and SSP(s=3) at λ = 30 as a ratio of the plain
   loop's (targets: ≥ 0.95 for hardsync and 1-softsync, ≥ 0.75 for the others), and as a ratio of the
   same plain loop fed channels_last samples (the strategy computes conv nets on the CPU in that layout,
   so this column is the one that shows what the execution itself costs), and as a ratio of a plain NHWC loop
   of batch μ = 4, one step per gradient: the compute floor of the asynchronous cases, whose every gradient is a
   4-sample forward/backward on its own weights (torch gains little from a second thread at 4 samples); the
   ``floor`` column is that μ = 4 loop's own ratio to the plain loop: no executor of these schedules can do
   better than one 4-sample step per update;
2. cost per sample of async as λ grows (8, 30, 128, 1000), relative to λ = 30 (target at 1,000: ≤ 1.5×),
   with the peak bytes of snapshots and gradients computed ahead;
3. peak RSS while training, plain loop vs 30-softsync (target ≤ 2×), each in its own process (sampled every 10 ms).

The allocator: glibc hands large freed blocks back to the OS and adapts its thresholds to what the process has
freed so far, so the plain loop's NCHW activations (15 MB a batch-120 layer) were page-faulted in again every
step or not, depending on what ran before: the same loop measured 2,360–2,560 samples/s in fresh processes and
3,290–3,390 with glibc's thresholds fixed (2 threads, 2026-11-24). ``--malloc pinned`` (the default) fixes them
(``mallopt``: blocks up to 32 MiB from the heap, no trimming below 1 GiB) before anything is allocated, so every
timer runs on a warm heap and the baseline is the plain loop at its best; the strategy's and the μ = 4 loop's
speeds do not change with it. ``--malloc default`` measures glibc's own behaviour.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from statistics import median

import pytorch_lightning as pl
import torch

from psbench.cli import default_data_dir
from psbench.cluster import CostModel, Topology
from psbench.data import build_datamodule
from psbench.lr import LRPolicy
from psbench.models import build_model, model_bytes
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, SampleStream, UpdateBatches
from psbench.strategy.chunks import UpdateChunks, auto_updates_per_step

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
DATA = Path(os.environ.get("PSBENCH_DATA") or default_data_dir("."))  # where psbench itself looks
OPT = {"name": "sgd", "lr": 0.001, "momentum": 0.9}
LAM, MU = 30, 4
CASES = {
    "hardsync": Protocol("hardsync", LAM),
    "1-softsync": Protocol("softsync", LAM, n=1),
    "30-softsync": Protocol("softsync", LAM, n=LAM),
    "async": Protocol("async", LAM),
    "ssp-s3": Protocol("ssp", LAM, staleness_bound=3),
}


def pin_malloc() -> bool:
    """glibc: serve blocks up to 32 MiB from the heap and never trim it below 1 GiB (see the module docstring)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return libc.mallopt(m_mmap_threshold, 32 * 2**20) == 1 and libc.mallopt(m_trim_threshold, 2**30) == 1


def plain_loop(dm, samples: int, batch: int, nhwc: bool = False) -> Callable[[], float]:
    """A timer of one pass of one learner with batch μλ over the next ``samples`` of the stream (``nhwc``:
    samples in channels_last, the layout psbench's look-ahead computes conv nets in on the CPU)."""
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    stream = SampleStream(len(dm.x_train), 0)
    offset = 0

    def epoch() -> float:
        nonlocal offset
        t0 = time.perf_counter()
        for p in range(offset, offset + samples - batch + 1, batch):
            idx = stream.indices(p, batch)
            opt.zero_grad()
            x = dm.x_train[idx].contiguous(memory_format=torch.channels_last) if nhwc else dm.x_train[idx]
            torch.nn.functional.cross_entropy(net(x), dm.y_train[idx]).backward()
            opt.step()
        offset += samples
        return time.perf_counter() - t0

    return epoch


def strategy_run(
    dm, proto: Protocol, mu: int, samples: int, updates_per_step: int | None = None
) -> tuple[Callable[[], float], int, dict, Callable[[], int]]:
    """(timer of one fit, samples, simulator stats, peak snapshot bytes of the last fit) of the strategy on
    ``proto``'s schedule."""
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    cost = CostModel.from_profile("p775", model_bytes(net))
    sim = Simulator(proto, cost, Topology(), mu, samples // mu, 0)
    sched = Schedule.collect(sim.run())
    updates = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy(), mu, proto.learners, 0, with_samples=False)
    k = updates_per_step if updates_per_step is not None else auto_updates_per_step(sched, mu)
    data = torch.utils.data.DataLoader(
        UpdateChunks(updates, 0, sched.num_updates, k, sched.num_updates), batch_size=None
    )  # as psbench runs it: K updates per Trainer step
    peak = 0

    def fit() -> float:
        nonlocal peak
        module = ClassifierModule(net, OPT)
        strategy = ParameterServerStrategy(sched)
        trainer = pl.Trainer(
            strategy=strategy,
            accelerator="cpu",
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
        )
        t0 = time.perf_counter()
        trainer.fit(module, train_dataloaders=data)
        peak = strategy.peak_snapshot_bytes
        return time.perf_counter() - t0

    return fit, sched.num_gradients * mu, sim.stats.as_dict(), lambda: peak


def paired(timers: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Seconds of each timer in ``repeats`` rounds, the timers interleaved in every round (after one warm-up
    round: every shape seen once), so that a ratio of two timers compares passes of the same minute."""
    for t in timers.values():
        t()
    out: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for k, t in timers.items():
            out[k].append(t())
    return out


def speedup(t: dict[str, list[float]], base: str) -> float:
    """Median over the rounds of seconds(base) / seconds(strategy)."""
    return median(b / a for a, b in zip(t["strategy"], t[base], strict=True))


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_case(case: str, epochs: float) -> None:
    """Run one case in this process; print its peak RSS while training and the RSS before (MiB, data loaded)."""
    dm = build_datamodule("cifar10_subset", DATA, seed=0)
    dm.setup("fit")
    samples = int(epochs * dm.num_train) // (MU * LAM) * (MU * LAM)
    before, peak, done = _rss_mib(), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mib())
            time.sleep(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    if case == "plain":
        plain_loop(dm, samples, MU * LAM)()
    else:
        strategy_run(dm, CASES[case], MU, samples)[0]()
    done.set()
    t.join()
    print(max(peak[0], _rss_mib()), before)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per case (medians are reported)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-rss", action="store_true")
    ap.add_argument(
        "--malloc",
        choices=("pinned", "default"),
        default="pinned",
        help="glibc's allocator thresholds fixed before anything is allocated (see above), or glibc's own",
    )
    ap.add_argument("--rss-case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    pinned = args.malloc == "pinned" and pin_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.rss_case:
        return rss_case(args.rss_case, args.epochs)
    dm = build_datamodule("cifar10_subset", DATA, seed=0)
    dm.setup("fit")
    samples = int(args.epochs * dm.num_train) // (MU * LAM) * (MU * LAM)
    print(
        f"threads={torch.get_num_threads()} samples={samples} malloc={'pinned' if pinned else 'default'}; median of "
        f"{args.repeats} rounds, each round the plain loop, the strategy, the NHWC loop and the μ=4 loop back to "
        "back; ratios per round, then their median (floor: the μ=4 loop's own ratio to the plain loop)"
    )
    print(
        f"{'case':<28}{'samples/s':>12}{'baseline':>10}{'ratio':>8}{'NHWC loop':>11}{'ratio':>8}"
        f"{'μ=4 loop':>10}{'ratio':>8}{'floor':>8}{'⟨σ⟩':>8}"
    )
    for name in args.cases.split(","):
        proto = CASES[name]
        fit, n, st, _ = strategy_run(dm, proto, MU, samples)
        timers = {
            "plain": plain_loop(dm, samples, MU * LAM),
            "strategy": fit,
            "nhwc": plain_loop(dm, samples, MU * LAM, nhwc=True),
            "mu": plain_loop(dm, samples, MU, nhwc=True),
        }
        t = paired(timers, args.repeats)
        line = (
            f"{proto.label + ' λ=30 μ=4':<28}{n / median(t['strategy']):>12,.0f}"
            f"{samples / median(t['plain']):>10,.0f}{speedup(t, 'plain') * n / samples:>8.2f}"
            f"{samples / median(t['nhwc']):>11,.0f}{speedup(t, 'nhwc') * n / samples:>8.2f}"
            f"{samples / median(t['mu']):>10,.0f}{speedup(t, 'mu') * n / samples:>8.2f}"
            f"{median(p / m for p, m in zip(t['plain'], t['mu'], strict=True)):>8.2f}"
            f"{st['staleness_mean']:>8.2f}"
        )
        print(line, flush=True)
        rounds = [round(p / s * n / samples, 2) for s, p in zip(t["strategy"], t["plain"], strict=True)]
        floors = [round(p / m, 2) for p, m in zip(t["plain"], t["mu"], strict=True)]
        print(f"{'':<4}rounds: strategy/plain {rounds}, μ=4 loop/plain {floors}", flush=True)
    if not args.skip_scaling:
        print(f"\n{'async μ=4':<16}{'ms/sample':>10}{'vs λ=30':>9}{'peak MiB':>10}{'⟨σ⟩':>8}")
        rows = {}
        for lam in (8, 30, 128, 1000):
            n_samples = max(samples, 3 * lam * MU)  # several pushes per learner at every λ
            fit, n, st, peak = strategy_run(dm, Protocol("async", lam), MU, n_samples)
            secs = median(paired({"fit": fit}, args.repeats)["fit"])
            rows[lam] = (secs / n, peak(), st["staleness_mean"])
        for lam, (cost, peak, sigma) in rows.items():
            print(
                f"{'λ=' + str(lam):<16}{1e3 * cost:>10.3f}{cost / rows[30][0]:>9.2f}{peak / 2**20:>10.1f}{sigma:>8.1f}"
            )
        print(f"λ=1000 / λ=30 cost per sample: {rows[1000][0] / rows[30][0]:.2f} (target ≤ 1.5)")
    if not args.skip_rss:
        rss = {}
        for case in ("plain", "30-softsync"):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--rss-case",
                    case,
                    "--epochs",
                    str(args.epochs),
                    "--threads",
                    str(torch.get_num_threads()),
                    "--malloc",
                    args.malloc,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            rss[case] = [float(v) for v in out.stdout.strip().splitlines()[-1].split()]
        (p_peak, p0), (s_peak, s0) = rss["plain"], rss["30-softsync"]
        print(
            f"\npeak RSS while training: plain loop {p_peak:.0f} MiB, 30-softsync {s_peak:.0f} MiB, ratio "
            f"{s_peak / p_peak:.2f} (target ≤ 2); growth over the loaded data: {p_peak - p0:.0f} vs "
            f"{s_peak - s0:.0f} MiB"
        )


if __name__ == "__main__":
    main()
