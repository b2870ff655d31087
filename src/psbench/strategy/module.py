"""An ordinary classification LightningModule; the PS strategy supplies its gradients.

The strategy needs only ``net`` (an ``nn.Module`` mapping inputs to logits) and ``loss``
(per-sample losses). ``training_step`` is the plain large-batch step, used when the module is
trained without :class:`~psbench.strategy.ParameterServerStrategy` (the baselines of the
benchmarks and the Rudra Eq 7 equivalence test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from psbench.errors import require
from psbench.strategy.options import OPTIMIZERS


def build_optimizer(params, cfg: Mapping) -> torch.optim.Optimizer:
    """SGD with momentum, AdaGrad or Adam from an ``optimizer`` config group (lr = α0)."""
    name = cfg.get("name", "sgd")
    require(name in OPTIMIZERS, "optimizer.name", name, f"one of {list(OPTIMIZERS)}")
    lr, wd = float(cfg.get("lr", 0.1)), float(cfg.get("weight_decay", 0.0))
    require(lr > 0, "optimizer.lr", lr, "> 0")
    if name == "sgd":
        m = float(cfg.get("momentum", 0.0))
        require(0 <= m < 1, "optimizer.momentum", m, "in [0, 1)")
        return torch.optim.SGD(params, lr=lr, momentum=m, weight_decay=wd, nesterov=bool(cfg.get("nesterov", False)))
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=wd)
    return torch.optim.Adam(params, lr=lr, betas=tuple(cfg.get("betas", (0.9, 0.999))), weight_decay=wd)


def step_decay(milestones: Sequence[float], gamma: float, updates_per_epoch: float):
    """lr factor after ``step`` updates: γ^(number of milestone epochs passed) — Rudra §4.2 (÷10 at 120, 130)."""
    bounds = sorted(m * updates_per_epoch for m in milestones)
    return lambda step: gamma ** sum(step >= b for b in bounds)


def poly_decay(power: float, total_updates: float):
    """lr factor after ``step`` updates: (1 − step/T)^p, zero from T on — TernGrad §4 (p = 0.5, "to zero")."""
    return lambda step: max(0.0, 1.0 - step / total_updates) ** power


def lr_schedule(cfg: Mapping, updates_per_epoch: float):
    """The lr factor per update of an ``optimizer`` config, or None for a constant α0.

    ``milestones``/``gamma``: step decay (:func:`step_decay`); ``poly_power`` (null = off) with
    ``poly_epochs`` (where the lr reaches zero; the presets set it to ``epochs``): polynomial decay
    (:func:`poly_decay`). Both together multiply.
    """
    factors = []
    milestones = list(cfg.get("milestones") or [])
    if milestones:
        factors.append(step_decay(milestones, float(cfg.get("gamma", 0.1)), updates_per_epoch))
    power = cfg.get("poly_power")
    if power is not None:
        require(_positive(power), "optimizer.poly_power", power, "null (no polynomial decay) or a number > 0")
        epochs = cfg.get("poly_epochs")
        require(_positive(epochs), "optimizer.poly_epochs", epochs,
                "a number of epochs > 0 (where the polynomial decay reaches zero)")
        factors.append(poly_decay(float(power), float(epochs) * updates_per_epoch))
    if not factors:
        return None
    if len(factors) == 1:
        return factors[0]
    return lambda step: math.prod(f(step) for f in factors)


def _positive(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


class ClassifierModule(pl.LightningModule):
    def __init__(self, net: torch.nn.Module, optimizer: Mapping | None = None, updates_per_epoch: float = 1.0) -> None:
        super().__init__()
        self.net = net
        self.optimizer_cfg = dict(optimizer or {"name": "sgd", "lr": 0.1})
        self.updates_per_epoch = updates_per_epoch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    @staticmethod
    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample cross-entropy (the strategy weights and sums it)."""
        return F.cross_entropy(logits, y, reduction="none")

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss(self(x), y).mean()
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("test_loss", F.cross_entropy(logits, y), on_epoch=True, batch_size=len(y))
        self.log("test_error", (logits.argmax(1) != y).float().mean(), on_epoch=True, batch_size=len(y),
                 prog_bar=True)

    def configure_optimizers(self):
        cfg = self.optimizer_cfg
        opt = build_optimizer(self.net.parameters(), cfg)
        factor = lr_schedule(cfg, self.updates_per_epoch)
        if factor is None:
            return opt
        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
