"""A BatchNorm network through the strategy against plain Lightning, in one run (issue 41: the BatchNorm path's
speed).

    python benchmarks/bench_batchnorm.py [--epochs 0.25] [--threads 1] [--repeats 3] [--width 16]
                                         [--accelerator cpu|gpu]

Case: torchvision's ResNet code (vendored in ``tests/thirdparty/tv_resnet.py``, ``resnet10_small``: BasicBlocks with
BatchNorm, ``width`` channels at the first stage) on ``cifar10_subset``, λ = 8, μ = 8, momentum SGD, a user's
LightningModule (mean cross-entropy), the laptop hardware profile, seed 0. Rows, each a ``Trainer.fit`` of the same
samples, the training loop timed (``on_train_start`` → ``on_train_end``), interleaved in rounds after a warm-up:

* plain Lightning, batch 64 (μλ: the anchor) and batch 8 (μ: one step per learner's mini-batch);
* ``ParameterServerStrategy.simulated``: hardsync (8 learners' gradients per update, each on its own mini-batch:
  BatchNorm's ghost batches, :mod:`psbench.strategy.batchnorm`) and async (one gradient per update, on its stale
  snapshot), the PS folding each gradient's batch statistics into its running statistics.

Printed: samples/s and the ratio to the batch-64 anchor of the same round (median of the rounds).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from statistics import median

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
from bench_lightning_api import TrainTime  # noqa: E402
from bench_training import DATA, OPT, paired, pin_malloc  # noqa: E402
from psbench import ParameterServerStrategy  # noqa: E402
from psbench.data import build_datamodule  # noqa: E402
from thirdparty.tv_resnet import resnet10_small  # noqa: E402

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
LAM, MU = 8, 8


class UserModule(pl.LightningModule):
    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=OPT["lr"], momentum=OPT["momentum"])


def run(dm, samples: int, width: int, batch: int, protocol: str | None, accelerator: str = "cpu"):
    """A timer of one fit: plain Lightning at ``batch`` (``protocol`` None), else the strategy at μ = ``batch``."""
    x, y = dm.x_train[:samples], dm.y_train[:samples]

    def fit() -> float:
        torch.manual_seed(0)
        net = resnet10_small(num_classes=dm.num_classes, width=width)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch, shuffle=True)
        timer = TrainTime()
        kw: dict = {"max_epochs": 1}
        if protocol is not None:
            kw = {
                "strategy": ParameterServerStrategy.simulated(protocol, learners=LAM, progress="none", seed=0),
                "max_steps": samples // (batch * (LAM if protocol == "hardsync" else 1)),
            }
        trainer = pl.Trainer(
            accelerator=accelerator,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=[timer],
            **kw,
        )
        trainer.fit(UserModule(net), train_dataloaders=data)
        return timer.seconds

    return fit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=float, default=0.25, help="of the subset's training samples, per fit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--width", type=int, default=16, help="the ResNet's first-stage channels")
    ap.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"], help="every row's Trainer's")
    args = ap.parse_args()
    if args.accelerator == "gpu" and not torch.cuda.is_available():
        raise SystemExit(f"bench_batchnorm: --accelerator gpu: no CUDA device here (torch {torch.__version__})")
    pinned = pin_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    dm = build_datamodule("cifar10_subset", DATA, seed=0)
    dm.setup("fit")
    samples = int(args.epochs * dm.num_train) // (MU * LAM) * (MU * LAM)
    rows = {
        f"plain Lightning, batch {MU * LAM} (anchor)": run(dm, samples, args.width, MU * LAM, None, args.accelerator),
        f"plain Lightning, batch {MU}": run(dm, samples, args.width, MU, None, args.accelerator),
        f"psbench hardsync λ={LAM} μ={MU}": run(dm, samples, args.width, MU, "hardsync", args.accelerator),
        f"psbench async λ={LAM} μ={MU}": run(dm, samples, args.width, MU, "async", args.accelerator),
    }
    print(
        f"resnet10_small(width={args.width}) with BatchNorm, cifar10_subset, {samples} samples per fit, "
        f"accelerator={args.accelerator}"
        + (f" ({torch.cuda.get_device_name()})" if args.accelerator == "gpu" else "")
        + ", "
        f"threads={torch.get_num_threads()} malloc={'pinned' if pinned else 'default'}; median of {args.repeats} "
        "rounds, rows interleaved; ratio: to the anchor of the same round",
        flush=True,
    )
    t = paired(rows, args.repeats)
    anchor = t[next(iter(rows))]
    print(f"{'':<36}{'samples/s':>10}{'ratio':>7}  rounds")
    for name, secs in t.items():
        ratios = [a / s for a, s in zip(anchor, secs, strict=True)]
        print(f"{name:<36}{samples / median(secs):>10,.0f}{median(ratios):>7.2f}  {[round(r, 2) for r in ratios]}")


if __name__ == "__main__":
    main()
