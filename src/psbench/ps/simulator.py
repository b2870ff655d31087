"""Discrete-event simulation of λ learners and a parameter server (Rudra §3).

Who pushes when, on which weight timestamp, and when the PS applies an update depends
only on the cost model and the protocol, never on gradient values. :class:`Simulator`
computes that schedule with a heap ordered by ``(virtual_time, seq)``; ``seq`` is a
global counter, so simultaneous events run in creation order and the schedule is a pure
function of (protocol, cost model, topology, μ, number of gradients, seed).

Servers (the PS root, every leaf PS, the root's broadcast link) are FIFO single servers
kept as a ``free_at`` time: a message arriving at ``t`` is served from ``max(t, free_at)``.
Because service is FIFO, the *logical* effect of a message (a push counted, a timestamp
read) is applied when its arrival is processed; its completion time is computed then. The
logical effects — every protocol rule and clock — are the :class:`~psbench.ps.gate.Gate`'s;
the simulator adds their costs, one handler per event kind.

**Bounded memory.** :meth:`Simulator.run` is a generator: it yields each update as soon as
the PS applies it and keeps nothing of it. Live state is O(λ + nodes) (one event per
learner in the heap, per-learner slots, per-leaf queues) plus the staleness histogram,
which is O(σ_max) — so λ = 1,000 learners and 10⁶ gradients run in a few MB. Only
:meth:`psbench.ps.schedule.Schedule.collect` materializes a schedule, for training runs
that need it.

**Trace.** With ``trace_updates=K`` the simulator also records a :class:`~psbench.ps.trace.Trace`
of its first K updates (each learner's compute / push / pull / wait intervals, the root's busy
periods) by running wrapped handlers until update K − 1 is applied, then the plain ones: the
schedule is the same bit for bit, and a simulation without a trace runs exactly the loop it ran
before (the picture: :mod:`psbench.ps.timeline`).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from psbench.cluster.cost import CostModel, JitterStreams, PSJitter
from psbench.cluster.topology import Topology
from psbench.errors import require
from psbench.ps.gate import Gate
from psbench.ps.protocols import Protocol
from psbench.ps.schedule import Contribution, Update
from psbench.ps.staleness import StalenessStats
from psbench.ps.trace import Trace

# Event kinds.
_READY, _START, _PULL_ROOT, _PUSH_ROOT, _PUSH_LEAF, _RELAY, _RELAY_DONE, _SERVE_LEAF, _PUSH_DONE, _BCAST, _COMPUTED = (
    range(11)
)


def _unit() -> float:
    return 1.0


@dataclass
class SimStats:
    """Run-level results of a simulation (all exact, from the event log)."""

    staleness: StalenessStats = field(default_factory=StalenessStats)
    sim_time_s: float = 0.0
    compute_s: float = 0.0
    learner_time_s: float = 0.0
    bytes_pushed: int = 0
    bytes_pulled: int = 0
    pulls: int = 0
    pulls_skipped: int = 0
    ssp_reads: int = 0

    @property
    def comm_overlap(self) -> float:
        """compute / (compute + exposed communication), summed over learners (Rudra Table 1)."""
        return self.compute_s / self.learner_time_s if self.learner_time_s > 0 else 1.0

    def as_dict(self) -> dict:
        s = self.staleness
        return {
            "staleness_mean": s.mean,
            "staleness_max": s.max,
            "staleness_hist": s.as_dict(),
            "ps_updates": s.updates,
            "gradients": s.gradients,
            "sim_time_s": self.sim_time_s,
            "comm_overlap": self.comm_overlap,
            "bytes_pushed": self.bytes_pushed,
            "bytes_pulled": self.bytes_pulled,
            "pulls": self.pulls,
            "pulls_skipped": self.pulls_skipped,
        }


class Simulator:
    """Event schedule of ``protocol`` on ``topology`` under ``cost``.

    Args:
        protocol: synchronization protocol (its ``learners`` is λ).
        cost: cost model (compute, links, PS service, noise).
        topology: ``rudra_base``, ``rudra_adv`` or ``rudra_adv_star``.
        batch_size: μ, samples per mini-batch.
        total_gradients: gradients to compute; rounded down to a multiple of c so that
            every update has exactly c gradients on ``rudra_base``.
        seed: seeds the per-learner jitter streams.
        trace_updates: K > 0 records ``self.trace``, a :class:`~psbench.ps.trace.Trace` of the first K
            updates (0: none).
    """

    def __init__(
        self,
        protocol: Protocol,
        cost: CostModel,
        topology: Topology,
        batch_size: int,
        total_gradients: int,
        seed: int = 0,
        trace_updates: int = 0,
    ) -> None:
        require(isinstance(batch_size, int) and batch_size >= 1, "batch_size", batch_size, "an integer >= 1")
        c = protocol.gradients_per_update
        require(
            total_gradients >= c,
            "total_gradients",
            total_gradients,
            f">= c = {c} gradients per update (more epochs or data)",
        )
        self.protocol, self.cost, self.topology = protocol, cost, topology
        self.batch_size, self.seed = batch_size, seed
        self.total_gradients = total_gradients - total_gradients % c
        self.stats = SimStats()
        require(
            isinstance(trace_updates, int) and trace_updates >= 0, "trace_updates", trace_updates, "an integer >= 0"
        )
        self.trace_updates = trace_updates
        self.trace: Trace | None = None

    @property
    def samples_per_gradient(self) -> int:
        return self.batch_size * self.protocol.local_steps

    def run(self) -> Iterator[Update]:
        """Yield every PS update in order (a generator: streamed, bounded memory).

        The protocol's rules are the :class:`~psbench.ps.gate.Gate`'s (``self.gate``); the
        handlers here, one per event kind, add the costs: servers' ``free_at`` times, the
        leaf PSs, the broadcast tree.
        """
        p, cost, topo = self.protocol, self.cost, self.topology
        lam = p.learners
        bound = p.bound
        tree, background = topo.tree, topo.background_comm
        st = self.stats
        gate = self.gate = Gate(p, self.total_gradients, self.samples_per_gradient, st.staleness)
        g_start, g_clock, g_push, g_arrive = gate.start, gate.clock, gate.push, gate.arrive
        g_ready, g_read, g_min_ts = gate.ready, gate.read, gate.min_ts
        pushed = gate.pushed  # each learner's clock
        jitter = JitterStreams(cost, lam, self.seed)
        factor = jitter.factor
        psj = cost.ps_jitter_cv > 0  # PS busy periods × a seeded mean-one factor (off: exactly as before)
        psf = PSJitter(cost.ps_jitter_cv, self.seed).factor if psj else _unit  # called only when psj
        compute_s = cost.compute.seconds(self.batch_size) * p.local_steps
        shared = cost.node_share > 0  # learners sharing a node compute slower (off: exactly as before)
        node_f = cost.node_factors(topo.node_sizes(lam)) if shared else []
        lat, svc = cost.latency_s, cost.ps_service_s
        wire = cost.push_wire_bytes  # a push (codec payload; the fp32 model without compression)
        rate = cost.root_rate()  # root link (k shards)
        xfer = wire / rate  # root link, one full message
        beta = cost.contention  # incoming link contention at the root (off: exactly as before)
        incoming: deque[float] = deque()  # completion times of the pushes/relays the root has accepted
        xfer_in = wire / cost.intra_node_bandwidth_Bps  # learner <-> leaf PS
        wire_pull = cost.pull_wire_bytes()  # a pull of the newest weights (or of one update's delta)
        xfer_pull, xfer_pull_in = wire_pull / cost.bandwidth_Bps, wire_pull / cost.intra_node_bandwidth_Bps
        root_pull = wire_pull / rate
        delta = cost.pull_delta and cost.pull_bytes is not None  # pull size depends on updates missed
        pull_wire = cost.pull_wire_bytes
        tsb = CostModel.TIMESTAMP_BYTES
        apply_s = cost.apply_s
        node_of = topo.node_of(lam)
        nodes = len(topo.gather(lam))

        heap: list = []
        hpush = heapq.heappush
        seq = itertools.count()

        root_free = 0.0
        ts_of = [0] * lam  # timestamp of the weights each learner holds
        compute_total = 0.0
        last_end = [0.0] * lam
        last_update = 0.0
        # tree topologies
        leaf_free = [0.0] * nodes
        leaf_ts = [0] * nodes
        leaf_pending: list[list[Contribution]] = [[] for _ in range(nodes)]
        leaf_busy = [False] * nodes
        # a leaf relays once it holds as many gradients as its node has learners (their average, Rudra §3.3);
        # off: it relays whatever it holds as soon as its previous relay is delivered (exactly as before)
        gather = topo.gather(lam)
        # adv*: background push thread and weight broadcast tree
        push_busy = [False] * lam
        waiting_push: list[tuple | None] = [None] * lam
        hop = cost.latency_s + xfer_pull
        hops = topo.broadcast_hops(lam) if background else []
        fanout_s = min(topo.broadcast_fanout, lam) * hop
        max_hop = max(hops) * hop if hops else 0.0
        bcasts: list[tuple[float, int]] = [(0.0, 0)]  # (start, ts), newest last
        bcast_free = 0.0
        bcast_pending = False
        n_bcast = 0
        need_ts = [0] * lam  # adv*: minimum weight timestamp learner must read before computing
        parked_bcast: list[int] = []

        def update(group: list[Contribution]) -> Update:
            """The gate applied ``group``: the PS's apply time, the broadcast, the parked learners."""
            nonlocal root_free, last_update, bcast_pending
            root_free += apply_s * psf() if psj else apply_s
            last_update = root_free
            u = Update(gate.root_ts - 1, root_free, group)
            if background:
                if bcast_free <= root_free:
                    start_bcast(root_free)
                elif not bcast_pending:
                    bcast_pending = True
                    hpush(heap, (bcast_free, next(seq), _BCAST, -1, None))
            if gate.parked:
                for l in gate.release():
                    if background:
                        need_ts[l] = g_min_ts(l)
                        wake_when_weights(l, root_free)
                    else:
                        hpush(heap, (root_free, next(seq), _PULL_ROOT, l, None))
            return u

        def start_bcast(t: float) -> None:
            nonlocal bcast_free, n_bcast
            bcasts.append((t, gate.root_ts))
            bcast_free = t + fanout_s
            n_bcast += 1
            while len(bcasts) > 1 and bcasts[1][0] + max_hop <= t:
                bcasts.pop(0)
            if parked_bcast:
                waiting = parked_bcast[:]
                parked_bcast.clear()
                for w in waiting:
                    wake_when_weights(w, t)

        def weights_at(l: int, t: float) -> int:
            """adv*: newest weight timestamp learner l has received by time t."""
            off = hops[l] * hop
            for start, ts in reversed(bcasts):
                if start + off <= t:
                    return ts
            return bcasts[0][1]

        def wake_when_weights(l: int, t: float) -> None:
            ts = weights_at(l, t)
            if ts >= need_ts[l]:
                hpush(heap, (t, next(seq), _START, l, ts))
                return
            for start, bts in bcasts:
                if bts >= need_ts[l] and start + hops[l] * hop >= t:
                    hpush(heap, (start + hops[l] * hop, next(seq), _START, l, bts))
                    return
            parked_bcast.append(l)

        def contended(t: float) -> float:
            """Transfer time of a push/relay reaching the root at t: slowed by β per incoming message still
            queued or in transfer there (Rudra §3.3: "16 tasks sending 300 MB to the same receiver")."""
            while incoming and incoming[0] <= t:
                incoming.popleft()
            x = xfer * (1.0 + beta * len(incoming))
            incoming.append((root_free if root_free > t else t) + svc + x)
            return x

        # ---------------------------------------------------------------- one handler per event kind
        def on_start(t: float, l: int, ts: int) -> None:  # weights of ts arrived: compute (or stop)
            nonlocal compute_total
            s0 = g_start(l, ts)
            if s0 < 0:
                return
            ts_of[l] = ts
            d = compute_s * factor(l) * node_f[l] if shared else compute_s * factor(l)
            compute_total += d
            grad = (ts, pushed[l], s0, t)  # (ts, clock, sample_start, t_start)
            end = t + d
            last_end[l] = end
            if background:
                hpush(heap, (end, next(seq), _COMPUTED, l, grad))
            elif tree:
                hpush(heap, (end + lat, next(seq), _PUSH_LEAF, l, grad))
            else:
                hpush(heap, (end + lat, next(seq), _PUSH_ROOT, l, grad))

        def on_ready(t: float, l: int, _) -> None:  # the push is done: ask for weights (or park, stop)
            if g_ready(l):
                return
            if background:
                need_ts[l] = g_min_ts(l)
                wake_when_weights(l, t)
            else:  # timestamp inquiry (via the leaf PS on tree topologies)
                hpush(heap, (t + lat, next(seq), _PULL_ROOT, l, None))

        def on_pull_root(t: float, l: int, _) -> None:  # the root reads its timestamp for l
            nonlocal root_free
            start = root_free if root_free > t else t
            if g_read(l):  # parked at the barrier
                root_free = start + (svc * psf() if psj else svc)
                return
            if bound is not None:
                st.ssp_reads += 1
            root_ts = gate.root_ts
            if tree:
                nd = node_of[l]
                if root_ts > leaf_ts[nd]:
                    x = pull_wire(root_ts - leaf_ts[nd]) / rate if delta else root_pull
                    root_free = start + ((svc + x) * psf() if psj else svc + x)
                    leaf_ts[nd] = root_ts
                else:
                    root_free = start + (svc * psf() if psj else svc)
                hpush(heap, (root_free + lat, next(seq), _SERVE_LEAF, l, None))
                return
            st.pulls += 1
            if root_ts == ts_of[l]:
                st.pulls_skipped += 1
                st.bytes_pulled += tsb
                root_free = start + (svc * psf() if psj else svc)
            elif delta:
                w = pull_wire(root_ts - ts_of[l])
                st.bytes_pulled += w
                x = svc + w / rate
                root_free = start + (x * psf() if psj else x)
            else:
                st.bytes_pulled += wire_pull
                x = svc + root_pull
                root_free = start + (x * psf() if psj else x)
            hpush(heap, (root_free + lat, next(seq), _START, l, root_ts))

        def on_serve_leaf(t: float, l: int, _) -> None:  # the leaf PS serves l's pull
            nd = node_of[l]
            start = leaf_free[nd] if leaf_free[nd] > t else t
            st.pulls += 1
            if leaf_ts[nd] == ts_of[l]:
                st.pulls_skipped += 1
                st.bytes_pulled += tsb
                leaf_free[nd] = start + (svc * psf() if psj else svc)
            elif delta:
                w = pull_wire(leaf_ts[nd] - ts_of[l])
                st.bytes_pulled += w
                x = svc + w / cost.intra_node_bandwidth_Bps
                leaf_free[nd] = start + (x * psf() if psj else x)
            else:
                st.bytes_pulled += wire_pull
                x = svc + xfer_pull_in
                leaf_free[nd] = start + (x * psf() if psj else x)
            hpush(heap, (leaf_free[nd] + lat, next(seq), _START, l, leaf_ts[nd]))

        def on_push_root(t: float, l: int, grad: tuple) -> Update | None:  # a push reaches the root
            nonlocal root_free
            start = root_free if root_free > t else t
            x = svc + (contended(t) if beta else xfer)
            root_free = start + (x * psf() if psj else x)
            st.bytes_pushed += wire
            ts, clock, s0, t0 = grad
            done = root_free
            group = g_push(Contribution(l, ts, clock, s0, t0, done))
            u = None if group is None else update(group)
            hpush(heap, (done, next(seq), _READY, l, None))
            return u

        def on_push_leaf(t: float, l: int, grad: tuple) -> None:  # a push reaches l's leaf PS
            nd = node_of[l]
            start = leaf_free[nd] if leaf_free[nd] > t else t
            leaf_free[nd] = done = start + ((svc + xfer_in) * psf() if psj else svc + xfer_in)
            st.bytes_pushed += wire
            ts, clock, s0, t0 = grad
            if not background:
                g_clock(l)
            leaf_pending[nd].append(Contribution(l, ts, clock, s0, t0, done))
            if not leaf_busy[nd] and len(leaf_pending[nd]) >= gather[nd]:
                leaf_busy[nd] = True
                hpush(heap, (done, next(seq), _RELAY, nd, None))
            hpush(heap, (done, next(seq), _PUSH_DONE if background else _READY, l, None))

        def on_computed(t: float, l: int, grad: tuple) -> None:  # adv*: hand the gradient to the push thread
            g_clock(l)  # the learner's clock advances at hand-off (read-my-writes waits on it)
            if push_busy[l]:
                waiting_push[l] = grad  # blocks until the previous push is delivered
                return
            push_busy[l] = True
            hpush(heap, (t + lat, next(seq), _PUSH_LEAF, l, grad))
            hpush(heap, (t, next(seq), _READY, l, None))

        def on_push_done(t: float, l: int, _) -> None:  # adv*: the push thread delivered
            push_busy[l] = False
            w = waiting_push[l]
            if w is not None:  # the learner was blocked on this push: send the next one
                waiting_push[l] = None
                push_busy[l] = True
                hpush(heap, (t + lat, next(seq), _PUSH_LEAF, l, w))
                hpush(heap, (t, next(seq), _READY, l, None))

        def on_relay(t: float, nd: int, _) -> None:  # the leaf PS sends what it holds to the root
            batch = leaf_pending[nd]
            leaf_pending[nd] = []
            hpush(heap, (t + lat, next(seq), _RELAY_DONE, nd, batch))

        def on_relay_done(t: float, nd: int, batch: list) -> Update | None:  # a relay reaches the root
            nonlocal root_free
            start = root_free if root_free > t else t
            x = svc + (contended(t) if beta else xfer)
            root_free = start + (x * psf() if psj else x)
            done = root_free
            group = g_arrive([g._replace(t_push=done) for g in batch])
            u = None if group is None else update(group)
            if len(leaf_pending[nd]) >= gather[nd]:
                hpush(heap, (done, next(seq), _RELAY, nd, None))
            else:
                leaf_busy[nd] = False
            return u

        def on_bcast(t: float, l: int, _) -> None:
            nonlocal bcast_pending
            bcast_pending = False
            start_bcast(t)

        handlers = (
            on_ready,
            on_start,
            on_pull_root,
            on_push_root,
            on_push_leaf,
            on_relay,
            on_relay_done,
            on_serve_leaf,
            on_push_done,
            on_bcast,
            on_computed,
        )  # indexed by event kind

        for l in range(lam):  # every learner starts on the initial weights, no pull
            hpush(heap, (0.0, next(seq), _START, l, 0))

        pop = heapq.heappop
        trace = None
        if self.trace_updates:  # wrapped handlers until the window ends, then the loop below
            trace = self.trace = Trace(lam, self.trace_updates, p.local_steps, wait_reason(p, background))
            w = trace.handlers(
                gate,
                lambda: root_free,
                last_end,
                waiting_push,
                push_busy,
                background,
                on_start=on_start,
                on_ready=on_ready,
                on_pull_root=on_pull_root,
                on_push_root=on_push_root,
                on_relay_done=on_relay_done,
                on_computed=on_computed,
                on_push_done=on_push_done,
            )
            traced = (
                w["ready"],
                w["start"],
                w["pull_root"],
                w["push_root"],
                on_push_leaf,
                on_relay,
                w["relay_done"],
                on_serve_leaf,
                w["push_done"],
                on_bcast,
                w["computed"],
            )
            while heap:
                ev = pop(heap)
                if ev[0] > trace.t_end:
                    hpush(heap, ev)  # the same tuple back: the plain loop pops it next
                    trace.close()
                    break
                u = traced[ev[2]](ev[0], ev[3], ev[4])
                if u is not None:
                    yield u
        while heap:
            t, _, kind, l, data = pop(heap)
            u = handlers[kind](t, l, data)
            if u is not None:
                yield u
        tracing = trace is not None and not trace.closed
        for nd in range(nodes):  # gathering leaves: what they still hold once no gradient is left to compute
            if leaf_pending[nd]:
                root_free = max(root_free, max(g.t_push for g in leaf_pending[nd])) + svc + xfer
                group = g_arrive([g._replace(t_push=root_free) for g in leaf_pending[nd]])
                leaf_pending[nd] = []
                if group is not None:
                    a = root_free
                    u = update(group)
                    if tracing:
                        trace.applied(u, a)  # type: ignore[union-attr]
                    yield u
        group = gate.finish()  # tree topologies may end with fewer than c gradients at the root
        if group is not None:
            a = root_free
            root_free += apply_s
            last_update = root_free
            u = Update(gate.root_ts - 1, root_free, group)
            if tracing:
                trace.applied(u, a)  # type: ignore[union-attr]
            yield u
        if tracing:
            trace.close()  # type: ignore[union-attr]
        st.sim_time_s = last_update
        st.compute_s = compute_total
        st.learner_time_s = sum(last_end)
        if background:
            st.bytes_pulled += n_bcast * lam * wire_pull
            st.pulls += n_bcast * lam


def wait_reason(protocol: Protocol, background: bool) -> str:
    """What a learner waits at under ``protocol``: the hardsync barrier, the SSP bound, a weight broadcast."""
    why = "barrier" if protocol.barrier else f"bound s={protocol.bound}" if protocol.bound is not None else ""
    if background:  # rudra_adv_star: for weights it may use to reach it over the broadcast tree
        return f"{why}, then a weights broadcast" if why else "a weights broadcast"
    return why
