"""The ``lr_policy`` config group: one option per policy of :mod:`psbench.lr.policies`, with its keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.lr.policies import LR_POLICIES, NOMINAL_PROTOCOLS, LRPolicy
from psbench.schema import FLOAT32_MAX, MAX_COUNT, Group, Key, Keys, integer, is_num, number


def _divisor() -> Key:
    """A staleness the policy divides α0 by (1/x weights every gradient): > 0 with 1/x a finite float32."""
    return Key(
        lambda v: is_num(v) and v > 0 and 1 / v <= FLOAT32_MAX,
        f"a number > 0 whose reciprocal float32 keeps (>= {1 / FLOAT32_MAX:.2g})",
    )


_KEYS: dict[str, Keys] = {
    "sqrt_scaling": {"reference_batch": integer(1, MAX_COUNT)},  # B of α0·√(μλ/B)
    "mean_staleness": {"min_staleness": _divisor()},  # floor of ⟨σ⟩
    "nominal_staleness": {"min_staleness": _divisor()},  # floor of n
    "per_gradient": {"zero_staleness": _divisor()},  # the τ used when τ = 0
    "exponential": {"decay": number(0, 1, lo_open=True, float32=True)},
}


def _check(cfg: Mapping[str, Any]) -> None:
    """α0/n needs the protocol's n (``nominal_staleness``: hardsync, n-softsync, async)."""
    name, protocol = cfg["lr_policy"]["name"], cfg["protocol"]["name"]
    require(
        name != "nominal_staleness" or protocol in NOMINAL_PROTOCOLS,
        "lr_policy",
        name,
        f"a protocol with a splitting parameter n ({'|'.join(NOMINAL_PROTOCOLS)}), not protocol={protocol}",
    )


LR_POLICY = Group({name: _KEYS.get(name, {}) for name in LR_POLICIES}, check=_check)


def build_lr_policy(cfg: Mapping[str, Any], protocol) -> LRPolicy:
    """``lr_policy`` of a resolved config, bound to the run's protocol (α0/n reads its splitting parameter n)."""
    return LRPolicy(**cfg["lr_policy"]).for_protocol(protocol.name, protocol.splitting)
