"""Synchronization protocols (Rudra §3.1 Eqs 3–5; Zhang §2.2; Kumar et al. §3.1).

A protocol answers three schedule questions, never touching gradient values:

* how many gradients ``c`` the PS collects before it advances the weight timestamp;
* whether a learner must wait for *newer* weights before computing again (hardsync);
* the SSP bound ``s`` on how far a learner may run ahead of the slowest.

``local_steps`` (H): with the local-step protocols of :mod:`psbench.ps.local` (``downpour``,
``agn``, ``aeasgd``, ``dynsgd``) a learner computes H mini-batches between pushes; it is 1
for every other protocol. Those four are asynchronous in the schedule (c = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from psbench.errors import require
from psbench.ps.local import LOCAL_PROTOCOLS, is_elastic

PROTOCOLS = ("hardsync", "softsync", "async", "ssp", *LOCAL_PROTOCOLS)


@dataclass(frozen=True)
class Protocol:
    """A synchronization protocol for ``learners`` = λ learners.

    * ``hardsync`` — c = λ, every learner waits for the new weights: σ ≡ 0 (Eq 3).
    * ``softsync`` with ``n`` ∈ [1, λ] — c = ⌊λ/n⌋ (Eq 5); ⟨σ⟩ ≈ n, σ ≤ 2n w.h.p. (§5.1).
    * ``async`` — λ-softsync, c = 1: Downpour (Eq 4).
    * ``ssp`` with ``staleness_bound`` s ≥ 0 — c = 1, additive updates; a learner at clock k
      waits while k − min clock > s, so every read holds all updates with clock ≤ k−s−1 plus
      its own (Kumar et al. §3.1, conditions 1–4).
    * ``downpour``, ``agn``, ``aeasgd`` (with elastic ``rho`` ρ > 0), ``dynsgd`` — async
      (c = 1) with ``local_steps`` H ≥ 1 per commit (:mod:`psbench.ps.local`).
    """

    name: str
    learners: int
    n: int | None = None
    staleness_bound: int | None = None
    local_steps: int = 1
    rho: float | None = None

    def __post_init__(self) -> None:
        require(isinstance(self.learners, int) and self.learners >= 1, "learners", self.learners, "an integer >= 1")
        require(self.name in PROTOCOLS, "protocol.name", self.name, f"one of {list(PROTOCOLS)}")
        if self.name == "softsync":
            require(
                isinstance(self.n, int) and 1 <= self.n <= self.learners,
                "protocol.n",
                self.n,
                f"an integer in [1, learners={self.learners}]",
            )
        else:
            require(
                self.n is None or (self.name == "async" and self.n == self.learners),
                "protocol.n",
                self.n,
                f"unset for protocol {self.name} (only softsync takes n)",
            )
        if self.name == "ssp":
            require(
                isinstance(self.staleness_bound, int) and self.staleness_bound >= 0,
                "protocol.staleness_bound",
                self.staleness_bound,
                "an integer >= 0",
            )
        else:
            require(
                self.staleness_bound is None,
                "protocol.staleness_bound",
                self.staleness_bound,
                f"unset for protocol {self.name} (only ssp takes staleness_bound)",
            )
        h = self.local_steps
        require(isinstance(h, int) and not isinstance(h, bool) and h >= 1, "protocol.local_steps", h, "an integer >= 1")
        require(
            h == 1 or self.name in LOCAL_PROTOCOLS,
            "protocol.local_steps",
            h,
            f"1 for protocol {self.name} (local steps only with {'|'.join(LOCAL_PROTOCOLS)})",
        )
        if is_elastic(self.name):
            require(
                isinstance(self.rho, (int, float)) and self.rho > 0,
                "protocol.rho",
                self.rho,
                "a number > 0 (elastic force ρ)",
            )
        else:
            require(
                self.rho is None, "protocol.rho", self.rho, f"unset for protocol {self.name} (only aeasgd takes rho)"
            )

    @property
    def gradients_per_update(self) -> int:
        """c: gradients aggregated into one PS update."""
        if self.name == "hardsync":
            return self.learners
        if self.name == "softsync":
            return self.learners // self.n  # type: ignore[operator]
        return 1

    @property
    def splitting(self) -> int:
        """The softsync splitting parameter n this protocol is equivalent to (0 for hardsync)."""
        return 0 if self.name == "hardsync" else self.n if self.name == "softsync" else self.learners  # type: ignore[return-value]

    @property
    def barrier(self) -> bool:
        """Learners wait for weights newer than the ones they last used (hardsync)."""
        return self.name == "hardsync"

    @property
    def bound(self) -> int | None:
        """SSP staleness bound s in clocks, or None."""
        return self.staleness_bound if self.name == "ssp" else None

    @property
    def label(self) -> str:
        if self.name == "softsync":
            return f"{self.n}-softsync"
        if self.name == "ssp":
            return f"ssp-s{self.staleness_bound}"
        if self.name in LOCAL_PROTOCOLS:
            return f"{self.name}-H{self.local_steps}"
        return self.name
