"""The per-sample loss of a run (``model.loss``): what learners differentiate and what the test loss averages.

The PS strategy weights and sums per-sample losses (Zhang Eq 2: w_l/c per gradient, 1/μ per sample), so a loss
here maps a batch's outputs and targets to one loss per sample, shape [B]: ``cross_entropy`` (class labels; the
default for integer y), ``mse``, ``l1``, ``smooth_l1`` (float targets; ``mse`` the default for float y), a dotted
path to a function ``(outputs, y) -> losses`` or a node with ``_target_`` building such a callable (e.g.
``{_target_: torch.nn.HuberLoss, reduction: none}``). For float targets every loss gets the outputs in the
targets' shape where they hold one value per target ([B, 1] outputs for [B] targets, not broadcast to [B, B]).
A user's loss returning more than one value per sample ([B, k]) is averaged over the rest; one returning a scalar
is refused (it cannot be weighted per sample). A task
with classes (integer labels) also reports the test error (argmax of the outputs); a regression task does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from psbench.errors import ConfigError, require
from psbench.models.options import LOSS, LOSSES


def cross_entropy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y, reduction="none")


def _per_sample(per: torch.Tensor) -> torch.Tensor:
    """Per-sample values [B]: a loss of more than one value per sample ([B, k, …]) averaged over the rest."""
    return per if per.dim() <= 1 else per.flatten(1).mean(1)


def _aligned(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The outputs in the targets' shape where they hold one value per target: [B, 1] outputs for [B] targets
    (one regression target), which torch's losses would otherwise broadcast to [B, B]."""
    return out if out.shape == y.shape or out.numel() != y.numel() else out.reshape(y.shape)


def mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _per_sample(F.mse_loss(_aligned(out, y), y, reduction="none"))


def l1(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _per_sample(F.l1_loss(_aligned(out, y), y, reduction="none"))


def smooth_l1(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _per_sample(F.smooth_l1_loss(_aligned(out, y), y, reduction="none"))


_BUILTIN: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "cross_entropy": cross_entropy,
    "mse": mse,
    "l1": l1,
    "smooth_l1": smooth_l1,
}
assert tuple(_BUILTIN) == LOSSES


@dataclass(frozen=True)
class SampleLoss:
    """A run's loss: ``self(out, y)`` per sample [B]; ``classes``: the task has classes (a test error)."""

    name: str  # the config's value: a name of LOSSES or the user's target
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    classes: bool

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.name == "cross_entropy":
            return self.fn(out, y)
        per = self.fn(out if self.classes else _aligned(out, y), y)
        return _per_sample(per) if isinstance(per, torch.Tensor) else per

    def mean(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The batch's mean loss (cross-entropy: torch's own mean, as psbench has always logged it)."""
        return F.cross_entropy(out, y) if self.name == "cross_entropy" else self(out, y).mean()

    def total(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The batch's summed loss (cross-entropy: torch's own sum, as :func:`psbench.models.evaluate.evaluate`)."""
        return F.cross_entropy(out, y, reduction="sum") if self.name == "cross_entropy" else self(out, y).sum()


#: the loss of every run before ``model.loss`` existed, and of a classifier that does not set it
CROSS_ENTROPY = SampleLoss("cross_entropy", cross_entropy, True)


def build_loss(value: Any, task: str) -> SampleLoss:
    """The :class:`SampleLoss` of ``model.loss`` = ``value`` for a ``task`` (classification | regression)."""
    require(LOSS.ok(value), "model.loss", value, LOSS.allowed)
    classes = task == "classification"
    if value is None:
        value = "cross_entropy" if classes else "mse"
    if isinstance(value, str) and value in _BUILTIN:
        if value == "cross_entropy":
            require(
                classes,
                "model.loss",
                value,
                "a loss for float targets (regression): " + ", ".join(LOSSES[1:]) + " or your own",
            )
            return CROSS_ENTROPY
        require(
            not classes,
            "model.loss",
            value,
            "a loss for integer class labels: cross_entropy or your own "
            "(mse, l1 and smooth_l1 compare float targets; make y float for regression)",
        )
        return SampleLoss(value, _BUILTIN[value], False)
    from psbench import target

    if isinstance(value, Mapping):
        fn = target.build("model.loss._target_", value, what="a callable (outputs, y) -> per-sample losses")
        name = str(value["_target_"])
        key, shown = "model.loss._target_", name
    else:
        if "." not in value:
            raise ConfigError("model.loss", value, LOSS.allowed)
        fn, name, key, shown = target.locate("model.loss", value), value, "model.loss", value
    require(callable(fn), key, shown, f"a callable (outputs, y) -> per-sample losses (it is a {type(fn).__name__})")
    return SampleLoss(name, fn, classes)


@torch.no_grad()
def check_fit(
    net: torch.nn.Module, loss: SampleLoss, x: torch.Tensor, y: torch.Tensor, output_size: int, key: str, shown: Any
) -> None:
    """The model's outputs on one batch fit the targets and the loss gives one value per sample; else ConfigError
    naming ``key`` (the model's ``_target_``, or ``model.loss``). Run in eval mode (no dropout, no RNG drawn)."""
    was = net.training
    net.eval()
    try:
        try:
            out = net(x)
        except Exception as exc:
            raise ConfigError(
                key,
                shown,
                f"a model that takes the data's inputs: a batch x {list(x.shape)} raised "
                f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            ) from exc
    finally:
        net.train(was)
    if not isinstance(out, torch.Tensor):
        raise ConfigError(key, shown, f"a model whose forward returns a tensor (it returned {type(out).__name__})")
    b = len(y)
    if loss.classes:  # the test error is the argmax of [B, classes] scores, whatever the loss
        fits = out.dim() == 2 and out.shape[0] == b and (out.shape[1] >= output_size or loss.name not in _BUILTIN)
        require(
            fits,
            key,
            shown,
            f"a model whose outputs fit the labels: [{b}, {output_size}] class scores for a "
            f"batch x {list(x.shape)} of {output_size} classes (it returned {list(out.shape)})",
        )
    elif loss.name in _BUILTIN:
        want = [b, *y.shape[1:]]
        require(
            out.dim() >= 1 and out.shape[0] == b and out[0].numel() == y[0].numel(),
            key,
            shown,
            f"a model whose outputs fit the targets: {want} (or [{b}, 1] for one target) for a batch x "
            f"{list(x.shape)} (it returned {list(out.shape)})",
        )
    try:
        per = loss(out, y)
    except Exception as exc:
        raise ConfigError(
            "model.loss",
            loss.name,
            f"a loss that takes the model's outputs {list(out.shape)} and the "
            f"targets {list(y.shape)} {y.dtype}: it raised {type(exc).__name__}: "
            f"{' '.join(str(exc).split())}",
        ) from exc
    require(
        isinstance(per, torch.Tensor) and per.dim() == 1 and len(per) == b,
        "model.loss",
        loss.name,
        f"a loss returning one value per sample [{b}] (it returned "
        f"{list(per.shape) if isinstance(per, torch.Tensor) else type(per).__name__}: "
        "set reduction='none')",
    )
    require(
        per.is_floating_point(),
        "model.loss",
        loss.name,
        f"a loss returning floating-point per-sample losses (it returned {per.dtype}: an integer loss has no gradient)",
    )
    check_trains(net, loss, x, y, key, shown)


def check_trains(
    net: torch.nn.Module, loss: SampleLoss, x: torch.Tensor, y: torch.Tensor, key: str, shown: Any
) -> None:
    """Training would change the model: it has trainable parameters, and the loss on one batch has a gradient that
    reaches them (one backward pass, in eval mode, no RNG drawn); else ConfigError naming ``key`` (the model's
    ``_target_``) or ``model.loss``. A frozen model, a model without parameters or a loss detached from the outputs
    (``.item()``, ``.detach()``, numpy) used to pass the one-batch check and then train nothing or fail mid-run."""
    params = [p for p in net.parameters() if p.requires_grad]
    if not params:
        total = sum(1 for _ in net.parameters())
        raise ConfigError(
            key,
            shown,
            "a model with trainable parameters (it has "
            + (f"{total} parameter tensors, every one with requires_grad=False: frozen" if total else "none")
            + "; training it would change nothing)",
        )
    was = net.training
    net.eval()
    try:
        with torch.enable_grad():
            try:
                out = net(x)
                per = loss(out, y)
            except Exception:  # check_fit ran the same calls without gradients and named what failed
                return
            if not out.requires_grad:
                raise ConfigError(
                    key,
                    shown,
                    "a model whose outputs depend on its trainable parameters (its forward returns a tensor without a "
                    "gradient: .detach(), numpy or torch.no_grad() in it)",
                )
            if not per.requires_grad:
                raise ConfigError(
                    "model.loss",
                    loss.name,
                    "a loss computed from the model's outputs with torch operations (its result does not depend on "
                    "them: .item(), .detach(), numpy or a constant in the loss leaves no gradient)",
                )
            grads = torch.autograd.grad(per.sum(), params, allow_unused=True)
    finally:
        net.train(was)
    if all(g is None for g in grads):
        raise ConfigError(
            key,
            shown,
            "a model whose outputs depend on its trainable parameters (the loss's gradient reaches none of them)",
        )
