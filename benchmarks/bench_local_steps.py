"""Simulated-training throughput of AGN (vmapped local steps) against a plain single-learner loop, in one run.

    python benchmarks/bench_local_steps.py [--epochs 2] [--threads 1] [--repeats 2]

Case: MNIST, MLP 784-128-10, ``agn`` with n = 20 learners, H = 10 local Adam steps of
μ = 128 per commit, executed by :class:`ParameterServerStrategy` + :class:`LocalLearners` inside a
Lightning Trainer — against a plain PyTorch loop of one learner with batch μ = 128 (Adam) over
the same number of samples. Both are warmed up first. Prints samples/s and the ratio (target
≥ 0.5), and how many windows each vmapped flush computed; also ``--loop`` compares flushes of one
window (no batching over learners) for reference.
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
from psbench.models import build_model, model_bytes
from psbench.optimizer.build import server_optimizer
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, SampleStream
from psbench.strategy.local_steps import LocalLearners, WindowBatches

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
DATA = Path(os.environ.get("PSBENCH_DATA") or default_data_dir("."))  # where psbench itself looks
OPT = {"name": "adam", "lr": 0.001}


def plain_loop(dm, samples: int, mu: int, repeats: int) -> float:
    """Best seconds of ``repeats`` passes of one Adam learner with batch μ over ``samples`` samples."""
    torch.manual_seed(0)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    opt = torch.optim.Adam(net.parameters(), lr=OPT["lr"])
    stream = SampleStream(len(dm.x_train), 0)

    def epoch(offset: int) -> None:
        for p in range(offset, offset + samples - mu + 1, mu):
            idx = stream.indices(p, mu)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(dm.x_train[idx]), dm.y_train[idx]).backward()
            opt.step()

    epoch(0)
    best = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        epoch(samples * (r + 1))
        best = min(best, time.perf_counter() - t0)
    return best


class _OneWindow(LocalLearners):
    def _capture(self, i, params, net, loss, lr):
        super()._capture(i, params, net, loss, lr)
        if self.pending:
            self._flush(net, loss, lr)


def strategy_run(dm, proto: Protocol, mu: int, samples: int, repeats: int, cls=LocalLearners):
    torch.manual_seed(0)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    cost = CostModel.from_profile("laptop", model_bytes(net))
    sim = Simulator(proto, cost, Topology(), mu, samples // (mu * proto.local_steps), 0)
    sched = Schedule.collect(sim.run())
    data = torch.utils.data.DataLoader(WindowBatches(sched, mu * proto.local_steps), batch_size=None)

    def fit() -> tuple[float, LocalLearners]:
        local = cls(proto, sched, dm.x_train, dm.y_train, mu, 0, OPT)
        module = ClassifierModule(net, server_optimizer(OPT))
        trainer = pl.Trainer(
            strategy=ParameterServerStrategy(sched, local=local),
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
        return time.perf_counter() - t0, local

    fit()  # warm-up
    runs = [fit() for _ in range(repeats)]
    secs, local = min(runs, key=lambda r: r[0])
    return secs, sched.num_gradients * mu * proto.local_steps, local, sim.stats.as_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2, help="best of this many timed passes per case")
    ap.add_argument("--loop", action="store_true", help="also time one window per flush (no learner batching)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dm = build_datamodule("mnist", DATA, seed=0)
    dm.setup("fit")
    n, H, mu = 20, 10, 128
    samples = int(args.epochs * dm.num_train) // (mu * H) * (mu * H)
    print(f"threads={torch.get_num_threads()} samples={samples} best of {args.repeats}")
    print(f"{'case':<34}{'samples/s':>12}{'baseline':>10}{'ratio':>8}{'windows/flush':>15}{'⟨σ⟩':>8}")
    cases = [("agn n=20 H=10 μ=128 (vmap)", LocalLearners)] + (
        [("agn ... one window per flush", _OneWindow)] if args.loop else []
    )
    for label, cls in cases:
        base = samples / plain_loop(dm, samples, mu, args.repeats)  # re-measured before each case
        secs, done, local, st = strategy_run(dm, Protocol("agn", n, local_steps=H), mu, samples, args.repeats, cls)
        print(
            f"{label:<34}{done / secs:>12,.0f}{base:>10,.0f}{done / secs / base:>8.2f}"
            f"{local.windows_computed / local.flushes:>15.1f}{st['staleness_mean']:>8.2f}"
        )


if __name__ == "__main__":
    main()
