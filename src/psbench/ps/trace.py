"""The simulator's event trace: what each learner and the PS did, interval by interval, for the first K updates.

:class:`Trace` is recorded by :class:`~psbench.ps.simulator.Simulator` (``trace_updates=K``) from its own
events: it wraps the handlers of the events that change a learner's state and reads the simulator's clocks
(the root's ``free_at``, each learner's compute end) before and after each one, so every interval is the
simulator's, not re-derived. Recording stops at the first event after update K − 1 is applied (``t_end``);
from then on the simulator runs its unwrapped handlers, so a trace costs nothing afterwards and nothing at all
when off, and never changes the schedule.

A learner is always in one state (Rudra §3.2, Fig 1: blocking push, timestamp inquiry, pull):

* ``compute`` — a mini-batch (H local steps with a local-step protocol) on the weights of timestamp ``label``;
* ``push`` — from the end of its computation until the server holding it has taken the gradient (the root on
  ``rudra_base``, its leaf PS on the trees; on ``rudra_adv_star`` only while blocked behind the push in
  flight; the background push itself is ``lane`` 1);
* ``pull`` — asking for the timestamp and receiving the weights (queueing at the PS included);
* ``wait`` — parked: at the hardsync barrier (no weights newer than its last, Eq 3), at the SSP bound
  (Kumar et al. §3.1), or on ``rudra_adv_star`` for a broadcast of weights it may use.

The PS row (``row`` :data:`PS`) holds the root's busy periods: ``push`` (taking a push or a leaf's relay),
``pull`` (a timestamp read, with the weights when sent) and ``apply`` (update ``label``). A leaf PS's work
and the ``rudra_adv_star`` broadcast tree are not drawn. A state still in progress at ``t_end`` ends there;
a computation keeps its true end (the picture clips it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

COMPUTE, PUSH, PULL, WAIT, APPLY = "compute", "push", "pull", "wait", "apply"
KINDS = (COMPUTE, PUSH, PULL, WAIT, APPLY)
PS = -1  #: the row of the parameter server (the root)


class Interval(NamedTuple):
    row: int  #: learner l, or :data:`PS`
    kind: str
    start: float
    end: float
    label: int = -1  #: compute: the weight timestamp read; apply: the update index
    lane: int = 0  #: 1: the background push thread of ``rudra_adv_star`` (beside the learner's compute)


@dataclass
class Trace:
    """Intervals of the first ``updates`` = K PS updates of a simulation (recorded by the simulator).

    ``update_time[i]``: when update i was applied; ``t_end``: the window's end (update K − 1's time, or the
    run's last update when it has fewer); ``wait``: what a wait is at (the barrier, the bound s, a broadcast).
    """

    learners: int
    updates: int
    local_steps: int = 1
    wait: str = ""
    intervals: list[Interval] = field(default_factory=list)
    update_time: list[float] = field(default_factory=list)
    t_end: float = math.inf
    closed: bool = False

    def __post_init__(self) -> None:
        self._open: list[tuple[str, float] | None] = [None] * self.learners  # the state each learner is in
        self._push_from: list[float | None] = [None] * self.learners  # adv*: the background push in flight
        self._raw: list[tuple] = []  # (row, lane, start, end, kind, label): sorted into Intervals at close
        self._root_free: Callable[[], float] | None = None  # the root's free_at, read from the simulator

    # ------------------------------------------------------------------ recording (the simulator calls these)
    def _add(self, row: int, kind: str, a: float, b: float, label: int = -1, lane: int = 0) -> None:
        if b > a:
            self._raw.append((row, lane, a, b, kind, label))

    def _switch(self, l: int, t: float, kind: str | None) -> None:
        """Learner ``l`` leaves its state at ``t`` and enters ``kind`` (None: idle)."""
        o = self._open[l]
        if o is not None:
            self._add(l, o[0], o[1], t)
        self._open[l] = None if kind is None else (kind, t)

    def applied(self, u, start: float) -> None:
        """Update ``u`` was applied from ``start`` to ``u.time``; the K-th closes the window."""
        if u.index >= self.updates:
            return
        self._add(PS, APPLY, start, u.time, u.index)
        self.update_time.append(u.time)
        if len(self.update_time) == self.updates:
            self.t_end = u.time

    def handlers(
        self,
        gate,
        root_free: Callable[[], float],
        last_end: list[float],
        waiting_push: list,
        push_busy: list[bool],
        background: bool,
        *,
        on_start,
        on_ready,
        on_pull_root,
        on_push_root,
        on_relay_done,
        on_computed,
        on_push_done,
    ) -> dict[str, Callable]:
        """The simulator's handlers, wrapped to record what each event did (same names, same returns)."""

        def start(t: float, l: int, ts: int) -> None:
            n = gate.started
            on_start(t, l, ts)
            self._switch(l, t, None)
            if gate.started > n:  # it computes (else it stopped: all gradients are handed out)
                end = last_end[l]
                self._add(l, COMPUTE, t, end, ts)
                if not background:
                    self._open[l] = (PUSH, end)

        def ready(t: float, l: int, data) -> None:
            stop, n = gate.started >= gate.G, len(gate.parked)
            on_ready(t, l, data)  # parks l at the end of gate.parked (SSP), or not
            self._switch(l, t, None if stop else WAIT if background or len(gate.parked) > n else PULL)

        def pull_root(t: float, l: int, data) -> None:
            a, o, n = root_free(), self._open[l], len(gate.parked)
            on_pull_root(t, l, data)
            b = root_free()
            self._add(PS, PULL, max(a, t), b)
            if len(gate.parked) > n:  # the barrier parked it: the read is answered "not yet"
                self._switch(l, b, WAIT)
            elif o is not None and o[0] == WAIT:  # released by an update
                self._switch(l, t, PULL)

        def push_root(t: float, l: int, data):
            a = root_free()
            u = on_push_root(t, l, data)
            return self._served(t, a, u)

        def relay_done(t: float, nd: int, data):
            a = root_free()
            u = on_relay_done(t, nd, data)
            return self._served(t, a, u)

        def computed(t: float, l: int, grad) -> None:
            on_computed(t, l, grad)
            if waiting_push[l] is grad:  # blocked until the push in flight is delivered
                self._open[l] = (PUSH, t)
            else:
                self._push_from[l] = t

        def push_done(t: float, l: int, data) -> None:
            on_push_done(t, l, data)
            p = self._push_from[l]
            if p is not None:
                self._add(l, PUSH, p, t, lane=1)
            self._push_from[l] = t if push_busy[l] else None

        self._root_free = root_free
        return {
            "start": start,
            "ready": ready,
            "pull_root": pull_root,
            "push_root": push_root,
            "relay_done": relay_done,
            "computed": computed,
            "push_done": push_done,
        }

    def _served(self, t: float, free_before: float, u):
        """The root took a push or relay from max(arrival, free) to its service end; ``u``: the update it completed."""
        a = max(free_before, t)
        if u is None:
            self._add(PS, PUSH, a, self._root_free())  # type: ignore[misc]
        else:
            done = u.contributions[-1].t_push  # the message that completed the update is the group's last
            self._add(PS, PUSH, a, done)
            self.applied(u, done)
        return u

    def close(self) -> None:
        """End the window: states in progress end at ``t_end``; nothing recorded starts after it."""
        if self.closed:
            return
        if not math.isfinite(self.t_end):
            self.t_end = self.update_time[-1] if self.update_time else 0.0
        t = self.t_end
        for l in range(self.learners):
            self._switch(l, t, None)
            p = self._push_from[l]
            if p is not None:
                self._add(l, PUSH, p, t, lane=1)
        self.intervals = [
            Interval(row, kind, a, b, label, lane) for row, lane, a, b, kind, label in sorted(self._raw) if a < t
        ]
        self._raw = []
        self.closed = True
        self._root_free = None

    # ------------------------------------------------------------------ reading
    def of(self, row: int, kind: str | None = None) -> list[Interval]:
        """The intervals of ``row`` (a learner, or :data:`PS`), of one ``kind`` if given, in time order."""
        return [iv for iv in self.intervals if iv.row == row and (kind is None or iv.kind == kind)]
