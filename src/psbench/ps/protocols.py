"""Synchronization protocols (Rudra §3.1 Eqs 3–5; Zhang §2.2; Kumar et al. §3.1), each declared once.

A protocol answers three schedule questions, never touching gradient values:

* how many gradients ``c`` the PS collects before it advances the weight timestamp;
* whether a learner must wait for *newer* weights before computing again (hardsync);
* the SSP bound ``s`` on how far a learner may run ahead of the slowest.

``local_steps`` (H): with the local-step protocols of :mod:`psbench.ps.local` (``downpour``,
``agn``, ``aeasgd``, ``dynsgd``) a learner computes H mini-batches between pushes; it is 1
for every other protocol. Those four are asynchronous in the schedule (c = 1).

:data:`PROTOCOLS` is the one place a protocol is declared (:class:`Declared`): its keys in the ``protocol`` config
group (each a field of :class:`Protocol`, checked by the same :class:`~psbench.schema.Key` in a config and in
Python), its one label (summary.json, the schedule's metadata, plots and MLflow run names), c, the barrier, the
splitting parameter n it is equivalent to and its rule across keys. The ``protocol`` group's declaration
(:mod:`psbench.ps.options`), the run names (:func:`psbench.tracking.run_info.run_name`) and the local-step and
elastic families (:mod:`psbench.ps.local`) are derived from it; a new protocol is its entry here and its
``conf/protocol/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from psbench.errors import require
from psbench.schema import MAX_COUNT, Key, integer, is_num, number

#: the fields of :class:`Protocol` a protocol's keys may set, with their value when a protocol does not declare them
OPTIONAL = {"n": None, "staleness_bound": None, "local_steps": 1, "rho": None}


@dataclass(frozen=True)
class Declared:
    """One protocol, declared once.

    ``keys``: its keys in the ``protocol`` group besides ``name`` (each a field of :class:`Protocol`; the others
    keep their :data:`OPTIONAL` value). ``label``: its one label, a format of those fields (``"{n}-softsync"``).
    ``c``: gradients per PS update; ``barrier``: learners wait for newer weights (hardsync); ``splitting``: the
    softsync n it is equivalent to, for α0/n (None: none); ``local``: H local steps per commit
    (:mod:`psbench.ps.local`; with ``rho``, the elastic commit). ``rule``: a check across keys or groups of a
    resolved config (``learners``, ``protocol``, and others where present), or None.
    """

    keys: Mapping[str, Key] = field(default_factory=dict)
    label: str = "{name}"
    c: Callable[[Protocol], int] = lambda p: 1
    barrier: bool = False
    splitting: Callable[[Protocol], int] | None = None
    local: bool = False
    rule: Callable[[Mapping[str, Any], Mapping[str, Any]], None] | None = None


def _n_within_learners(values: Mapping[str, Any], context: Mapping[str, Any]) -> None:
    learners, n = context["learners"], values["n"]
    require(n <= learners, "protocol.n", n, f"an integer with 1 <= n <= learners (λ={learners})")


def _elastic_step(values: Mapping[str, Any], context: Mapping[str, Any]) -> None:
    """Elastic moves ρη(θ_l − θ̃) with ρη in (0, 1]: at most all the way to the center."""
    rho, lr = values["rho"], context.get("optimizer.lr")
    require(
        not is_num(lr) or rho * lr <= 1,
        "protocol.rho",
        rho,
        f"a number > 0 with rho * optimizer.lr <= 1 (optimizer.lr={lr})",
    )


_BOUND_WORDS = f"in [0, {MAX_COUNT}] (clocks; a bound past the run's updates is async)"
_H = {"local_steps": integer(1, MAX_COUNT, what="an integer number of local steps H")}
PROTOCOLS: dict[str, Declared] = {
    # Rudra Eq 3: c = λ, every learner waits for the new weights, σ ≡ 0
    "hardsync": Declared(c=lambda p: p.learners, barrier=True, splitting=lambda p: 0),
    # Rudra Eq 5: c = ⌊λ/n⌋; ⟨σ⟩ ≈ n, σ ≤ 2n w.h.p. (§5.1)
    "softsync": Declared(
        {"n": integer(1, words="with 1 <= n <= learners")},
        "{n}-softsync",
        c=lambda p: p.learners // int(p.n or 1),
        splitting=lambda p: int(p.n or 1),
        rule=_n_within_learners,
    ),
    # Rudra Eq 4 (Downpour): λ-softsync, c = 1
    "async": Declared(splitting=lambda p: p.learners),
    # Kumar et al. §3.1: c = 1, a learner at clock k waits while k − min clock > s
    "ssp": Declared(
        {
            "staleness_bound": integer(
                0, MAX_COUNT, words=f"in [0, {MAX_COUNT}] (clocks; a bound past the run's updates is async)"
            )
        },
        "ssp-s{staleness_bound}",
    ),
    # the local-step protocols (psbench.ps.local): async in the schedule, H local steps per commit
    "downpour": Declared(_H, "downpour-H{local_steps}", local=True),
    "agn": Declared(_H, "agn-H{local_steps}", local=True),
    "aeasgd": Declared(
        {**_H, "rho": number(0, lo_open=True, float32=True)},
        "aeasgd-H{local_steps}-ρ{rho:g}",
        local=True,
        rule=_elastic_step,
    ),
    "dynsgd": Declared(_H, "dynsgd-H{local_steps}", local=True),
}


def label(name: str, values: Mapping[str, Any]) -> str:
    """The one label of protocol ``name`` with its keys' ``values`` (a config's ``protocol`` group, or a
    :class:`Protocol`'s fields)."""
    return PROTOCOLS[name].label.format(name=name, **{k: values[k] for k in PROTOCOLS[name].keys})


@dataclass(frozen=True)
class Protocol:
    """A synchronization protocol for ``learners`` = λ learners (:data:`PROTOCOLS` says what each one is).

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
        keys = PROTOCOLS[self.name].keys
        for k, unset in OPTIONAL.items():
            v = getattr(self, k)
            if k in keys:
                require(keys[k].ok(v), f"protocol.{k}", v, keys[k].allowed)
            else:
                takes = "|".join(p for p, d in PROTOCOLS.items() if k in d.keys)
                require(
                    v == unset,
                    f"protocol.{k}",
                    v,
                    f"{'unset' if unset is None else unset} for protocol {self.name} (only {takes} "
                    f"{'take' if '|' in takes else 'takes'} {k})",
                )
        rule = PROTOCOLS[self.name].rule
        if rule is not None:
            rule({f.name: getattr(self, f.name) for f in fields(self)}, {"learners": self.learners})

    @property
    def declared(self) -> Declared:
        return PROTOCOLS[self.name]

    @property
    def gradients_per_update(self) -> int:
        """c: gradients aggregated into one PS update."""
        return self.declared.c(self)

    @property
    def splitting(self) -> int:
        """The softsync splitting parameter n this protocol is equivalent to (0 for hardsync; λ, async's, for one
        that declares none)."""
        s = self.declared.splitting
        return self.learners if s is None else s(self)

    @property
    def barrier(self) -> bool:
        """Learners wait for weights newer than the ones they last used (hardsync)."""
        return self.declared.barrier

    @property
    def bound(self) -> int | None:
        """SSP staleness bound s in clocks, or None."""
        return self.staleness_bound

    @property
    def label(self) -> str:
        return label(self.name, {f.name: getattr(self, f.name) for f in fields(self)})
