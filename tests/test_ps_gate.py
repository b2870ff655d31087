"""One gate, two clocks: the simulator and the dist PS make the same protocol decisions.

The parity tests record every call the :class:`~psbench.ps.simulator.Simulator` makes on its
:class:`~psbench.ps.gate.Gate` (rudra_base, the dist engine's topology), turn that event order
into the messages the real :class:`~psbench.distributed.ps_server.ParameterServer` would receive
(HELLO, PUSH, and its own queued PULL steps), deliver them in that order through a scripted
in-process transport (free-run, no processes), and compare the two gates' decisions.

One structural difference is expected: the simulator hands out a gradient's samples when the
weights *arrive* (its START event, a pull's latency after the read), the PS when it sends
them. So the decision sequences are identical until the last gradient is handed out; after
that, both apply the same updates and stop every learner, but the simulator may let a
learner ask once more before stopping it.

Papers: Rudra §3.1 (Eqs 2–5), Kumar et al. §3.1 (SSP conditions 1–4).
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch

from psbench.cluster import CostModel, JitterStreams, Topology
from psbench.distributed import messages as m
from psbench.distributed.ps_server import ParameterServer
from psbench.distributed.transport import Inbound, LearnerFailure
from psbench.lr import LRPolicy
from psbench.ps import Contribution, Protocol, Schedule, Simulator
from psbench.ps.gate import GRANT, PARK, STOP, Gate

HELLO, PUSH, PULL, DIE = "hello", "push", "pull", "die"


class RecordingGate(Gate):
    """The real gate, every call and decision appended to ``trace``."""

    __slots__ = ("trace",)

    def __init__(self, *a, **k) -> None:
        super().__init__(*a, **k)
        self.trace: list[tuple] = []

    def start(self, l, ts):
        s0 = super().start(l, ts)
        self.trace.append(("start", l, ts, s0))
        return s0

    def ready(self, l):
        d = super().ready(l)
        self.trace.append(("ready", l, d))
        return d

    def read(self, l):
        d = super().read(l)
        self.trace.append(("read", l, d))
        return d

    def push(self, c):
        group = super().push(c)
        self.trace.append(("push", c.learner, c.clock, c.ts, c.sample_start, _rows(group)))
        return group

    def release(self):
        out = super().release()
        if out:
            self.trace.append(("release", tuple(out)))
        return out

    def stranded(self):
        out = super().stranded()
        if out:
            self.trace.append(("stranded", tuple(out)))
        return out

    def drop(self, l):
        lost = super().drop(l)
        self.trace.append(("drop", l, lost))
        return lost

    def finish(self):
        group = super().finish()
        self.trace.append(("finish", _rows(group)))
        return group


def _rows(group) -> tuple | None:
    return None if group is None else tuple((g.learner, g.clock, g.ts, g.sample_start) for g in group)


@pytest.fixture
def gates(monkeypatch):
    """Both drivers build RecordingGates; returns the list of gates built, in order."""
    built: list[RecordingGate] = []

    def make(*a, **k):
        built.append(RecordingGate(*a, **k))
        return built[-1]

    monkeypatch.setattr("psbench.ps.simulator.Gate", make)
    monkeypatch.setattr("psbench.distributed.ps_server.Gate", make)
    return built


# ----------------------------------------------------------------------------- the two drivers
LAM, MU = 4, 2
COST = CostModel(jitter_cv=0.3, straggler_fraction=0.25, straggler_slowdown=4.0)  # one learner 4x slower
SLOW = next(iter(JitterStreams(COST, LAM, 0).stragglers))


def simulate(protocol: Protocol, G: int) -> tuple[Schedule, RecordingGate]:
    sim = Simulator(protocol, COST, Topology("rudra_base"), MU, G, seed=0)
    sched = Schedule.collect(sim.run())
    return sched, sim.gate  # type: ignore[return-value]


def arrivals(trace: list[tuple], lam: int) -> list[tuple[str, int]]:
    """The simulator's event order as the PS's messages: its first λ starts are HELLOs, a push is a
    PUSH, and its ready (READY event) and read (PULL_ROOT event) are the PS's two queued PULL steps."""
    out = []
    for i, e in enumerate(trace):
        if e[0] == "start" and i < lam:
            out.append((HELLO, e[1]))
        elif e[0] == "push":
            out.append((PUSH, e[1]))
        elif e[0] in ("ready", "read"):
            out.append((PULL, e[1]))
    return out


class ScriptedTransport:
    """Learners in this process that answer in a given order: script step (kind, l) delivers l's
    pending message — a HELLO, the push of its granted gradient, or a PULL the PS queued — and is
    skipped when l has none. After the script, pending messages come in the order they arose."""

    def __init__(self, script: list[tuple[str, int]], numel: int) -> None:
        self.script, self.numel = list(script), numel
        self.pending: dict[int, str] = {}  # learner -> PUSH | PULL, in the order they arose
        self.granted: dict[int, m.Reply] = {}
        self.clock: dict[int, int] = {}
        self.stopped: set[int] = set()
        self.dead: set[int] = set()
        self.after_script = 0  # messages delivered after the script ran out

    def send(self, l, header, payload=None):
        r = m.decode_reply(header)
        if r.kind == m.STOP:
            self.stopped.add(l)
        else:
            self.granted[l] = r
            self.pending[l] = PUSH

    def defer_pull(self, l):
        assert l not in self.pending, f"learner {l} already has a message pending"
        self.pending[l] = PULL

    def _message(self, kind: str, l: int) -> Inbound | None:
        if kind == HELLO:
            return Inbound(l, m.Push(m.HELLO, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0), None, None)
        if kind == DIE:
            self.dead.add(l)
            self.pending.pop(l, None)
            return None
        if self.pending.get(l) != kind:
            return None
        del self.pending[l]
        if kind == PULL:
            return Inbound(l, m.Push(m.PULL, 0, 0, 0, 0.0, 0.0, 0.0, 0, -1), None, None)
        r = self.granted.pop(l)
        k = self.clock.get(l, 0)
        self.clock[l] = k + 1
        return Inbound(
            l, m.Push(m.PUSH, r.ts, k, r.sample_start, 0.0, 0.0, 0.0, 1, r.row), torch.zeros(self.numel), None
        )

    def get(self, timeout):
        while self.script:
            kind, l = self.script.pop(0)
            msg = self._message(kind, l)
            if msg is not None or kind == DIE:
                return msg
        if self.pending:
            self.after_script += 1
            l, kind = next(iter(self.pending.items()))
            return self._message(kind, l)
        return None

    def check(self, learners):
        for l in learners:
            if l in self.dead:
                raise LearnerFailure(l, f"learner rank {l + 1} exited with code -9 (SIGKILL)")


def run_ps(protocol: Protocol, G: int, script, tolerate: bool = True) -> tuple[ParameterServer, ScriptedTransport]:
    from psbench.models import build_model

    torch.manual_seed(0)
    net = build_model("mlp", (1, 4, 4), 3, hidden=(8,))
    tr = ScriptedTransport(script, sum(p.numel() for p in net.parameters()))
    ps = ParameterServer(
        net,
        torch.optim.SGD(net.parameters(), lr=0.01),
        None,
        protocol,
        LRPolicy(),
        MU,
        MU,
        G,
        tr,
        timeout_s=0.5,
        poll_s=0.0,
        tolerate_failures=tolerate,
    )
    ps.run()
    return ps, tr


def drive(gate: Gate, script, lam: int) -> set[int]:
    """The gate driven directly by an arrival order, with the calls each arrival makes in both
    drivers (HELLO: start; PUSH: push, release after an update; the queued step: ready, then
    read and start; STOP: also the learners stranded; a death: drop, release); after the
    script, pending steps in arrival order. Returns the learners stopped."""
    pending: dict[int, str] = {}
    granted: dict[int, tuple[int, int]] = {}
    stopped: set[int] = set()

    def become(l: int, step: str) -> None:
        pending.pop(l, None)
        pending[l] = step

    def stop(l: int) -> None:
        for r in [l, *gate.stranded()]:
            pending.pop(r, None)
            stopped.add(r)

    def start(l: int) -> None:
        ts = gate.root_ts
        s0 = gate.start(l, ts)
        if s0 < 0:
            stop(l)
        else:
            granted[l] = (ts, s0)
            become(l, PUSH)

    def release() -> None:
        for r in gate.release():
            become(r, "read")

    def serve(kind: str, l: int) -> None:
        step = pending.get(l)
        if kind == HELLO:
            start(l)
        elif kind == DIE:
            pending.pop(l, None)
            gate.drop(l)
            release()
        elif kind == PUSH and step == PUSH:
            del pending[l]
            ts, s0 = granted.pop(l)
            if gate.push(Contribution(l, ts, gate.pushed[l], s0, 0.0, 0.0)) is not None:
                release()
            become(l, "ready")
        elif kind == PULL and step == "ready":
            del pending[l]
            d = gate.ready(l)
            if d == STOP:
                stop(l)
            elif d == GRANT:
                become(l, "read")
        elif kind == PULL and step == "read":
            del pending[l]
            if gate.read(l) == GRANT:
                start(l)

    for kind, l in script:
        serve(kind, l)
    while pending:
        l, step = next(iter(pending.items()))
        serve(PUSH if step == PUSH else PULL, l)
    gate.finish()
    return stopped


def _without_starts(trace):
    return [e for e in trace if e[0] != "start"]


def _grants(trace):
    return [e[1:] for e in trace if e[0] == "start" and e[3] >= 0]


def _pushes(trace):
    return [e for e in trace if e[0] == "push"]


# ----------------------------------------------------------------------------- parity
CASES = [
    Protocol("hardsync", LAM),
    Protocol("softsync", LAM, n=2),
    Protocol("async", LAM),
    Protocol("ssp", LAM, staleness_bound=1),
]


@pytest.mark.parametrize("protocol", CASES, ids=lambda p: p.label)
def test_simulator_and_ps_make_the_same_decisions_from_the_same_arrival_order(gates, protocol):
    G = 120
    sched, sim_gate = simulate(protocol, G)
    ps, tr = run_ps(protocol, G, arrivals(sim_gate.trace, LAM))
    ps_gate = gates[1]
    assert tr.after_script == 0  # the PS asked for exactly the steps the simulator scheduled

    sim, real = sim_gate.trace, ps_gate.trace
    # every decision identical until the G-th gradient is handed out (the PS grants at its read)
    last_read = max(i for i, e in enumerate(real) if e[0] == "start" and e[3] >= 0) - 1
    assert real[last_read][0] == "read"
    n = len(_without_starts(real[: last_read + 1]))
    assert _without_starts(sim)[:n] == _without_starts(real)[:n]
    assert sum(e[0] == "push" for e in real[:last_read]) >= G - 2 * LAM  # all but the last round
    # the same G grants (learner, weights, samples) in the same order, the same pushes and updates
    assert _grants(sim) == _grants(real) and len(_grants(real)) == G
    assert _pushes(sim) == _pushes(real)
    log = ps.event_log()
    for col in ("learner", "ts", "clock", "sample_start", "offsets"):
        assert (getattr(log, col) == getattr(sched, col)).all()
    # both stop every learner once
    assert tr.stopped == set(range(LAM))
    sim_stopped = {e[1] for e in sim if (e[0] == "ready" and e[2] == STOP) or (e[0] == "start" and e[3] < 0)}
    assert sim_stopped == set(range(LAM))
    parks = [e for e in sim[:last_read] if e[0] in ("ready", "read") and e[2] == PARK]
    if protocol.barrier or protocol.bound is not None:
        assert parks and ps.stats.parks >= len(parks)  # the barrier / the slow learner held others back
    else:
        assert not parks
    if protocol.bound is not None:
        assert ps.stats.ssp_violations == 0 and ps.stats.ssp_max_lag == 1


@pytest.mark.parametrize(
    "protocol",
    [Protocol("async", LAM), Protocol("ssp", LAM, staleness_bound=1), Protocol("softsync", LAM, n=2)],
    ids=lambda p: p.label,
)
def test_a_learner_dying_mid_run_gives_the_same_decisions_in_both_drivers(gates, protocol):
    """The slow learner dies with a gradient in flight halfway through; the simulator has no
    failures, so its event order (without the victim's later arrivals) drives the gate directly."""
    G = 120
    _, sim_gate = simulate(protocol, G)
    script = arrivals(sim_gate.trace, LAM)
    victim_pushes = [i for i, (k, l) in enumerate(script) if k == PUSH and l == SLOW]
    cut = victim_pushes[len(victim_pushes) // 2]
    script = script[:cut] + [(DIE, SLOW)] + [a for a in script[cut + 1 :] if a[1] != SLOW]

    ps, tr = run_ps(protocol, G, script)
    direct = RecordingGate(protocol, G, MU)
    stopped = drive(direct, script, LAM)

    assert gates[1].trace == direct.trace
    assert ("drop", SLOW, True) in direct.trace  # its in-flight gradient written off
    assert ps.stats.failed_learners == [SLOW + 1] and ps.stats.lost_gradients == 1
    assert tr.stopped == stopped == set(range(LAM)) - {SLOW}
    assert ps.stats.pushes_applied == ps.stats.pushes_received == G - 1  # every handed-out gradient but one
    finish = direct.trace[-1]
    if protocol.gradients_per_update > 1:
        assert finish[1] is not None and len(finish[1]) == 1  # the partial last update
    else:
        assert finish == ("finish", None)
    if protocol.bound is not None:
        i = direct.trace.index(("drop", SLOW, True))
        assert direct.trace[i + 1][0] == "release" and direct.trace[i + 1][1]  # the others no longer wait for it
        assert ps.stats.ssp_violations == 0


# ----------------------------------------------------------------------------- the rules
def _random_order(protocol: Protocol, G: int, seed: int, slow: int = 0, factor: float = 6.0):
    """A gate driven by a seeded random arrival order in which learner ``slow`` is ``factor``× rarer."""
    gate = RecordingGate(protocol, G, 1)
    rng = random.Random(seed)
    lam = protocol.learners
    script = [(HELLO, l) for l in range(lam)]
    weights = [1.0 / factor if l == slow else 1.0 for l in range(lam)]
    for _ in range(12 * G):
        l = rng.choices(range(lam), weights=weights)[0]
        script.append((rng.choice((PUSH, PULL)), l))
    drive(gate, script, lam)
    return gate


@pytest.mark.parametrize("s", [0, 1, 3])
def test_ssp_bound_holds_on_every_grant(s):
    """Kumar et al. §3.1: a learner at clock k computes only with all its own pushes applied and
    k − (slowest applied clock) ≤ s; with one slow learner the others reach the bound and park."""
    trace = _random_order(Protocol("ssp", 4, staleness_bound=s), 300, seed=s).trace
    pushed, applied, lags = [0] * 4, [0] * 4, []
    for e in trace:
        if e[0] == "push":  # c = 1: applied on arrival
            pushed[e[1]] += 1
            applied[e[1]] += 1
        elif e[0] == "start" and e[3] >= 0:
            l = e[1]
            assert applied[l] == pushed[l]
            lags.append(pushed[l] - min(applied))
    assert len(lags) == 300 and max(lags) == s  # reached, never exceeded
    assert any(e[0] == "ready" and e[2] == PARK for e in trace)


def test_hardsync_barrier_gives_zero_staleness_and_one_gradient_per_learner_per_update():
    """Rudra Eq 3: c = λ and no learner computes twice on the same weights, so σ ≡ 0."""
    gate = _random_order(Protocol("hardsync", 4), 200, seed=1)
    updates = [e[5] for e in gate.trace if e[0] == "push" and e[5] is not None]
    assert len(updates) == 50 and gate.staleness.max == 0
    for i, rows in enumerate(updates):
        assert sorted(r[0] for r in rows) == [0, 1, 2, 3] and {r[2] for r in rows} == {i}
    assert any(e[0] == "read" and e[2] == PARK for e in gate.trace)


def test_softsync_collects_exactly_c_gradients_per_update_and_rounds_G_down():
    """Rudra Eq 5: c = ⌊λ/n⌋ gradients per update; G is rounded down to a multiple of c."""
    p = Protocol("softsync", 4, n=2)
    gate = Gate(p, 9)
    assert gate.c == 2 and gate.G == 8
    assert gate.start(0, 0) == 0 and gate.start(1, 0) == 1
    assert gate.push(Contribution(0, 0, 0, 0, 0.0, 0.0)) is None and gate.root_ts == 0
    group = gate.push(Contribution(1, 0, 0, 1, 0.0, 0.0))
    assert [g.learner for g in group] == [0, 1] and gate.root_ts == 1 and gate.staleness.updates == 1
    trace = _random_order(p, 101, seed=2).trace
    sizes = [len(e[5]) for e in trace if e[0] == "push" and e[5] is not None]
    assert sizes == [2] * 50


def test_the_budget_stops_learners_after_G_gradients():
    gate = Gate(Protocol("async", 2), 3, samples_per_gradient=5)
    assert [gate.start(0, 0), gate.start(1, 0), gate.start(0, 0)] == [0, 5, 10]
    assert gate.start(1, 0) == -1 and gate.ready(1) == STOP and gate.started == 3
    gate = Gate(Protocol("async", 2), 10)
    gate.start(0, 0)
    gate.halt()  # a diverged run
    assert gate.start(1, 0) == -1 and gate.ready(0) == STOP


def test_a_dead_learner_leaves_the_ssp_minimum_and_its_gradient_is_written_off():
    p = Protocol("ssp", 2, staleness_bound=0)
    gate = Gate(p, 100)
    gate.start(0, 0)
    gate.start(1, 0)
    gate.push(Contribution(1, 0, 0, 1, 0.0, 0.0))
    assert gate.ready(1) == PARK  # clock 1, learner 0 still at 0: 1 − 0 > s
    assert gate.release() == [] and gate.parked == [1]
    assert gate.drop(0) is True and gate.lost == 1  # it died computing
    assert gate.release() == [1] and gate.ready(1) == GRANT  # the minimum is over live learners
    assert gate.drop(1) is False


def test_a_learner_parked_when_the_budget_runs_out_is_stopped_not_left_waiting(gates):
    """SSP s = 0: learner 1 runs a clock ahead and parks; the last gradient goes to learner 0, so
    learner 2 — the slowest — is stopped at its read and learner 1 could never be released."""
    p = Protocol("ssp", 3, staleness_bound=0)
    script = [
        (HELLO, 0),
        (HELLO, 1),
        (HELLO, 2),
        (PUSH, 2),
        (PUSH, 1),
        (PUSH, 0),
        (PULL, 2),
        (PULL, 1),
        (PULL, 1),
        (PUSH, 1),
        (PULL, 1),
        (PULL, 0),
        (PULL, 0),
        (PULL, 2),
    ]
    direct = RecordingGate(p, 5, MU)
    assert drive(direct, script, 3) == {0, 1, 2}
    assert ("ready", 1, PARK) in direct.trace and ("stranded", (1,)) in direct.trace
    ps, tr = run_ps(p, 5, script, tolerate=False)  # a learner left waiting would time out the run
    assert gates[0].trace == direct.trace and tr.stopped == {0, 1, 2} and ps.stats.updates == 5


def test_the_partial_last_update_applies_what_is_left():
    gate = Gate(Protocol("softsync", 4, n=1), 8)  # c = 4
    assert gate.finish() is None
    for l in range(3):
        gate.start(l, 0)
        assert gate.push(Contribution(l, 0, 0, l, 0.0, 0.0)) is None
    group = gate.finish()
    assert [g.learner for g in group] == [0, 1, 2] and gate.root_ts == 1 and gate.staleness.gradients == 3
    assert gate.finish() is None


def test_the_gate_and_the_simulator_import_neither_torch_nor_an_executor():
    code = (
        "import sys, psbench.ps.gate, psbench.ps.simulator; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('psbench.strategy', 'psbench.distributed', "
        "'psbench.train'))]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
