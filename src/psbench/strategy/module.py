"""An ordinary classification (or regression) LightningModule; the PS strategy supplies its gradients.

The strategy needs only ``net`` (an ``nn.Module`` mapping inputs to outputs) and ``loss``
(per-sample losses: cross-entropy, or the run's ``model.loss``, :class:`psbench.models.loss.SampleLoss`).
``training_step`` is the plain large-batch step, used when the module is
trained without :class:`~psbench.strategy.ParameterServerStrategy` (the baselines of the
benchmarks and the Rudra Eq 7 equivalence test). The test error is logged where the loss's task has classes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from psbench.models.loss import CROSS_ENTROPY
from psbench.optimizer.build import configure, param_groups

#: normalisation layers after which channels_last is no longer a safe bet on the CPU (benchmarks/bench_channels_last.py:
#: torchvision's ResNet-18 with BatchNorm 1.18–1.25× slower in channels_last, with GroupNorm 1.12–1.16×)
#: (LocalResponseNorm is not one: psbench's CIFAR CNN with LRN runs 0.52–0.61× as long in channels_last)
NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.GroupNorm, torch.nn.LayerNorm)


def channels_last_pays(net: torch.nn.Module) -> bool:
    """A 2-d conv net without normalisation layers (:data:`NORMS`): on the CPU its samples in channels_last (NHWC)
    run 1.1–2× faster than NCHW (the CPU's NCHW max pooling is ~10–30× slower; psbench's CIFAR CNN, LeNet,
    CifarNet: ``benchmarks/bench_channels_last.py``). With a normalisation layer the plain layout: torchvision's
    ResNet-18 ran 1.1–1.25× slower in channels_last. A rule, not a measurement: the layout changes the float
    results, and a run's weights must not depend on the machine's load."""
    mods = list(net.modules())
    return any(isinstance(m, torch.nn.Conv2d) for m in mods) and not any(isinstance(m, NORMS) for m in mods)


def prefers_channels_last(net: torch.nn.Module, x) -> bool:
    """Samples ``x`` in channels_last for ``net``: 4-d samples on the CPU of a net :func:`channels_last_pays` for;
    the outputs agree with NCHW's to float tolerance."""
    return x.device.type == "cpu" and len(x.shape) == 4 and channels_last_pays(net)


class ClassifierModule(pl.LightningModule):
    def __init__(
        self, net: torch.nn.Module, optimizer: Mapping | None = None, updates_per_epoch: float = 1.0, loss=None
    ) -> None:
        super().__init__()
        self.net = net
        self.objective = CROSS_ENTROPY if loss is None else loss
        if loss is not None:  # the instance's loss (the class's is cross-entropy)
            self.loss = loss  # type: ignore[method-assign]  # shadows the class's cross-entropy
        self.optimizer_cfg = dict(optimizer or {"name": "sgd", "lr": 0.1})
        self.updates_per_epoch = updates_per_epoch
        #: (updates done, test error, test loss, samples) of the last evaluation, summed as
        #: :func:`psbench.models.evaluate.evaluate` sums them (the run's final evaluation reuses it when no
        #: update came after it; the test error None without classes); None before the first
        self.last_evaluation: tuple[int, float | None, float, int] | None = None
        self._sums = [0, 0.0, 0]  # wrong, loss sum, samples of the evaluation under way

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    @staticmethod
    def loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample cross-entropy (the strategy weights and sums it); a module given a ``loss`` uses that."""
        return F.cross_entropy(logits, y, reduction="none")

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss(self(x), y).mean()
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        if prefers_channels_last(self.net, x):
            x = x.contiguous(memory_format=torch.channels_last)
        logits = self(x)
        loss, classes = self.objective, self.objective.classes
        self.log("test_loss", loss.mean(logits, y), on_epoch=True, batch_size=len(y), prog_bar=not classes)
        if classes:
            miss = logits.argmax(1) != y
            self.log("test_error", miss.float().mean(), on_epoch=True, batch_size=len(y), prog_bar=True)
        if logits.device.type == "cpu":  # only a CPU run reuses them (no device sync per batch elsewhere)
            self._sums[0] += int(miss.sum()) if classes else 0
            self._sums[1] += float(loss.total(logits, y))
            self._sums[2] += len(y)

    def on_validation_epoch_start(self) -> None:
        self._sums = [0, 0.0, 0]

    def on_validation_epoch_end(self) -> None:
        wrong, loss, n = self._sums
        if n:
            self.last_evaluation = (
                int(getattr(self.trainer.strategy, "updates_done", -1)),
                wrong / n if self.objective.classes else None,
                loss / n,
                int(n),
            )

    def configure_optimizers(self):
        opt, sched = configure(param_groups(self.net), self.optimizer_cfg, self.updates_per_epoch)
        if sched is None:
            return opt
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
