"""Models of the papers: ``build_model(name, input_shape, num_classes, **kwargs)``.

``mlp`` (ReLU MLP), ``lenet`` (Caffe LeNet, TernGrad §4.1), ``cifar_cnn`` (Caffe
``cifar10_full``, Rudra §4.2), ``cifarnet`` (TF CIFAR-10 tutorial net, TernGrad §4.1),
``alexnet`` (Caffe AlexNet, Rudra §4.2 / TernGrad §4.2), ``googlenet`` (Inception v1 without
auxiliary classifiers, TernGrad §4.2), ``vgg_a`` (VGG-11, TernGrad §5), ``ssp_mlp`` (SSP-DNN §5's
sigmoid MLPs), ``agn_net`` (AGN §4's MNIST convnet). None uses dropout or in-place ops, and without
``batchnorm`` none has BatchNorm, so all work with ``torch.func.functional_call`` + ``vmap`` over
stacked parameter sets; their initialisation is a deterministic function of ``torch.manual_seed``.
Large ones build on the ``meta`` device (``with torch.device("meta"): build_model(...)``) for
parameter counts without allocating memory. A config node — built-in or a user's ``_target_`` — is built by
:func:`psbench.models.net.build_net`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from psbench.errors import ConfigError
from psbench.lazy import lazy
from psbench.models.options import MODEL_KEYS, MODEL_NAMES, SSP_VARIANTS
from psbench.schema import check_keys

if TYPE_CHECKING:
    from torch import nn

#: every class, imported on first use (torch): the torch-free :mod:`psbench.models.options` imports without it
_CLASSES = {
    "MLP": "psbench.models.mlp",
    "SSPMLP": "psbench.models.ssp_mlp",
    "LeNet": "psbench.models.lenet",
    "CifarCNN": "psbench.models.cifar_cnn",
    "CifarNet": "psbench.models.cifarnet",
    "AlexNet": "psbench.models.alexnet",
    "GoogLeNet": "psbench.models.googlenet",
    "VGGA": "psbench.models.vgg",
    "AGNNet": "psbench.models.agn_net",
    "WithinChannelLRN": "psbench.models.layers",
}
__getattr__ = lazy(__name__, _CLASSES)
#: the convolutional models and their classes (input (C, H, W)); ``mlp`` and ``ssp_mlp`` flatten any shape.
_CONV: dict[str, str] = {
    "lenet": "LeNet",
    "cifar_cnn": "CifarCNN",
    "cifarnet": "CifarNet",
    "alexnet": "AlexNet",
    "googlenet": "GoogLeNet",
    "vgg_a": "VGGA",
    "agn_net": "AGNNet",
}


def uses_batchnorm(name: str, options: Mapping[str, Any]) -> bool:
    """Whether ``build_model(name, ..., **options)`` has BatchNorm layers (``batchnorm: true``)."""
    return "batchnorm" in MODEL_KEYS.get(name, {}) and options.get("batchnorm") is True


def _check_options(name: str, kwargs: dict[str, Any]) -> None:
    """One ConfigError naming the key for an unknown option or a bad value (:data:`MODEL_KEYS`)."""
    check_keys("model", kwargs, MODEL_KEYS[name], f"model={name}", partial=True)


def build_model(name: str, input_shape: Sequence[int], num_classes: int, **kwargs: Any) -> nn.Module:
    """Build model ``name`` for inputs ``input_shape`` (C, H, W; any shape for ``mlp``/``ssp_mlp``) with
    ``num_classes`` outputs (the classes, or a regression's k targets).

    Options: ``mlp``: ``hidden`` (default (128,)); ``lenet``: ``init`` ("torch" default or
    "caffe" fillers); ``cifar_cnn``: ``lrn`` (default False), ``init``, ``multipliers`` (None or
    "caffe": the prototxt's lr_mult/decay_mult as ``net.param_mult``); ``cifarnet``: ``crop``
    (default 24, None = whole input); ``alexnet``: ``batchnorm`` (False), ``groups`` (2);
    ``googlenet``, ``vgg_a``: ``batchnorm`` (False); ``ssp_mlp``: ``variant`` ("timit" or
    "imagenet63k"), ``hidden`` (None = the variant's), ``activation`` (None = "sigmoid").
    """
    if name not in MODEL_NAMES:
        raise ConfigError("model.name", name, "one of " + ", ".join(MODEL_NAMES))
    shape = tuple(int(s) for s in input_shape)
    if not shape or min(shape) < 1:
        raise ConfigError("model.input_shape", list(shape), "positive dimensions")
    if int(num_classes) < 1:
        raise ConfigError("model.num_classes", num_classes, "an integer >= 1 (the classes, or a regression's targets)")
    _check_options(name, kwargs)
    if name in ("mlp", "ssp_mlp"):
        default = (128,) if name == "mlp" else SSP_VARIANTS[kwargs.pop("variant", "timit")]
        given = kwargs.pop("hidden", None)
        hidden = tuple(int(h) for h in (default if given is None else given))
        if any(h < 1 for h in hidden):
            raise ConfigError("model.hidden", list(hidden), "positive layer sizes")
        if name == "mlp":
            return __getattr__("MLP")(shape, int(num_classes), hidden)
        return __getattr__("SSPMLP")(shape, int(num_classes), hidden, kwargs.get("activation") or "sigmoid")
    if len(shape) != 3:
        raise ConfigError("model.input_shape", list(shape), f"(C, H, W) for {name}")
    try:
        return __getattr__(_CONV[name])(shape, int(num_classes), **kwargs)
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
    "SSPMLP",
    "VGGA",
    "AGNNet",
    "AlexNet",
    "CifarCNN",
    "CifarNet",
    "GoogLeNet",
    "LeNet",
    "WithinChannelLRN",
    "build_model",
    "count_parameters",
    "model_bytes",
    "uses_batchnorm",
]
