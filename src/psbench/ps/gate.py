"""The parameter server's gate: when a learner may compute, and when an update is applied.

One object holds every protocol rule and the per-learner clocks; two drivers call it. The
:class:`~psbench.ps.simulator.Simulator` calls it from its event heap on a virtual clock, the
dist engine's :class:`~psbench.distributed.ps_server.ParameterServer` from its messages on the wall
clock. The gate keeps no time: callers stamp their own.

A learner's round trip, as both drivers see it:

1. :meth:`Gate.start` — it begins a gradient on the weights of timestamp ``ts``: the gate hands
   out the next μ·H samples of the stream, or STOP once the G gradients are handed out.
2. :meth:`Gate.clock` — the gradient leaves the learner: its clock advances (Kumar et al. §3.1).
3. :meth:`Gate.arrive` (:meth:`Gate.push` = clock + arrive) — gradients reach the root's
   accumulator; the c-th completes an update (Rudra §3.1: c = λ hardsync Eq 3, c = ⌊λ/n⌋
   softsync Eq 5, c = 1 async Eq 4 and SSP), which advances the weight timestamp and is
   recorded in the staleness histogram (σ = i − ts, Eq 2).
4. :meth:`Gate.ready` — may it ask for weights? STOP once the budget is spent; PARK while its
   clock k is more than s ahead of the slowest live learner's applied clock, or its own
   pushes are not all in (SSP, Kumar et al. §3.1 conditions 1–4).
5. :meth:`Gate.read` — the root reads its timestamp for it: PARK under the hardsync barrier
   while the root holds no weights newer than those it last used (σ ≡ 0, Eq 3), else GRANT.

After every update :meth:`Gate.release` returns the parked learners that may read now; once
the budget is spent :meth:`Gate.stranded` returns those that never will (the PS stops them).
:meth:`Gate.drop` writes a dead learner off (the SSP minimum is over live learners);
:meth:`Gate.finish` applies what is left when nothing more can come.
"""

from __future__ import annotations

from psbench.ps.protocols import Protocol
from psbench.ps.schedule import Contribution
from psbench.ps.staleness import StalenessStats

#: decisions of :meth:`Gate.ready` and :meth:`Gate.read` (GRANT is 0: ``if gate.ready(l):`` means "not now")
GRANT, PARK, STOP = 0, 1, 2


class Gate:
    """Clocks and rules of one parameter server for λ = ``protocol.learners`` learners.

    Args:
        protocol: c, the barrier and the SSP bound s.
        total_gradients: G, rounded down to a multiple of c so every update has c gradients.
        samples_per_gradient: μ·H, the stream positions one gradient consumes.
        staleness: the histogram updates are recorded in (a new one by default).

    Per learner l: ``pushed[l]`` its clock (gradients sent), ``applied[l]`` its gradients in
    the root's accumulator or weights, ``last_used[l]`` the timestamp of its last gradient's
    weights. ``root_ts`` is the number of updates applied.
    """

    __slots__ = (
        "G",
        "acc",
        "all_live",
        "applied",
        "barrier",
        "bound",
        "c",
        "computing",
        "lam",
        "last_used",
        "live",
        "lost",
        "next_sample",
        "parked",
        "pushed",
        "root_ts",
        "spg",
        "staleness",
        "started",
    )

    def __init__(
        self,
        protocol: Protocol,
        total_gradients: int,
        samples_per_gradient: int = 1,
        staleness: StalenessStats | None = None,
    ) -> None:
        lam = protocol.learners
        self.lam, self.c = lam, protocol.gradients_per_update
        self.barrier, self.bound = protocol.barrier, protocol.bound
        self.G = total_gradients - total_gradients % self.c
        self.spg = samples_per_gradient
        self.staleness = StalenessStats() if staleness is None else staleness
        self.root_ts = 0
        self.pushed = [0] * lam
        self.applied = [0] * lam
        self.last_used = [-1] * lam
        self.computing = [False] * lam
        self.live = [True] * lam
        self.all_live = True
        self.parked: list[int] = []
        self.acc: list[Contribution] = []
        self.started = 0
        self.next_sample = 0
        self.lost = 0

    # ------------------------------------------------------------------ learners
    def start(self, l: int, ts: int) -> int:
        """Learner ``l`` computes on the weights of ``ts``: its first sample, or -1 (STOP) when all G are out."""
        if self.started >= self.G:
            return -1
        self.started += 1
        s0 = self.next_sample
        self.next_sample = s0 + self.spg
        self.last_used[l] = ts
        self.computing[l] = True
        return s0

    def clock(self, l: int) -> None:
        """Learner ``l``'s gradient left it: its clock advances."""
        self.pushed[l] += 1
        self.computing[l] = False

    def ready(self, l: int) -> int:
        """May learner ``l`` ask for weights: GRANT, PARK (SSP bound; it is parked) or STOP."""
        if self.started >= self.G:
            return STOP
        if self.bound is not None and not self.ssp_ok(l):
            self.parked.append(l)
            return PARK
        return GRANT

    def read(self, l: int) -> int:
        """The root reads its timestamp for learner ``l``: PARK under the barrier (it is parked), else GRANT."""
        if self.barrier and self.root_ts == self.last_used[l]:
            self.parked.append(l)
            return PARK
        return GRANT

    def ssp_ok(self, l: int) -> bool:
        """All of l's pushes are in and its clock k − the slowest live applied clock ≤ s (Kumar et al. §3.1)."""
        k = self.pushed[l]
        a = self.applied
        slowest = min(a) if self.all_live else min(a[j] for j in range(self.lam) if self.live[j])
        return a[l] == k and k - slowest <= self.bound  # type: ignore[operator]

    def min_ts(self, l: int) -> int:
        """The oldest weight timestamp learner ``l`` may compute on next (the read rule, for a broadcast tree)."""
        if self.barrier:
            return self.last_used[l] + 1
        return self.root_ts if self.bound is not None else 0

    # ------------------------------------------------------------------ the root
    def push(self, contribution: Contribution) -> list[Contribution] | None:
        """A learner's gradient reaches the root directly: :meth:`clock` then :meth:`arrive`."""
        l = contribution.learner
        self.pushed[l] += 1
        self.computing[l] = False
        acc = self.acc
        acc.append(contribution)
        self.applied[l] += 1
        if len(acc) < self.c:
            return None
        self.acc = []
        return self.apply(acc)

    def arrive(self, contributions: list[Contribution]) -> list[Contribution] | None:
        """Gradients join the accumulator; once it holds ≥ c they are the next update (returned), else None."""
        acc, applied = self.acc, self.applied
        acc.extend(contributions)
        for cb in contributions:
            applied[cb.learner] += 1
        if len(acc) < self.c:
            return None
        self.acc = []
        return self.apply(acc)

    def apply(self, group: list[Contribution]) -> list[Contribution]:
        """``group`` is update ``root_ts``: its σ recorded (Eq 2), the timestamp advanced; returns it."""
        self.staleness.add(self.root_ts, [g.ts for g in group])
        self.root_ts += 1
        return group

    def release(self) -> list[int]:
        """Parked learners that may read now (all under the barrier, the SSP ones within the bound)."""
        out: list[int] = []
        keep: list[int] = []
        for l in self.parked:
            (out if self.barrier or self.ssp_ok(l) else keep).append(l)
        self.parked = keep
        return out

    def stranded(self) -> list[int]:
        """Once all G gradients are handed out a parked learner can never compute again: unparked, to be stopped."""
        if self.started < self.G or not self.parked:
            return []
        out, self.parked = self.parked, []
        return out

    def halt(self) -> None:
        """Hand out no more gradients (a diverged run)."""
        self.G = min(self.G, self.started)

    def drop(self, l: int) -> bool:
        """Learner ``l`` died: it leaves the SSP minimum and the parked list; True if a gradient was written off."""
        self.live[l] = False
        self.all_live = False
        if l in self.parked:
            self.parked.remove(l)
        lost = self.computing[l]
        self.computing[l] = False
        self.lost += lost
        return lost

    def finish(self) -> list[Contribution] | None:
        """The last update when fewer than c gradients are left (tree topologies, written-off gradients)."""
        if not self.acc:
            return None
        group, self.acc = self.acc, []
        return self.apply(group)
