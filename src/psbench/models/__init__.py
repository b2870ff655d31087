"""Models of the papers: ``build_model(name, input_shape, num_classes, **kwargs)``.

``mlp`` (ReLU MLP), ``lenet`` (Caffe LeNet, TernGrad §4.1), ``cifar_cnn`` (Caffe
``cifar10_full``, Rudra §4.2). None uses BatchNorm, dropout or in-place ops, so all work with
``torch.func.functional_call`` + ``vmap`` over stacked parameter sets, and their
initialisation is a deterministic function of ``torch.manual_seed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from psbench.errors import ConfigError
from psbench.models.cifar_cnn import CifarCNN
from psbench.models.layers import WithinChannelLRN
from psbench.models.lenet import LeNet
from psbench.models.mlp import MLP

MODEL_NAMES = ("mlp", "lenet", "cifar_cnn")
_OPTIONS: dict[str, tuple[str, ...]] = {
    "mlp": ("hidden",),
    "lenet": ("init",),
    "cifar_cnn": ("lrn", "init"),
}
_INITS = ("torch", "caffe")


def build_model(name: str, input_shape: Sequence[int], num_classes: int, **kwargs: Any) -> nn.Module:
    """Build model ``name`` for inputs ``input_shape`` (C, H, W or any for ``mlp``).

    Options: ``mlp``: ``hidden`` (default (128,)); ``lenet``: ``init`` ("torch" default or
    "caffe" fillers); ``cifar_cnn``: ``lrn`` (default False), ``init``.
    """
    if name not in MODEL_NAMES:
        raise ConfigError("model.name", name, "one of " + ", ".join(MODEL_NAMES))
    shape = tuple(int(s) for s in input_shape)
    if not shape or min(shape) < 1:
        raise ConfigError("model.input_shape", list(shape), "positive dimensions")
    if int(num_classes) < 2:
        raise ConfigError("model.num_classes", num_classes, "an integer >= 2")
    for key in kwargs:
        if key not in _OPTIONS[name]:
            raise ConfigError(
                f"model.{key}", kwargs[key], f"no such option for {name}; options: {', '.join(_OPTIONS[name])}"
            )
    if kwargs.get("init", "torch") not in _INITS:
        raise ConfigError("model.init", kwargs["init"], "one of " + ", ".join(_INITS))
    if name == "mlp":
        hidden = tuple(int(h) for h in kwargs.get("hidden", (128,)))
        if any(h < 1 for h in hidden):
            raise ConfigError("model.hidden", list(hidden), "positive layer sizes")
        return MLP(shape, int(num_classes), hidden)
    if len(shape) != 3:
        raise ConfigError("model.input_shape", list(shape), f"(C, H, W) for {name}")
    try:
        if name == "lenet":
            return LeNet(shape, int(num_classes), **kwargs)
        return CifarCNN(shape, int(num_classes), **kwargs)
    except RuntimeError as exc:  # spatial size too small for the conv / pool stack
        raise ConfigError(
            "model.input_shape", list(shape), f"an image large enough for {name} ({exc})".replace("\n", " ")
        ) from None


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters."""
    return sum(p.numel() for p in model.parameters())


def model_bytes(model: nn.Module) -> int:
    """Size of all parameters in fp32 bytes (4 per scalar), the PS message size."""
    return 4 * count_parameters(model)


__all__ = [
    "MLP",
    "MODEL_NAMES",
    "CifarCNN",
    "LeNet",
    "WithinChannelLRN",
    "build_model",
    "count_parameters",
    "model_bytes",
]
