"""The ``model`` config group: one option per network of :mod:`psbench.models`, with its keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.schema import Group, Keys, boolean, integer, one_of, sequence

#: SSP-DNN §5's variants of ``ssp_mlp`` → hidden layer sizes
SSP_VARIANTS: dict[str, tuple[int, ...]] = {
    "timit": (2048,) * 6,
    "imagenet63k": (5000, 3000, 2000),
}
SSP_ACTIVATIONS = ("sigmoid", "tanh", "relu")
INITS = ("torch", "caffe")

_WIDTHS = sequence(integer(1), what="a list of hidden layer widths, each an integer >= 1")
_INIT = one_of(*INITS).optional()
_BATCHNORM = boolean()
MODEL_KEYS: dict[str, Keys] = {
    "mlp": {"hidden": _WIDTHS},
    "lenet": {"init": _INIT},
    "cifar_cnn": {"lrn": boolean(), "init": _INIT,
                  "multipliers": one_of("caffe", null="every parameter at the base lr and decay").optional()},
    "cifarnet": {"crop": integer(1, null="the whole input", words="(TernGrad/TF: 24)")},
    "alexnet": {"batchnorm": _BATCHNORM, "groups": one_of(1, 2)},
    "googlenet": {"batchnorm": _BATCHNORM},
    "vgg_a": {"batchnorm": _BATCHNORM},
    "ssp_mlp": {
        "variant": one_of(*SSP_VARIANTS),
        "hidden": sequence(integer(1), null="the variant's widths", what="a list of widths >= 1"),
        "activation": one_of(*SSP_ACTIVATIONS, null="sigmoid"),
    },
    "agn_net": {},
}
MODEL_NAMES = tuple(MODEL_KEYS)


def _check(cfg: Mapping[str, Any]) -> None:
    """``batchnorm`` only for schedule-only runs (the gradient path cannot train BN)."""
    bn = cfg["model"].get("batchnorm", False)
    require(not bn or cfg["schedule_only"], "model.batchnorm", bn,
            "false unless schedule_only=true (learners' gradients are vmapped over stacked weight snapshots, "
            "where BatchNorm cannot update its running statistics)")


MODEL = Group(MODEL_KEYS, check=_check)
