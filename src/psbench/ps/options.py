"""The ``protocol`` config group: one option per protocol, with the keys each one reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.ps.local import LOCAL_PROTOCOLS, is_elastic
from psbench.ps.protocols import PROTOCOLS, Protocol
from psbench.schema import MAX_COUNT, Group, Keys, get, integer, is_num, number

_LOCAL_STEPS = integer(1, MAX_COUNT, what="an integer number of local steps H")


def _keys(name: str) -> Keys:
    if name == "softsync":
        return {"n": integer(1, words="with 1 <= n <= learners")}
    if name == "ssp":
        return {
            "staleness_bound": integer(
                0, MAX_COUNT, words=f"in [0, {MAX_COUNT}] (clocks; a bound past the run's updates is async)"
            )
        }
    if is_elastic(name):  # AEASGD: ρ is the elastic force
        return {"local_steps": _LOCAL_STEPS, "rho": number(0, lo_open=True, float32=True)}
    if name in LOCAL_PROTOCOLS:
        return {"local_steps": _LOCAL_STEPS}
    return {}


def _check(cfg: Mapping[str, Any]) -> None:
    learners, p = cfg["learners"], cfg["protocol"]
    if p["name"] == "softsync":
        require(p["n"] <= learners, "protocol.n", p["n"], f"an integer with 1 <= n <= learners (λ={learners})")
    if is_elastic(p["name"]):  # elastic moves ρη(θ_l − θ̃) with ρη in (0, 1]: at most all the way to the center
        lr = get(cfg, "optimizer.lr")
        require(
            not is_num(lr) or p["rho"] * lr <= 1,
            "protocol.rho",
            p["rho"],
            f"a number > 0 with rho * optimizer.lr <= 1 (optimizer.lr={lr})",
        )


PROTOCOL = Group({name: _keys(name) for name in PROTOCOLS}, check=_check)


def build_protocol(cfg: Mapping[str, Any]) -> Protocol:
    """The :class:`Protocol` of a config (its ``learners`` and ``protocol`` group)."""
    p = cfg["protocol"]
    rho = p.get("rho")
    return Protocol(
        p["name"],
        int(cfg["learners"]),
        n=p.get("n"),
        staleness_bound=p.get("staleness_bound"),
        local_steps=int(p.get("local_steps") or 1),
        rho=None if rho is None else float(rho),
    )
