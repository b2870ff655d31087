"""Acceptance tests of the simulation core (issue: Simulation core).

Papers: Rudra §3.1 (Eqs 2–5), §5.1 / Fig 4, Table 1, Fig 8b; Zhang §2.4 / Fig 1;
Kumar et al. §3.1 (SSP conditions 1–4).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule, Simulator

CIFAR_CNN_BYTES = 4 * 89_578  # Rudra §4.2: ~90 K parameters, ~350 kB


def homogeneous_cost(**kw) -> CostModel:
    """Rudra's cluster in the regime of Fig 4 / Zhang Fig 1: compute-bound homogeneous learners
    on a fast interconnect (the PS is not saturated), CIFAR CNN at μ = 4."""
    base = dict(
        compute=ComputeModel(1.46e-2, 3.09e-3),
        message_bytes=CIFAR_CNN_BYTES,
        bandwidth_Bps=3e10,
        latency_s=2e-6,
        ps_service_s=5e-6,
        ps_apply_Bps=2e10,
        jitter_cv=0.05,
    )
    base.update(kw)
    return CostModel(**base)


def simulate(
    protocol: Protocol,
    gradients: int,
    cost: CostModel | None = None,
    topology: str = "rudra_base",
    mu: int = 4,
    seed: int = 0,
    **topo,
) -> tuple[Schedule, Simulator]:
    sim = Simulator(protocol, cost or homogeneous_cost(), Topology(topology, **topo), mu, gradients, seed)
    return Schedule.collect(sim.run()), sim


def test_hardsync_has_zero_staleness_and_full_groups():
    sched, sim = simulate(Protocol("hardsync", 30), 30_000)
    assert sched.num_updates == 1000
    assert (np.diff(sched.offsets) == 30).all()
    assert (sched.staleness == 0).all() and sim.stats.staleness.max == 0
    # every learner contributes exactly once per update, all on the update's weights (Eq 3)
    for i in (0, 500, 999):
        s = sched.rows(i)
        assert sorted(sched.learner[s].tolist()) == list(range(30))
        assert (sched.ts[s] == i).all()


def test_one_softsync_staleness_is_0_1_2_with_mean_near_1():
    sched, sim = simulate(Protocol("softsync", 30, n=1), 60_000)
    st = sim.stats.staleness
    assert set(np.unique(sched.staleness).tolist()) <= {0, 1, 2}
    assert abs(st.mean - 1.0) <= 0.2
    assert (np.diff(sched.offsets) == 30).all()  # c = ⌊λ/n⌋ = 30 gradients per update (Eq 5)


@pytest.mark.parametrize("n", [2, 4, 10, 30])
def test_n_softsync_mean_staleness_is_n(n):
    sched, sim = simulate(Protocol("softsync", 30, n=n), 60_000)
    st = sim.stats.staleness
    assert abs(st.mean - n) <= 0.15 * n, st.mean
    assert (np.diff(sched.offsets) == 30 // n).all()
    # Eq 2: the per-update ⟨σ⟩ averaged with weights c equals the per-gradient mean
    assert st.mean == pytest.approx(sched.staleness.mean())


def test_async_tail_beyond_2n_is_below_1e_4():
    _, sim = simulate(Protocol("async", 30), 120_000)
    st = sim.stats.staleness
    assert st.gradients >= 100_000
    assert st.tail(60) < 1e-4
    assert abs(st.mean - 30) <= 0.15 * 30


def test_async_is_30_softsync():
    a, _ = simulate(Protocol("async", 30), 3_000)
    b, _ = simulate(Protocol("softsync", 30, n=30), 3_000)
    assert a.sha256() == b.sha256()


def test_samples_are_consumed_exactly_once_in_order():
    sched, _ = simulate(Protocol("softsync", 8, n=2), 4_000, mu=4)
    starts = np.sort(sched.sample_start)
    assert (starts == np.arange(len(starts)) * 4).all()
    # no lost updates: every learner's clocks are 0..k-1 with no gaps or repeats
    for l in range(8):
        clocks = np.sort(sched.clock[sched.learner == l])
        assert (clocks == np.arange(len(clocks))).all()


def ssp_violations(sched: Schedule, learners: int, s: int) -> int:
    """Count reads that break SSP condition 3 or read-my-writes (Kumar et al. §3.1), from the schedule alone.

    Weights of timestamp t hold every gradient of updates 0..t−1, i.e. schedule rows [0, offsets[t]).
    A gradient with clock k read at timestamp t must hold every learner's updates with clock ≤ k−s−1
    (at least k−s of each learner's gradients) and all k of its own.
    """
    onehot = np.zeros((sched.num_gradients + 1, learners), dtype=np.int64)
    onehot[np.arange(1, sched.num_gradients + 1), sched.learner] = 1
    cum = np.cumsum(onehot, axis=0)[sched.offsets]  # cum[t, p]: p's gradients in weights of timestamp t
    seen_min = cum.min(axis=1)[sched.ts]
    seen_own = cum[sched.ts, sched.learner]
    return int(((seen_min < sched.clock - s) | (seen_own != sched.clock)).sum())


@pytest.mark.parametrize("topology", ["rudra_base", "rudra_adv", "rudra_adv_star"])
def test_ssp_bound_holds_on_every_read_with_stragglers(topology):
    lam, s = 8, 2
    cost = homogeneous_cost(straggler_fraction=0.25, straggler_slowdown=3.0, jitter_cv=0.3)
    sched, _ = simulate(Protocol("ssp", lam, staleness_bound=s), 100_000, cost, topology, learners_per_node=4)
    assert sched.num_gradients >= 100_000
    assert ssp_violations(sched, lam, s) == 0
    # the stragglers really hold the others back: clocks never drift more than s + 1 apart
    order = np.argsort(sched.t_start, kind="stable")
    assert sched.clock.max() - sched.clock.min() > s  # sanity: the run is long
    clocks_at_start = np.zeros(lam, dtype=np.int64)
    worst = 0
    for g in order[:20_000]:
        clocks_at_start[sched.learner[g]] = sched.clock[g]
        worst = max(worst, int(clocks_at_start.max() - clocks_at_start.min()))
    assert worst <= s + 1
    # and without the bound (async) the same stragglers break it
    free, _ = simulate(Protocol("async", lam), 20_000, cost, topology, learners_per_node=4)
    counts = np.bincount(free.learner, minlength=lam)
    assert counts.max() - counts.min() > s + 1


def test_ssp_checker_detects_violations():
    """The invariant checker is not vacuous: async with stragglers violates SSP(s=2)."""
    cost = homogeneous_cost(straggler_fraction=0.25, straggler_slowdown=3.0)
    sched, _ = simulate(Protocol("async", 8), 5_000, cost)
    assert ssp_violations(sched, 8, 2) > 0


def test_ssp_with_zero_bound_behaves_as_hardsync():
    """s = 0: every gradient of clock k is computed on weights holding exactly the updates of clocks < k —
    the information set of hardsync round k (applied one gradient at a time, as SSP updates are additive)."""
    lam = 6
    cost = homogeneous_cost(straggler_fraction=0.34, straggler_slowdown=2.0, jitter_cv=0.3)
    sched, _ = simulate(Protocol("ssp", lam, staleness_bound=0), 6_000, cost)
    assert ssp_violations(sched, lam, 0) == 0
    assert (sched.ts == sched.clock * lam).all()
    hard, _ = simulate(Protocol("hardsync", lam), 6_000, cost)
    assert (hard.ts == hard.clock).all()  # the same rounds, one update per round


def test_same_seed_same_hash_other_seed_same_distribution():
    p = Protocol("softsync", 30, n=4)
    a, sa = simulate(p, 40_000, seed=1)
    b, _ = simulate(p, 40_000, seed=1)
    c, sc = simulate(p, 40_000, seed=2)
    assert a.sha256() == b.sha256()
    assert a.sha256() != c.sha256()
    assert not np.array_equal(a.t_start, c.t_start)  # different jitter
    assert abs(sa.stats.staleness.mean - sc.stats.staleness.mean) < 0.05 * 4
    ha, hc = np.bincount(a.staleness, minlength=12)[:12], np.bincount(c.staleness, minlength=12)[:12]
    assert np.abs(ha / ha.sum() - hc / hc.sum()).max() < 0.02


def test_ps_jitter_is_seeded_leaves_compute_draws_alone_and_spreads_staleness_of_a_busy_ps():
    """``ps_jitter_cv``: mean-one noise on the PS's busy periods (engine=dist calibration fits it)."""
    p = Protocol("async", 8)
    busy = homogeneous_cost(compute=ComputeModel(1e-3, 1e-6), ps_service_s=3e-4, jitter_cv=0.1)  # PS-bound
    plain, s0 = simulate(p, 20_000, busy)
    assert simulate(p, 20_000, replace(busy, ps_jitter_cv=0.0))[0].sha256() == plain.sha256()  # off = as before
    a, sa = simulate(p, 20_000, replace(busy, ps_jitter_cv=1.0))
    b, _ = simulate(p, 20_000, replace(busy, ps_jitter_cv=1.0))
    assert a.sha256() == b.sha256() != plain.sha256()
    # the learners draw from their own streams: same compute total up to which learner takes the last gradients
    assert abs(sa.stats.compute_s / s0.stats.compute_s - 1) < 1e-3
    assert abs(sa.stats.sim_time_s / s0.stats.sim_time_s - 1) < 0.1  # mean-one: throughput about the same
    assert a.staleness.std() > 1.5 * plain.staleness.std()
    with pytest.raises(ConfigError, match=r"hardware\.ps_jitter_cv"):
        replace(busy, ps_jitter_cv=-0.5)


def test_schedule_roundtrips_through_a_file(tmp_path):
    sched, _ = simulate(Protocol("softsync", 10, n=2), 2_000)
    sched.meta = {"protocol": "2-softsync", "seed": 0}
    loaded = Schedule.load(sched.save(tmp_path / "schedule.npz"))
    assert loaded.sha256() == sched.sha256()
    assert [u.contributions for u in loaded][:5] == [u.contributions for u in sched][:5]


def test_comm_overlap_orders_as_rudra_table_1():
    """Adversarial case of Table 1: 300 MB model, μ = 4, 60 learners, 4 per node (1-softsync)."""
    overlap = {}
    for topo in ("rudra_base", "rudra_adv", "rudra_adv_star"):
        cost = CostModel.from_profile("p775", message_bytes=300_000_000, overhead_s=0.1, per_sample_s=0.15)
        _, sim = simulate(Protocol("softsync", 60, n=1), 3_000, cost, topo, learners_per_node=4)
        overlap[topo] = sim.stats.comm_overlap
    assert overlap["rudra_base"] < overlap["rudra_adv"] < overlap["rudra_adv_star"], overlap
    assert overlap["rudra_adv_star"] > 0.95


def test_one_softsync_is_faster_than_lambda_softsync_at_mu_4():
    """Rudra §5.2 / Fig 8b / Table 2: at μ = 4, λ = 30 on Rudra-base 1-softsync (1,573 s) beats 30-softsync
    (2,073 s): fewer pulls and updates at the PS."""
    cost = CostModel.from_profile("p775", message_bytes=CIFAR_CNN_BYTES)
    _, one = simulate(Protocol("softsync", 30, n=1), 30_000, cost)
    _, lam = simulate(Protocol("softsync", 30, n=30), 30_000, cost)
    assert one.stats.sim_time_s < lam.stats.sim_time_s
    assert one.stats.pulls_skipped > lam.stats.pulls_skipped
    ratio = lam.stats.sim_time_s / one.stats.sim_time_s
    assert 1.1 < ratio < 1.6  # the paper's ratio is 2073 / 1573 = 1.32


_PEAK_RSS = """
import sys
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.ps import Protocol, Simulator
lam, gradients = int(sys.argv[1]), int(sys.argv[2])
cost = CostModel(compute=ComputeModel(1.46e-2, 3.09e-3), message_bytes=358_312, bandwidth_Bps=3e10,
                 ps_service_s=5e-6, ps_apply_Bps=2e10)
sim = Simulator(Protocol("softsync", lam, n=10), cost, Topology(), 4, gradients, 0)
updates = sum(1 for _ in sim.run())
assert sim.stats.staleness.gradients == gradients, sim.stats.staleness.gradients
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(updates, int(hwm) * 1024)
"""


def peak_rss(learners: int, gradients: int) -> tuple[int, int]:
    """(updates, peak resident bytes) of a fresh process that streams a whole schedule."""
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(learners), str(gradients)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_streaming_keeps_memory_bounded():
    """λ = 1,000: ten times more gradients cost no more memory (the generator keeps no history)."""
    (_, small), (updates, large) = peak_rss(1000, 20_000), peak_rss(1000, 200_000)
    assert updates == 2_000
    assert large - small < 8e6, (small, large)


@pytest.mark.slow
def test_thousand_learners_million_gradients_streamed():
    (_, base), (updates, peak) = peak_rss(1000, 20_000), peak_rss(1000, 1_000_000)
    assert updates == 10_000
    assert peak - base < 8e6, (base, peak)


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: Protocol("softsync", 4, n=0), "protocol.n"),
        (lambda: Protocol("softsync", 4, n=5), "protocol.n"),
        (lambda: Protocol("hardsync", 0), "learners"),
        (lambda: Protocol("ssp", 4, staleness_bound=-1), "protocol.staleness_bound"),
        (lambda: Protocol("hardsync", 4, n=2), "protocol.n"),
        (lambda: Protocol("gossip", 4), "protocol.name"),
        (lambda: Simulator(Protocol("async", 4), CostModel(), Topology(), -1, 100), "batch_size"),
        (lambda: Simulator(Protocol("async", 4), CostModel(), Topology(), 0, 100), "batch_size"),
        (lambda: CostModel(bandwidth_Bps=0), "hardware.bandwidth_Bps"),
        (lambda: CostModel(straggler_fraction=1.5), "hardware.stragglers.fraction"),
        (lambda: Topology("ring"), "topology.name"),
        (lambda: LRPolicy("adaptive"), "lr_policy.name"),
        (lambda: CostModel.from_profile("cray", 10), "hardware.name"),
    ],
)
def test_bad_parameters_name_the_key_and_the_allowed_range(make, key):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.key == key
    msg = str(err.value)
    assert msg.startswith(f"{key}=") and "allowed" in msg and "\n" not in msg


def test_lr_policies_per_gradient_scales():
    sig = [0, 1, 2, 4]
    assert LRPolicy("constant").scales(sig, 4, 30) == [1.0] * 4
    assert LRPolicy("sqrt_scaling", reference_batch=128).scales(sig, 4, 32) == [1.0] * 4  # √(4·32/128)
    assert LRPolicy("sqrt_scaling", reference_batch=128).scales([0], 8, 64)[0] == pytest.approx(2.0)
    assert LRPolicy("mean_staleness").scales(sig, 4, 30) == [1 / 1.75] * 4  # Rudra Eq 6
    assert LRPolicy("mean_staleness").scales([0, 0], 4, 30) == [1.0, 1.0]  # hardsync keeps α0
    assert LRPolicy("per_gradient").scales(sig, 4, 30) == [1.0, 1.0, 0.5, 0.25]  # Zhang Eq 3, τ=0 → 1
    assert LRPolicy("per_gradient", zero_staleness=0.5).scales([0], 4, 30) == [2.0]
    assert LRPolicy("dynsgd").scales(sig, 4, 30) == [1.0, 0.5, 1 / 3, 0.2]
    assert LRPolicy("exponential", decay=0.5).scales(sig, 4, 30) == [1.0, 0.5, 0.25, 0.0625]


@pytest.mark.parametrize(("protocol", "n", "want"), [("softsync", 4, 0.25), ("async", 2, 0.5), ("hardsync", 0, 1.0)])
def test_nominal_staleness_is_eq_6_as_written_whatever_the_measured_staleness(protocol, n, want):
    """Rudra Eq 6 as printed, α0/n: the update's own σ does not enter (2-softsync here measures ⟨σ⟩ ≈ 1, not 2)."""
    policy = LRPolicy("nominal_staleness").for_protocol(protocol, n)
    assert policy.scales([0, 1, 2], 4, 30) == policy.scales([7], 4, 30)[:1] * 3 == [want] * 3
    assert LRPolicy("mean_staleness").for_protocol(protocol, n) == LRPolicy("mean_staleness")  # others need no n
    with pytest.raises(ConfigError, match="lr_policy='nominal_staleness' is invalid"):
        LRPolicy("nominal_staleness").for_protocol("ssp", 30)


def test_compute_model_interpolates_calibration_points():
    m = ComputeModel(points=((1, 0.010), (4, 0.016), (16, 0.040)))
    assert m.seconds(4) == pytest.approx(0.016)
    assert m.seconds(10) == pytest.approx(0.028)
    assert m.seconds(32) == pytest.approx(0.072)  # linear extrapolation of the last segment
    assert ComputeModel(0.01, 0.001).seconds(10) == pytest.approx(0.02)


def test_stragglers_are_seeded_and_slow():
    cost = homogeneous_cost(straggler_fraction=0.25, straggler_slowdown=4.0, jitter_cv=0.0)
    sched, _ = simulate(Protocol("async", 8), 8_000, cost)
    counts = np.bincount(sched.learner, minlength=8)
    slow = counts < counts.max() / 2
    assert slow.sum() == 2  # a quarter of the learners, ~4x fewer gradients
    sched2, _ = simulate(Protocol("async", 8), 8_000, cost)
    assert (np.bincount(sched2.learner, minlength=8) == counts).all()
