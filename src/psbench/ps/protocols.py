"""Synchronization protocols (Rudra §3.1 Eqs 3–5; Zhang §2.2; Kumar et al. §3.1).

A protocol answers three schedule questions, never touching gradient values:

* how many gradients ``c`` the PS collects before it advances the weight timestamp;
* whether a learner must wait for *newer* weights before computing again (hardsync);
* the SSP bound ``s`` on how far a learner may run ahead of the slowest.

``local_steps`` (H) is the room left for the local-step family (AGN, DOWNPOUR windows,
EASGD): a learner computes H mini-batches between pushes; it is 1 for every protocol here.
"""

from __future__ import annotations

from dataclasses import dataclass

from psbench.errors import require

PROTOCOLS = ("hardsync", "softsync", "async", "ssp")


@dataclass(frozen=True)
class Protocol:
    """A synchronization protocol for ``learners`` = λ learners.

    * ``hardsync`` — c = λ, every learner waits for the new weights: σ ≡ 0 (Eq 3).
    * ``softsync`` with ``n`` ∈ [1, λ] — c = ⌊λ/n⌋ (Eq 5); ⟨σ⟩ ≈ n, σ ≤ 2n w.h.p. (§5.1).
    * ``async`` — λ-softsync, c = 1: Downpour (Eq 4).
    * ``ssp`` with ``staleness_bound`` s ≥ 0 — c = 1, additive updates; a learner at clock k
      waits while k − min clock > s, so every read holds all updates with clock ≤ k−s−1 plus
      its own (Kumar et al. §3.1, conditions 1–4).
    """

    name: str
    learners: int
    n: int | None = None
    staleness_bound: int | None = None
    local_steps: int = 1

    def __post_init__(self) -> None:
        require(isinstance(self.learners, int) and self.learners >= 1, "learners", self.learners,
                "an integer >= 1")
        require(self.name in PROTOCOLS, "protocol.name", self.name, f"one of {list(PROTOCOLS)}")
        if self.name == "softsync":
            require(isinstance(self.n, int) and 1 <= self.n <= self.learners, "protocol.n", self.n,
                    f"an integer in [1, learners={self.learners}]")
        else:
            require(self.n is None or (self.name == "async" and self.n == self.learners),
                    "protocol.n", self.n, f"unset for protocol {self.name} (only softsync takes n)")
        if self.name == "ssp":
            require(isinstance(self.staleness_bound, int) and self.staleness_bound >= 0,
                    "protocol.staleness_bound", self.staleness_bound, "an integer >= 0")
        else:
            require(self.staleness_bound is None, "protocol.staleness_bound", self.staleness_bound,
                    f"unset for protocol {self.name} (only ssp takes staleness_bound)")
        require(self.local_steps >= 1, "protocol.local_steps", self.local_steps, ">= 1")

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
        return {"hardsync": 0, "softsync": self.n, "async": self.learners, "ssp": self.learners}[self.name]  # type: ignore[return-value]

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
        return self.name
