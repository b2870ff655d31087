"""The ``lr_policy`` config group: one option per policy of :mod:`psbench.lr.policies`, with its keys."""

from __future__ import annotations

from psbench.lr.policies import LR_POLICIES
from psbench.schema import Group, Keys, integer, number

_KEYS: dict[str, Keys] = {
    "sqrt_scaling": {"reference_batch": integer(1)},                    # B of α0·√(μλ/B)
    "mean_staleness": {"min_staleness": number(0, lo_open=True)},       # floor of ⟨σ⟩
    "per_gradient": {"zero_staleness": number(0, lo_open=True)},        # the τ used when τ = 0
    "exponential": {"decay": number(0, 1, lo_open=True)},
}

LR_POLICY = Group({name: _KEYS.get(name, {}) for name in LR_POLICIES})
