"""The ``lr_policy`` config group: one option per policy of :mod:`psbench.lr.policies`, with its keys."""

from __future__ import annotations

from psbench.lr.policies import LR_POLICIES
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
    "per_gradient": {"zero_staleness": _divisor()},  # the τ used when τ = 0
    "exponential": {"decay": number(0, 1, lo_open=True, float32=True)},
}

LR_POLICY = Group({name: _KEYS.get(name, {}) for name in LR_POLICIES})
