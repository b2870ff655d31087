"""The cluster terms of the cost model: PS link contention, a sharded PS, node sharing,
the hardsync barrier's straggler cost, the PS tree's overlap — and the ``p775_cluster`` profile's fits
against the papers' published timings (psbench.calibration.paper_fit)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from psbench.calibration.paper_fit import checks
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.cluster.cost import PROFILES
from psbench.errors import ConfigError
from psbench.ps import Protocol, Schedule, Simulator

MB = 1_000_000
REPO = Path(__file__).resolve().parents[1]


def quiet(**kw) -> CostModel:
    """No noise, no latency: every time below is a closed-form sum of the terms under test."""
    base = dict(
        compute=ComputeModel(1e-2, 0.0, ((1, 1e-2),)),
        message_bytes=30 * MB,
        bandwidth_Bps=3e10,
        latency_s=0.0,
        ps_service_s=1e-4,
        ps_apply_Bps=1e12,
        jitter_cv=0.0,
    )
    base.update(kw)
    return CostModel(**base)


def schedule(
    proto: Protocol, cost: CostModel, gradients: int, topology: str = "rudra_base", mu: int = 1, seed: int = 0
) -> tuple[Schedule, Simulator]:
    sim = Simulator(proto, cost, Topology(topology), mu, gradients, seed)
    return Schedule.collect(sim.run()), sim


def test_contention_queues_concurrent_pushes_each_slower_behind_more():
    wire = 30 * MB + CostModel.TIMESTAMP_BYTES
    x = wire / 3e10
    for beta in (0.0, 0.7):
        sched, _ = schedule(Protocol("hardsync", 4), quiet(contention=beta), 4)
        pushes = np.sort(sched.t_push)  # four pushes arrive together: the q-th waits behind q − 1 others
        assert pushes[0] == pytest.approx(1e-2 + 1e-4 + x)  # the first finds the root idle
        assert np.diff(pushes) == pytest.approx([1e-4 + x * (1 + beta * q) for q in (1, 2, 3)])


def test_contention_fitted_on_rudra_s_16_tasks_sending_300_mb():
    """§3.3: 16 × 300 MB to one receiver take over a second (alone: 10 ms) → β = 0.7, the p775_cluster value;
    tested on Table 1: Rudra-base's overlap falls from ~68 % to the paper's ~12 %, adv* keeps its ≥ 99 %."""
    from psbench.calibration.paper_fit import fit_contention, table1_overlap

    beta = fit_contention()
    assert beta == pytest.approx(0.7, abs=0.01)
    assert CostModel.from_profile("p775_cluster", MB).contention == pytest.approx(beta, abs=0.01)
    base = table1_overlap("rudra_base", per_learner=30)
    assert abs(base - 11.52) <= 15 < abs(table1_overlap("rudra_base", per_learner=30, contention=0.0) - 11.52)
    assert table1_overlap("rudra_adv_star", per_learner=30) >= 99


def test_leaf_gather_relays_one_average_per_node():
    """Rudra §3.3: a leaf PS averages the gradients of its node's learners and relays that average — every
    relay the root receives holds one gradient per learner of one node; off, a leaf relays whatever it holds."""
    proto = Protocol("softsync", 10, n=1)  # 10 learners, 4 per node: nodes of 4, 4 and 2
    cost = quiet(message_bytes=3 * MB)
    for gather in (True, False):
        sched = Schedule.collect(Simulator(proto, cost, Topology("rudra_adv", leaf_gather=gather), 1, 400).run())
        assert len(sched.learner) == 400  # every gradient reaches the root
        relays: dict[float, list[int]] = {}  # a relay's gradients share their arrival time at the root
        for t, l in zip(sched.t_push.tolist(), sched.learner.tolist(), strict=True):
            relays.setdefault(t, []).append(l)
        nodes = [sorted({l // 4 for l in ls}) for ls in relays.values()]
        if gather:
            assert all(len(n) == 1 for n in nodes)  # one node per relay
            assert all(len(ls) == (2 if n == [2] else 4) for ls, n in zip(relays.values(), nodes, strict=True))
            assert len(relays) == 400 * 3 // 10  # 3 relays per 10 gradients
        else:  # the first push of a round leaves alone, the others wait for it: more, smaller relays
            assert min(len(ls) for ls in relays.values()) == 1 and len(relays) > 400 * 3 // 10


def test_leaf_gather_is_what_lets_rudra_adv_survive_contention():
    """With contention on, a Rudra-adv whose leaves relay every gradient alone is as contended as Rudra-base
    (Table 1 overlap ~7 %); averaging per node (§3.3) brings it back within ±15 pp of the paper's 56.75 %."""
    from psbench.calibration.paper_fit import table1_overlap

    alone = table1_overlap("rudra_adv", leaf_gather=False)
    gathered = table1_overlap("rudra_adv")  # 100 gradients per learner: past the start-up transient
    assert alone < 20 and abs(gathered - 56.75) <= 15


def test_sharded_ps_gives_k_times_the_ps_bandwidth_and_apply_rate():
    cost = quiet(compute=ComputeModel(1e-5, 0.0, ((1, 1e-5),)), ps_service_s=0.0, ps_apply_Bps=3e9)
    assert replace(cost, ps_shards=4).apply_s == pytest.approx(cost.apply_s / 4)
    assert replace(cost, ps_shards=4).root_rate() == 4 * cost.root_rate()
    times = {}
    for k in (1, 2, 4):  # PS-bound: 8 learners, a 30 MB model, 10 µs of compute
        _, sim = schedule(Protocol("async", 8), replace(cost, ps_shards=k), 800)
        times[k] = sim.stats.sim_time_s
    assert times[1] / times[2] == pytest.approx(2, rel=0.02)
    assert times[1] / times[4] == pytest.approx(4, rel=0.04)


def test_colocated_shards_keep_each_machines_slice_local():
    """SSP's Petuum server: one shard per machine. One machine moves its messages at the intra-node rate; n
    machines' messages cross n − 1 links in parallel, so the PS-bound throughput scales with n."""
    cost = quiet(ps_colocated=True, intra_node_bandwidth_Bps=1.2e11)
    assert cost.root_rate() == 1.2e11 and replace(cost, ps_shards=6).root_rate() == 6 * 3e10
    ssp = quiet(
        compute=ComputeModel(0.0, 1.549e-3), message_bytes=4 * 25_821_137, bandwidth_Bps=1.25e9, ps_apply_Bps=4e9
    )  # the SSP preset's TIMIT net: 10 Gbit/s, 6·P/1e11 s per sample
    rate = {}
    for k, colocated in ((1, False), (6, False), (6, True)):
        shards = k if colocated else 1
        _, sim = schedule(
            Protocol("ssp", k, staleness_bound=10),
            replace(ssp, ps_shards=shards, ps_colocated=colocated),
            k * 60,
            mu=100,
        )
        rate[(k, colocated)] = sim.total_gradients / sim.stats.sim_time_s
    one = rate[(1, False)]
    assert rate[(6, False)] / one < 2  # one 10 Gbit/s link for six machines: communication-bound
    assert rate[(6, True)] / one > 5  # six shards


def test_node_share_slows_learners_by_how_many_share_their_node():
    cost = quiet(node_share=0.05)
    assert cost.node_factors(Topology().node_sizes(10)) == pytest.approx([1.15] * 8 + [1.05] * 2)
    assert replace(cost, node_share=0.0).node_factors(Topology().node_sizes(3)) == [1.0] * 3
    sched, _ = schedule(Protocol("hardsync", 4), cost, 4)
    assert sched.t_push.min() == pytest.approx(1.15e-2 + 1e-4 + (30 * MB + 8) / 3e10)
    sched1, _ = schedule(Protocol("hardsync", 1), cost, 1)  # alone on its node: no slowdown
    assert sched1.t_push[0] == pytest.approx(1e-2 + 1e-4 + (30 * MB + 8) / 3e10)


def test_footnote_4_spreads_the_learners_evenly_over_its_nodes():
    """Rudra footnote 4: (λ, nodes) = (10, 4), (18, 4), (30, 8) — 3,3,2,2 / 5,5,4,4 / 4×6 + 3×2 learners per node;
    a hardsync round waits for the most crowded node's learners, a node of 3 computes 1 + 2·node_share slower."""
    assert Topology(nodes=4).node_sizes(10) == [3, 3, 2, 2]
    assert Topology(nodes=4).node_sizes(18) == [5, 5, 4, 4]
    assert Topology(nodes=8).node_sizes(30) == [4] * 6 + [3] * 2
    assert Topology(nodes=8).node_sizes(4) == [1] * 4  # at most one node per learner
    assert Topology().node_sizes(10) == [4, 4, 2] and Topology(learners_per_node=6).node_sizes(30) == [6] * 5
    assert Topology("rudra_adv", leaf_gather=True, nodes=4).gather(10) == [3, 3, 2, 2]
    assert Topology(nodes=4).node_of(10) == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]
    cost = quiet(node_share=0.05)
    assert cost.node_factors(Topology(nodes=4).node_sizes(10)) == pytest.approx([1.1] * 6 + [1.05] * 4)
    first, rounds = {}, {}
    for topo in (Topology(), Topology(nodes=4)):  # nodes of 4, 4, 2 or 3, 3, 2, 2: a node of 2 pushes first
        sim = Simulator(Protocol("hardsync", 10), cost, topo, 1, 100)
        sched = Schedule.collect(sim.run())
        first[topo.nodes], rounds[topo.nodes] = sched.t_push.min(), sim.stats.sim_time_s
    assert first[None] == first[4] == pytest.approx(1e-2 * 1.05 + 1e-4 + (30 * MB + 8) / 3e10)
    assert rounds[4] < rounds[None]  # every round waits for the most crowded node: 1.1 against 1.15


def test_node_share_is_fitted_with_footnote_4s_packing():
    """Table 2's (1, 128, 10) runs λ = 10 on 4 nodes (3, 3, 2, 2): the fit gives the profile's 7.67 % per extra
    learner; 4 per node (4, 4, 2), the packing assumed before, needs only 4.71 % for the same 2,551 s."""
    from psbench.calibration.paper_fit import CIFAR_BYTES, _bisect, _proto, seconds_per_sample

    def t(b: float, nodes: int | None) -> float:
        cost = CostModel.from_profile("p775_cluster", CIFAR_BYTES, node_share=b)
        return seconds_per_sample(_proto(1, 10), cost, "rudra_base", 128, 50, nodes=nodes) * 50_000 * 140

    assert _bisect(lambda b: t(b, 4), 0.0, 0.5, 2551) == pytest.approx(PROFILES["p775_cluster"]["node_share"], rel=0.02)
    assert _bisect(lambda b: t(b, None), 0.0, 0.5, 2551) == pytest.approx(0.047, rel=0.05)


@pytest.mark.parametrize("bad", [{"ps_shards": 0}, {"node_share": -0.1}, {"contention": -0.5}])
def test_cluster_terms_reject_bad_values(bad):
    with pytest.raises(ConfigError):
        quiet(**bad)


def test_hardsync_barrier_cost_grows_with_lambda_as_the_expected_max():
    """Hardsync waits for the slowest of λ: the update interval over one compute time is E[max of λ factors]."""
    cv = 0.3
    var = np.log1p(cv**2)
    draws = np.random.default_rng(1).lognormal(-var / 2, np.sqrt(var), (20_000, 16))
    cost = quiet(compute=ComputeModel(1.0, 0.0, ((1, 1.0),)), message_bytes=8, ps_service_s=0.0, jitter_cv=cv)
    per_update = {}
    for lam in (1, 4, 16):
        _, sim = schedule(Protocol("hardsync", lam), cost, lam * 2000)
        per_update[lam] = sim.stats.sim_time_s / 2000
        assert per_update[lam] == pytest.approx(draws[:, :lam].max(axis=1).mean(), rel=0.03)
    assert per_update[1] < per_update[4] < per_update[16]


def test_tree_and_background_threads_overlap_rudra_table1():
    """Rudra Table 1's scenario (μ = 4, 300 MB, 60 learners, 1-softsync) on p775_cluster: the PS tree's
    leaves average their node's gradients before the root sees them, and adv*'s background threads hide
    the rest (predictions: no term was fitted on Table 1)."""
    from psbench.calibration.paper_fit import table1_overlap

    overlap = {topo: table1_overlap(topo) for topo in ("rudra_base", "rudra_adv", "rudra_adv_star")}
    assert overlap["rudra_base"] < overlap["rudra_adv"] < overlap["rudra_adv_star"]
    assert abs(overlap["rudra_base"] - 11.52) <= 15
    assert abs(overlap["rudra_adv"] - 56.75) <= 15  # ~71 %: inside by ~1 pp (the page says so)
    assert overlap["rudra_adv_star"] >= 99


def test_p775_cluster_reproduces_its_fitted_numbers_and_predicts_the_others():
    """Every fitted number within 1 %, every prediction within its tolerance but one: with footnote 4's packing
    node_share rose from 4.71 % to 7.67 %, and Table 4's adv*-softsync (λ = 54, 4 per node: no paper gives its
    packing) is predicted 28 % slow (it was +19 %); the cost-model page says so."""
    from psbench.calibration.paper_fit import model_error

    rows = checks()
    fitted = [c for c in rows if c.fitted]
    assert {c.what for c in fitted} == {
        "(1, 128, 10)",
        "(1, 4, 30)",
        "(30, 4, 30)",
        "(0, 8, 30) / (1, 8, 30)",
        "base-hardsync / base-softsync",
    }
    bad = [c for c in rows if not c.holds]
    assert [c.what for c in bad] == ["adv*-softsync"] and 0.25 < bad[0].rel_err < 0.31
    table2 = [c for c in rows if c.source == "Rudra Table 2, s for 140 epochs"]
    assert len(table2) == 5 and all(c.holds for c in table2)  # Table 2's predictions stay within ±20 %
    lo, hi = model_error(rows, "alexnet")  # what widens Zhang Fig 2's ImageNet band
    assert 0.03 < lo < hi < 0.31 and model_error(rows, "cifar")[0] < -0.1


def test_barrier_jitter_is_fitted_per_network_and_the_alexnet_presets_carry_theirs():
    """The CIFAR10 CNN's CV (profile) and the AlexNet's (ALEXNET_JITTER_CV) each reproduce their network's
    hardsync / 1-softsync ratio; every 300 MB preset sets the AlexNet's, so the profile's reaches none of them."""
    from psbench.calibration.paper_fit import ALEXNET_JITTER_CV, fit_p775_cluster
    from psbench.cli import CONF_DIR

    fitted = fit_p775_cluster(rounds=1, per_learner=50)
    assert fitted["jitter_cv"] == pytest.approx(PROFILES["p775_cluster"]["jitter_cv"], rel=0.1)
    assert fitted["alexnet_jitter_cv"] == pytest.approx(ALEXNET_JITTER_CV, rel=0.1)
    assert ALEXNET_JITTER_CV < PROFILES["p775_cluster"]["jitter_cv"] / 1.5  # two networks, two variabilities
    exp = CONF_DIR / "experiment"
    for name in ("rudra/table1", "rudra/table4"):
        assert OmegaConf.load(exp / f"{name}.yaml").hardware.jitter_cv == ALEXNET_JITTER_CV, name
    cases = OmegaConf.load(exp / "zhang" / "fig2.yaml").hydra.sweeper.cases
    assert all(
        c.get("hardware.jitter_cv") == (ALEXNET_JITTER_CV if k.startswith("imagenet") else None)
        for k, c in cases.items()
    )


def test_new_terms_are_off_in_the_existing_profiles():
    for name in ("laptop", "p775"):
        cost = CostModel.from_profile(name, MB)
        assert (cost.ps_shards, cost.ps_colocated, cost.node_share, cost.contention) == (1, False, 0.0, 0.0)
    assert not Topology("rudra_adv").leaf_gather  # on only where conf/topology says so


def test_topology_yamls_gather_in_the_rudra_adv_trees():
    from psbench.cli import CONF_DIR

    gather = {
        n: OmegaConf.load(CONF_DIR / "topology" / f"{n}.yaml").leaf_gather
        for n in ("rudra_base", "rudra_adv", "rudra_adv_star")
    }
    assert gather == {"rudra_base": False, "rudra_adv": True, "rudra_adv_star": True}


def test_p775_cluster_yaml_equals_its_profile():
    from psbench.cli import CONF_DIR

    hw = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "hardware" / "p775_cluster.yaml"))
    flat = {**hw.pop("compute"), **hw}
    for key, value in PROFILES["p775_cluster"].items():
        assert flat[key] == pytest.approx(value), key


def test_timing_pages_say_which_number_each_term_was_fitted_to(tmp_path):
    sys.path.insert(0, str(REPO))
    from analysis.report import build

    build(tmp_path, tmp_path / "reports")
    for page, here in (
        ("rudra_table1", "No term is fitted on Table 1"),
        ("zhang_fig2", "No term is fitted on Fig 2"),
        ("rudra_fig8", "No term is fitted on Fig 8"),
        ("rudra_table4", "the base-hardsync / base-softsync ratio (330 / 270"),
    ):
        md = (tmp_path / "reports" / f"{page}.md").read_text()
        assert here in md, page
        assert "| (1, 128, 10) | Rudra Table 2, s for 140 epochs; node_share fitted | 2,551 s | 2,551 s |" in md, page
        assert "| adv-softsync | Rudra Table 4, min/epoch | 212 min |" in md and "prediction (±20%)" in md, page


def test_presets_carry_footnote_4s_packing_and_one_alexnet_compute():
    """Fig 8's CIFAR10 runs sit on footnote 4's nodes; Zhang Fig 2's ImageNet cases compute as Rudra Table 4's
    AlexNet (the compute its jitter was fitted with), at 4 per node and, for λ ≥ 8, again at 6 (Zhang §2.3)."""
    from psbench.calibration.paper_fit import ALEXNET_COMPUTE, FOOTNOTE4
    from psbench.cli import CONF_DIR

    exp = CONF_DIR / "experiment"
    fig8 = OmegaConf.load(exp / "rudra" / "fig8.yaml").hydra.sweeper.cases
    assert all(c["topology.nodes"] == FOOTNOTE4[c.learners] for c in fig8.values())
    t4 = OmegaConf.load(exp / "rudra" / "table4.yaml").hardware.compute
    assert (t4.overhead_s, t4.per_sample_s) == (ALEXNET_COMPUTE["overhead_s"], ALEXNET_COMPUTE["per_sample_s"])
    cases = OmegaConf.load(exp / "zhang" / "fig2.yaml").hydra.sweeper.cases
    imagenet = [c for k, c in cases.items() if k.startswith("imagenet")]
    assert imagenet and all(
        (c["hardware.compute.overhead_s"], c["hardware.compute.per_sample_s"]) == (t4.overhead_s, t4.per_sample_s)
        for c in imagenet
    )
    six = {k: c for k, c in cases.items() if k.endswith("_pn6")}
    assert len(six) == 27 and all(c["topology.learners_per_node"] == 6 and c.learners >= 8 for c in six.values())
    assert all(k.removesuffix("_pn6") in cases for k in six)
