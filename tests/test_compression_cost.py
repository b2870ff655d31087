"""Push and pull bytes feed the cost model: exact counts in the simulator, transfer times from payload sizes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.compression.pipeline import LearnerCompression
from psbench.ps import Protocol, Schedule, Simulator

BASE = CostModel(compute=ComputeModel(1e-3, 1e-5), message_bytes=4_000_000, bandwidth_Bps=1e8, jitter_cv=0.1)


def simulate(cost: CostModel, proto: Protocol, topology: str = "rudra_base", gradients: int = 400):
    sim = Simulator(proto, cost, Topology(topology), 16, gradients, 0)
    sched = Schedule.collect(sim.run())
    return sim.stats, sched


def test_default_push_and_pull_equal_message_bytes():
    a, sa = simulate(BASE, Protocol("softsync", 8, n=2))
    b, sb = simulate(
        replace(BASE, push_bytes=BASE.message_bytes, pull_bytes=BASE.message_bytes), Protocol("softsync", 8, n=2)
    )
    assert sa.sha256() == sb.sha256() and a.as_dict() == b.as_dict()


@pytest.mark.parametrize("topology", ["rudra_base", "rudra_adv", "rudra_adv_star"])
def test_push_and_pull_bytes_are_counted_separately_and_exactly(topology):
    push, pull = 250_004, 1_000_000
    st, sched = simulate(replace(BASE, push_bytes=push, pull_bytes=pull), Protocol("hardsync", 8), topology)
    assert st.bytes_pushed == sched.num_gradients * (push + 8)
    full = st.pulls - st.pulls_skipped
    assert st.bytes_pulled == full * (pull + 8) + st.pulls_skipped * 8


def test_smaller_payloads_shorten_simulated_time_on_a_slow_link():
    proto = Protocol("hardsync", 8)
    fp32, _ = simulate(BASE, proto)
    tern, _ = simulate(
        replace(BASE, push_bytes=BASE.message_bytes // 16, pull_bytes=BASE.message_bytes // 8, pull_delta=True), proto
    )
    assert tern.sim_time_s < 0.5 * fp32.sim_time_s


def test_localized_pulls_carry_one_delta_per_missed_update():
    pull = 100_000
    st, _ = simulate(replace(BASE, push_bytes=10, pull_bytes=pull, pull_delta=True), Protocol("hardsync", 4))
    assert st.bytes_pulled == (st.pulls - st.pulls_skipped) * (pull + 8) + st.pulls_skipped * 8  # σ = 0: one each
    cost = replace(BASE, pull_bytes=pull, pull_delta=True)
    assert cost.pull_wire_bytes(3) == 3 * pull + 8
    assert cost.pull_wire_bytes(10_000) == BASE.message_bytes + 8  # never more than the fp32 weights


def test_pipeline_sizes_are_what_the_cost_model_gets():
    shapes = {"a.weight": (1000, 100), "a.bias": (1000,), "b.weight": (10, 1000), "b.bias": (10,)}
    n = sum(int(math.prod(s)) for s in shapes.values())
    lc = LearnerCompression({"name": "terngrad", "wire": "2bit", "localize": True, "share_scalers": True}, shapes)
    assert lc.model_bytes == 4 * n
    push = lc.push_bytes()
    assert push == sum(-(-int(math.prod(s)) // 4) + 4 for s in shapes.values()) + 4 * 4
    assert lc.pull_bytes(1) < lc.pull_bytes(4) < lc.model_bytes  # [−N, N] needs more bits as N grows
