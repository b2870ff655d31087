"""The ``protocol`` config group, derived from the protocols' declarations (:data:`psbench.ps.protocols.PROTOCOLS`):
one option per protocol with its keys, and each protocol's rule across keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.ps.protocols import OPTIONAL, PROTOCOLS, Protocol
from psbench.schema import Group, get


def _check(cfg: Mapping[str, Any]) -> None:
    """The protocol's rule, with what it runs with: λ and the optimizer's α0."""
    rule = PROTOCOLS[cfg["protocol"]["name"]].rule
    if rule is not None:
        rule(cfg["protocol"], {"learners": cfg["learners"], "optimizer.lr": get(cfg, "optimizer.lr")})


PROTOCOL = Group({name: dict(d.keys) for name, d in PROTOCOLS.items()}, check=_check)
#: how a key's value becomes a :class:`Protocol` field (YAML may say 5 for ρ = 5.0)
_CAST = {"local_steps": int, "rho": float}


def _same(v: Any) -> Any:
    return v


def build_protocol(cfg: Mapping[str, Any]) -> Protocol:
    """The :class:`Protocol` of a config (its ``learners`` and ``protocol`` group)."""
    p = cfg["protocol"]
    values: dict[str, Any] = {
        k: (_CAST.get(k, _same)(p[k]) if p[k] is not None else unset) for k, unset in OPTIONAL.items() if k in p
    }
    return Protocol(p["name"], int(cfg["learners"]), **values)
