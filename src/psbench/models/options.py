"""The ``model`` config group: one option per network of :mod:`psbench.models`, with its keys; a node with
``_target_`` (a user's network, built by Hydra's ``instantiate``: :mod:`psbench.models.net`) takes any keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.schema import Group, Key, Keys, boolean, integer, one_of, sequence, text

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
    "cifar_cnn": {
        "lrn": boolean(),
        "init": _INIT,
        "multipliers": one_of("caffe", null="every parameter at the base lr and decay").optional(),
    },
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
#: the per-sample losses psbench has (:mod:`psbench.models.loss`); a classification task's default is the first,
#: a regression task's (float targets) ``mse``
LOSSES = ("cross_entropy", "mse", "l1", "smooth_l1")


#: ``model.loss``: one of :data:`LOSSES`, a dotted path to a function (outputs, y) -> per-sample losses, or a node
#: with ``_target_`` that builds such a callable (``torch.nn.HuberLoss`` with ``reduction: none``)
def _loss_ok(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() != "") or (isinstance(v, Mapping) and "_target_" in v)


LOSS = Key(
    _loss_ok,
    "null (cross_entropy for class labels, mse for float targets), one of "
    + ", ".join(LOSSES)
    + ", a dotted path to a function (outputs, y) -> per-sample losses, or a node with _target_ building one",
    required=False,
)
#: psbench's own keys of a ``_target_`` model node (the others are the target's arguments)
TARGET_KEYS: Keys = {"name": text(what="a short name of the model (run names, tags)").optional(), "loss": LOSS}


def batchnorm_refusal(engine: str, protocol: Mapping[str, Any]) -> str | None:
    """Why a network with BatchNorm cannot train under ``engine`` and the ``protocol`` node, or None where it can:
    the simulator's look-ahead keeps each learner's batch statistics and the PS's running statistics
    (:mod:`psbench.strategy.batchnorm`); the dist engine's learners and the local-step protocols' learner models
    (their nodes have ``local_steps``) would keep running statistics of their own, which no rule here folds into
    the PS's."""
    if engine == "dist":
        return "engine=sim (the dist engine's learners do not push their batch statistics)"
    if "local_steps" in protocol:
        name = protocol.get("name")
        return f"a protocol without local steps (protocol={name}: its learner models keep statistics of their own)"
    return None


def _check(cfg: Mapping[str, Any]) -> None:
    """``batchnorm`` where the gradient path keeps BatchNorm's statistics (:func:`batchnorm_refusal`) or for
    schedule-only runs; a ``_target_`` model's layers are checked once it is built
    (:func:`psbench.models.net.check_net`)."""
    if "_target_" in cfg["model"]:
        return
    bn = cfg["model"].get("batchnorm", False)
    why = batchnorm_refusal(cfg["engine"]["name"], cfg["protocol"]) if bn and not cfg["schedule_only"] else None
    require(why is None, "model.batchnorm", bn, f"false, or {why}")


MODEL = Group({name: {**keys, "loss": LOSS} for name, keys in MODEL_KEYS.items()}, check=_check, target=TARGET_KEYS)
