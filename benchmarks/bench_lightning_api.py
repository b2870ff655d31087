"""The generic path (a user's LightningModule through ``ParameterServerStrategy.simulated``) against the built-in
path (psbench's ClassifierModule on a prebuilt schedule), in one run.

    python benchmarks/bench_lightning_api.py [--epochs 1] [--threads 0] [--repeats 5] [--cases hardsync,async]
                                             [--malloc pinned|default]

Case: the CIFAR CNN (Rudra §4.2, ``psbench.models.build_model("cifar_cnn")``) on ``cifar10_subset``, λ = 30,
μ = 4, momentum SGD, p775 hardware, seed 0 — the same schedule for both paths (the same cost model, G and seed).

* built-in: ``benchmarks/bench_training.py``'s strategy run (the look-ahead's
  grouped per-sample-loss path, channels_last, K updates per Trainer step);
* generic: a user's LightningModule holding the same network, whose ``training_step`` returns
  ``F.cross_entropy(self(x), y)``, on a ``DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)``, trained by
  ``Trainer(strategy=ParameterServerStrategy.simulated(...), max_steps=U)``: each learner's gradient is that
  ``training_step`` under ``functional_call`` (hardsync's 30 learners as one concatenated call once the first
  update's check agrees; async: one call per gradient); ``+log``: the same module also calling
  ``self.log("train_loss", loss)`` in every ``training_step``, as most do.

Timed: the training loop (``on_train_start`` → ``on_train_end``, a callback in both Trainers) — the generic path's
schedule simulation and loss check at ``setup`` are not in it; ``fit`` also shows the whole ``trainer.fit`` call of
the generic path (simulation included) over the built-in's. The timers run interleaved in rounds after one
warm-up round, each ratio is taken within its round (built-in seconds / generic seconds: > 1 means the generic path
is faster) and the median of the rounds' ratios is printed (target ≥ 0.8). glibc's allocator thresholds are
pinned first, as in ``bench_training.py``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path
from statistics import median

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_training import DATA, LAM, MU, OPT, paired, pin_malloc
from psbench import ParameterServerStrategy
from psbench.cluster import CostModel, Topology
from psbench.data import build_datamodule
from psbench.lr import LRPolicy
from psbench.models import build_model, model_bytes
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, UpdateBatches
from psbench.strategy.chunks import UpdateChunks, auto_updates_per_step

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
CASES = {"hardsync": Protocol("hardsync", LAM), "async": Protocol("async", LAM)}


class UserModule(pl.LightningModule):
    """A user's module: the CIFAR CNN, mean cross-entropy, psbench's momentum SGD (``log``: ``self.log`` too)."""

    def __init__(self, net: torch.nn.Module, log: bool) -> None:
        super().__init__()
        self.net, self.log_loss = net, log

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        if self.log_loss:
            self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=OPT["lr"], momentum=OPT["momentum"])


class TrainTime(pl.Callback):
    def on_train_start(self, trainer, pl_module) -> None:
        self.t0 = time.perf_counter()

    def on_train_end(self, trainer, pl_module) -> None:
        self.seconds = time.perf_counter() - self.t0


def builtin_run(dm, proto: Protocol, samples: int):
    """(timer of the built-in fit's training loop, ⟨σ⟩): :func:`bench_training.strategy_run`'s fit, with a
    :class:`TrainTime` callback."""
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    cost = CostModel.from_profile("p775", model_bytes(net))
    sim = Simulator(proto, cost, Topology(), MU, samples // MU, 0)
    sched = Schedule.collect(sim.run())
    updates = UpdateBatches(sched, dm.x_train, dm.y_train, MU, LRPolicy(), MU, proto.learners, 0, with_samples=False)
    k = auto_updates_per_step(sched, MU)
    data = torch.utils.data.DataLoader(
        UpdateChunks(updates, 0, sched.num_updates, k, sched.num_updates), batch_size=None
    )

    def fit() -> float:
        timer = TrainTime()
        trainer = pl.Trainer(
            strategy=ParameterServerStrategy(sched),
            accelerator="cpu",
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=[timer],
        )
        trainer.fit(ClassifierModule(net, OPT), train_dataloaders=data)
        return timer.seconds

    return fit, sim.stats.as_dict()["staleness_mean"]


def generic_run(dm, proto: Protocol, samples: int, log: bool):
    """(timer of the generic fit's training loop, {"fits": whole trainer.fit seconds, "strategy": the last}) of a
    user's module."""
    torch.manual_seed(0)
    net = build_model("cifar_cnn", dm.input_shape, dm.num_classes)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(dm.x_train, dm.y_train), batch_size=MU, shuffle=True
    )
    steps = samples // (MU * proto.gradients_per_update)
    last: dict = {"fits": []}

    def fit() -> float:
        strategy = ParameterServerStrategy.simulated(
            protocol=proto.name, learners=proto.learners, hardware="p775", seed=0
        )
        timer = TrainTime()
        trainer = pl.Trainer(
            strategy=strategy,
            accelerator="cpu",
            max_steps=steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=[timer],
        )
        t0 = time.perf_counter()
        trainer.fit(UserModule(net, log), train_dataloaders=data)
        last["fits"].append(time.perf_counter() - t0)
        last["strategy"] = strategy
        return timer.seconds

    return fit, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per case (medians are reported)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--malloc", choices=("pinned", "default"), default="pinned")
    args = ap.parse_args()
    pinned = args.malloc == "pinned" and pin_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    dm = build_datamodule("cifar10_subset", DATA, seed=0)
    dm.setup("fit")
    samples = int(args.epochs * dm.num_train) // (MU * LAM) * (MU * LAM)
    print(
        f"threads={torch.get_num_threads()} samples={samples} malloc={'pinned' if pinned else 'default'}; median of "
        f"{args.repeats} rounds, each round built-in, generic and generic+log back to back; ratio = built-in s / "
        "generic s of the training loop, per round, then the median"
    )
    print(
        f"{'case':<22}{'built-in/s':>11}{'generic/s':>11}{'ratio':>7}{'+log/s':>9}{'ratio':>7}{'fit ratio':>10}"
        f"{'⟨σ⟩':>7}{'check':>28}"
    )
    for name in args.cases.split(","):
        proto = CASES[name]
        builtin, sigma = builtin_run(dm, proto, samples)
        generic, last = generic_run(dm, proto, samples, log=False)
        logged, _ = generic_run(dm, proto, samples, log=True)
        t = paired({"builtin": builtin, "generic": generic, "logged": logged}, args.repeats)
        whole = last["fits"][1:]  # not the warm-up round's
        ratio = median(b / g for b, g in zip(t["builtin"], t["generic"], strict=True))
        ratio_log = median(b / g for b, g in zip(t["builtin"], t["logged"], strict=True))
        ratio_fit = median(b / g for b, g in zip(t["builtin"], whole, strict=True))
        s = last["strategy"].summary
        assert s.updates_done == s.ps_updates and abs(s.staleness_mean - sigma) < 1e-12, "not the same schedule"
        check = last["strategy"].check
        note = f"concat={check['concat']['agree'] if check['concat'] else '-'} nhwc={check['channels_last']}"
        print(
            f"{proto.label + ' λ=30 μ=4':<22}{samples / median(t['builtin']):>11,.0f}"
            f"{samples / median(t['generic']):>11,.0f}{ratio:>7.2f}{samples / median(t['logged']):>9,.0f}"
            f"{ratio_log:>7.2f}{ratio_fit:>10.2f}{sigma:>7.2f}{note:>28}",
            flush=True,
        )
        rounds = [round(b / g, 2) for b, g in zip(t["builtin"], t["generic"], strict=True)]
        print(f"{'':<4}rounds: built-in/generic {rounds}", flush=True)


if __name__ == "__main__":
    main()
