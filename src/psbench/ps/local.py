"""Local-step protocols: a learner takes H = ``protocol.local_steps`` steps on its own model between commits.

The AGN paper (Hermans et al.) calls H "λ"; here λ stays the number of learners. All four
protocols are asynchronous in the schedule (the PS applies every commit on arrival, c = 1);
a commit costs H compute times (``Simulator`` multiplies compute(μ) by H) and carries μ·H
samples. They differ only in what a learner commits and how the PS scales it. Writing
d_h for the learner optimizer's step direction (θ ← θ − η·d_h: the gradient for SGD,
m̂/(√v̂ + ε) for Adam) and D = Σ_{h<H} d_h for the accumulated direction of one window:

* ``downpour`` — commit the accumulated update Δ = −η·D (Dean et al.; H = 1 is plain async);
* ``agn`` — commit Δ = −η·D / H, the normalized accumulated update (AGN Eq 1–2, Algorithm 1);
* ``aeasgd`` — asynchronous EASGD (Zhang, Choromanska, LeCun 2015): at each pull of the
  center θ̃ the learner computes the elastic difference e = ρη(θ_l − θ̃), moves
  θ_l ← θ_l − e and commits e (θ̃ ← θ̃ + e): the same force applied to both sides;
* ``dynsgd`` — commit Δ = −η·D, which the PS divides by σ + 1, σ the staleness of the
  commit counted in commits (Jiang et al. 2017, as run in AGN Fig 7).

The PS applies every commit additively, θ̃ ← θ̃ + w_l·s·Δ (AGN Eq 2) with s the protocol
scale above and w_l the lr policy's per-gradient weight (1 for ``lr_policy=constant``).

Words, one per idea: *local steps* H (``protocol.local_steps``); a *window* is one learner's H
local steps from a pull of θ̃ to its *commit* (:func:`psbench.ps.local_window.local_window`); a
*local-step protocol* is one of :data:`LOCAL_PROTOCOLS` (:func:`uses_local_steps`). In the
schedule a commit takes a gradient's place (one row, μ·H samples).
"""

from __future__ import annotations

from psbench.ps.protocols import PROTOCOLS

#: the protocols declared ``local`` (:data:`psbench.ps.protocols.PROTOCOLS`); the elastic ones take ``rho``
LOCAL_PROTOCOLS = tuple(name for name, d in PROTOCOLS.items() if d.local)
ELASTIC = tuple(name for name in LOCAL_PROTOCOLS if "rho" in PROTOCOLS[name].keys)


def commit_scale(name: str, local_steps: int, staleness: int) -> float:
    """s: the factor the PS applies to a learner's accumulated update (1 for the elastic commit)."""
    if name == "agn":
        return 1.0 / local_steps  # AGN Eq 1: the accumulated update normalized by H
    if name == "dynsgd":
        return 1.0 / (staleness + 1)  # DynSGD: divide by staleness + 1, counted in commits
    return 1.0


def uses_local_steps(name: str) -> bool:
    return name in LOCAL_PROTOCOLS


def is_elastic(name: str) -> bool:
    return name in ELASTIC
