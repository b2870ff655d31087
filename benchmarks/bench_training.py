"""Simulated-training throughput against the equivalent large-batch PyTorch loop, in one run.

    python benchmarks/bench_training.py [--epochs 2] [--threads 2]

Case (issue "The harness"): CIFAR CNN (Rudra §4.2) on ``cifar10_subset``, λ = 30, μ = 4,
1-softsync, momentum SGD, executed by :class:`ParameterServerStrategy` inside a Lightning
Trainer — against a plain loop of one learner with batch μλ = 120 over the same samples.
Every batch shape is warmed up first (oneDNN is several times slower on a new shape's first
calls): the plain loop runs one warm-up epoch, the strategy one warm-up pass of the schedule.
Prints samples/s and the ratio (target ≥ 0.9); also 30-softsync and hardsync.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import warnings
from pathlib import Path

import pytorch_lightning as pl
import torch

from psbench.cli import default_data_dir
from psbench.cluster import CostModel, Topology
from psbench.data import build_datamodule
from psbench.lr import LRPolicy
from psbench.models import build_model, model_bytes
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, SampleStream, UpdateBatches

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
DATA = Path(os.environ.get("PSBENCH_DATA") or default_data_dir("."))  # where psbench itself looks
OPT = {"name": "sgd", "lr": 0.001, "momentum": 0.9}


def plain_loop(dm, samples: int, batch: int, repeats: int) -> float:
    """Best seconds of ``repeats`` passes of one learner with batch μλ over the same sample stream."""
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    stream = SampleStream(len(dm.x_train), 0)

    def epoch(offset: int) -> None:
        for p in range(offset, offset + samples - batch + 1, batch):
            idx = stream.indices(p, batch)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(dm.x_train[idx]), dm.y_train[idx]).backward()
            opt.step()

    epoch(0)  # warm-up
    best = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        epoch(samples * (r + 1))
        best = min(best, time.perf_counter() - t0)
    return best


def strategy_run(dm, proto: Protocol, mu: int, samples: int, repeats: int) -> tuple[float, int, dict]:
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    cost = CostModel.from_profile("p775", model_bytes(net))
    sim = Simulator(proto, cost, Topology(), mu, samples // mu, 0)
    sched = Schedule.collect(sim.run())
    data = torch.utils.data.DataLoader(
        UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy(), mu, proto.learners, 0), batch_size=None)

    def fit() -> float:
        module = ClassifierModule(net, OPT)
        trainer = pl.Trainer(strategy=ParameterServerStrategy(sched), accelerator="cpu", max_epochs=1, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             limit_val_batches=0)
        t0 = time.perf_counter()
        trainer.fit(module, train_dataloaders=data)
        return time.perf_counter() - t0

    fit()  # warm-up: every group shape of this schedule
    return min(fit() for _ in range(repeats)), sched.num_gradients * mu, sim.stats.as_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="best of this many timed passes per case")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dm = build_datamodule("cifar10_subset", DATA, seed=0)
    dm.setup("fit")
    lam, mu = 30, 4
    samples = int(args.epochs * dm.num_train) // (mu * lam) * (mu * lam)
    print(f"threads={torch.get_num_threads()} samples={samples} best of {args.repeats}")
    print(f"{'case':<28}{'samples/s':>12}{'baseline':>10}{'ratio':>8}{'⟨σ⟩':>8}")
    for proto in (Protocol("softsync", lam, n=1), Protocol("softsync", lam, n=lam), Protocol("hardsync", lam)):
        # the baseline is re-measured right before each case: the machine is shared and noisy
        base = samples / plain_loop(dm, samples, mu * lam, args.repeats)
        secs, n, st = strategy_run(dm, proto, mu, samples, args.repeats)
        print(f"{proto.label + ' λ=30 μ=4':<28}{n / secs:>12,.0f}{base:>10,.0f}{n / secs / base:>8.2f}"
              f"{st['staleness_mean']:>8.2f}")


if __name__ == "__main__":
    main()
