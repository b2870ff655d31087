"""The ``optimizer`` config group: the PS update rule (torch-free; :mod:`psbench.optimizer.build` builds it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.schema import Group, Keys, boolean, number, sequence

_COMMON: Keys = {
    "lr": number(0, lo_open=True, float32=True),  # α0
    "weight_decay": number(0, float32=True),
    "milestones": sequence(
        number(0, lo_open=True), increasing=True, what="an increasing list of epochs > 0 (lr × gamma after each)"
    ),
    "gamma": number(0, 1, lo_open=True, float32=True),
    "poly_power": number(0, lo_open=True, null="no polynomial decay"),  # TernGrad §4
    "poly_epochs": number(0, lo_open=True, unit="epochs until the polynomial decay reaches zero"),
}
OPTIMIZER_KEYS: dict[str, Keys] = {
    "sgd": {**_COMMON, "momentum": number(0, 1, hi_open=True, float32=True), "nesterov": boolean().optional()},
    "adagrad": _COMMON,
    "adam": {
        **_COMMON,
        "betas": sequence(
            number(0, 1, hi_open=True, float32=True),
            length=2,
            what="[beta1, beta2], each a number in [0, 1) that float32 keeps",
        ),
    },
}
OPTIMIZERS = tuple(OPTIMIZER_KEYS)


def _check_optimizer(cfg: Mapping[str, Any]) -> None:
    o = cfg["optimizer"]
    if o.get("nesterov"):
        require(
            o["momentum"] > 0,
            "optimizer.nesterov",
            True,
            f"false unless optimizer.momentum > 0 (Nesterov momentum needs a momentum; "
            f"optimizer.momentum={o['momentum']})",
        )


OPTIMIZER = Group(OPTIMIZER_KEYS, check=_check_optimizer)
