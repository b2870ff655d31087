"""Staleness-aware learning-rate policies as per-gradient scales.

Every policy returns, for the c gradients of one PS update, the weights ``w_l`` of

    g_i = (1/c) Σ_l w_l · Δθ_l,        θ_{i+1} = θ_i − α0 · g_i

so aggregation is one formula for all protocols (Zhang Eq 2 with α(τ) = α0·w(τ)).

* ``constant`` — w = 1 (Rudra Eqs 3–5 with α = α0).
* ``sqrt_scaling`` — w = √(μλ/B) for hardsync (Rudra §3.2 / §5.2; B = reference batch).
* ``mean_staleness`` — w = 1/⟨σ⟩ of the update, ⟨σ⟩ measured (Rudra Eq 2) on the update's own gradients
  (Rudra Eq 6 read as α0/⟨σ⟩), with ⟨σ⟩ floored at ``min_staleness`` so hardsync (⟨σ⟩ = 0) keeps α0.
* ``nominal_staleness`` — w = 1/n, n the protocol's splitting parameter (Rudra Eq 6 as written, α0/n: §5.1
  finds ⟨σ⟩ = n "for our implementation"; λ-softsync has n = λ, §5.3), floored at ``min_staleness`` so
  hardsync (n = 0) keeps α0. Where the measured ⟨σ⟩ is not n (λ − 1 for λ-softsync at small λ), the two differ.
* ``per_gradient`` — w_l = 1/τ_l (Zhang Eq 3); τ = 0 has no value in the paper, so it
  is replaced by ``zero_staleness`` (default 1: a fresh gradient gets α0).
* ``dynsgd`` — w_l = 1/(σ_l + 1) (DynSGD, as in Hermans et al.).
* ``exponential`` — w_l = decay^σ_l (the exponential penalty of Chan & Lane, cited by Zhang §1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from psbench.errors import require
from psbench.ps.protocols import PROTOCOLS

LR_POLICIES = (
    "constant",
    "sqrt_scaling",
    "mean_staleness",
    "nominal_staleness",
    "per_gradient",
    "dynsgd",
    "exponential",
)
#: the protocols α0/n applies to: those that declare a splitting parameter n (hardsync n = 0, n-softsync, async n = λ)
NOMINAL_PROTOCOLS = tuple(name for name, d in PROTOCOLS.items() if d.splitting is not None)


@dataclass(frozen=True)
class LRPolicy:
    name: str = "constant"
    reference_batch: int = 128
    min_staleness: float = 1.0
    zero_staleness: float = 1.0
    decay: float = 0.5
    #: the protocol's splitting parameter n (``Protocol.splitting``) for ``nominal_staleness``: not a config key,
    #: the run's protocol sets it (:meth:`for_protocol`)
    n: int = 0

    def __post_init__(self) -> None:
        require(self.name in LR_POLICIES, "lr_policy.name", self.name, f"one of {list(LR_POLICIES)}")
        require(self.reference_batch >= 1, "lr_policy.reference_batch", self.reference_batch, ">= 1")
        require(self.min_staleness > 0, "lr_policy.min_staleness", self.min_staleness, "> 0")
        require(self.zero_staleness > 0, "lr_policy.zero_staleness", self.zero_staleness, "> 0")
        require(0 < self.decay <= 1, "lr_policy.decay", self.decay, "in (0, 1]")

    def for_protocol(self, protocol: str, splitting: int) -> LRPolicy:
        """This policy for a run of ``protocol`` whose splitting parameter is ``splitting`` (α0/n needs n)."""
        if self.name != "nominal_staleness":
            return self
        require(
            protocol in NOMINAL_PROTOCOLS,
            "lr_policy",
            self.name,
            f"a protocol with a splitting parameter n ({'|'.join(NOMINAL_PROTOCOLS)}), not {protocol}",
        )
        return replace(self, n=splitting)

    def scales(self, staleness: list[int], mu: int, learners: int) -> list[float]:
        """Per-gradient weights w_l for one update whose gradients have staleness σ_l."""
        n = self.name
        if n == "constant":
            return [1.0] * len(staleness)
        if n == "sqrt_scaling":
            return [math.sqrt(mu * learners / self.reference_batch)] * len(staleness)
        if n == "mean_staleness":
            mean = sum(staleness) / len(staleness)
            return [1.0 / max(mean, self.min_staleness)] * len(staleness)
        if n == "nominal_staleness":
            return [1.0 / max(self.n, self.min_staleness)] * len(staleness)
        if n == "per_gradient":
            return [1.0 / (s if s > 0 else self.zero_staleness) for s in staleness]
        if n == "dynsgd":
            return [1.0 / (s + 1) for s in staleness]
        return [self.decay**s for s in staleness]
