"""The picture of the schedule: the simulator's trace, the figure drawn from it, the artifact.

The trace must be the simulator's own (compute starts, push times and weight timestamps are the
schedule's; waits exactly where the protocol parks a learner: Rudra §3.1 Eq 3, Kumar et al. §3.1),
recording it must leave the schedule bit-identical, and the figure must draw exactly its intervals,
one row per learner plus the PS, one colour per kind, the same bytes every time.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from psbench.cluster import CostModel, Topology
from psbench.cluster.cost import JitterStreams
from psbench.ps import Protocol, Schedule, Simulator
from psbench.ps.timeline import (
    COLOURS,
    concept_traces,
    default_updates,
    main,
    plot_timeline,
    rectangles,
    row_of,
)
from psbench.ps.trace import APPLY, COMPUTE, KINDS, PS, PULL, PUSH, WAIT


def simulate(protocol: Protocol, gradients: int, topology: str = "rudra_base", k: int = 0, **cost):
    base = dict(message_bytes=40_000, jitter_cv=0.2)
    base.update(cost)
    c = CostModel.from_profile("laptop", base.pop("message_bytes"), **base)
    sim = Simulator(protocol, c, Topology(topology, learners_per_node=2), 8, gradients, 0, trace_updates=k)
    return Schedule.collect(sim.run()), sim


def tiles(trace, l: int) -> None:
    """Learner l is in exactly one state at a time, from 0 until it stops or the window ends."""
    main_lane = [iv for iv in trace.of(l) if iv.lane == 0]
    assert main_lane[0].start == 0.0
    for a, b in itertools.pairwise(main_lane):
        assert a.end == b.start, (a, b)


# ------------------------------------------------------------------------------ the trace is the simulator's
@pytest.mark.parametrize(
    "protocol",
    [
        Protocol("hardsync", 4),
        Protocol("softsync", 4, n=2),
        Protocol("async", 4),
        Protocol("ssp", 4, staleness_bound=1),
        Protocol("agn", 4, local_steps=3),
    ],
)
@pytest.mark.parametrize("topology", ["rudra_base", "rudra_adv", "rudra_adv_star"])
@pytest.mark.parametrize("k", [5, 10_000])  # a window inside the run, and one longer than the run
def test_recording_a_trace_leaves_the_schedule_bit_identical(protocol, topology, k):
    cost = dict(straggler_fraction=0.25, straggler_slowdown=3.0, ps_jitter_cv=0.3, contention=0.5)
    plain, a = simulate(protocol, 240, topology, **cost)
    traced, b = simulate(protocol, 240, topology, k, **cost)
    assert traced.sha256() == plain.sha256()
    assert b.stats.as_dict() == a.stats.as_dict() and b.stats.sim_time_s == a.stats.sim_time_s
    assert a.trace is None and b.trace is not None and b.trace.closed
    n = min(k, plain.num_updates)
    assert b.trace.update_time == plain.update_time[:n].tolist()
    assert b.trace.t_end == plain.update_time[n - 1]
    assert [iv.label for iv in b.trace.of(PS, APPLY)] == list(range(n))


def test_hardsync_trace_is_the_schedule_with_waits_at_the_barrier():
    """λ = 2, jittered: computes and pushes are the schedule's rows, and a learner waits at the barrier (Eq 3)
    exactly when its timestamp read reaches the root before the update's last push does (both one latency
    after they leave: its push was taken before the last one's compute ended), until the update is applied."""
    sched, sim = simulate(Protocol("hardsync", 2), 40, k=8)
    tr = sim.trace
    assert tr.wait == "barrier" and tr.t_end == sched.update_time[7]
    for l in (0, 1):
        tiles(tr, l)
    computes = {(iv.row, iv.start): iv for iv in tr.intervals if iv.kind == COMPUTE}
    pushes = {(iv.row, iv.start): iv for iv in tr.intervals if iv.kind == PUSH}
    forced = 0
    for i in range(8):
        rows = sorted(range(sched.rows(i).start, sched.rows(i).stop), key=lambda r: sched.t_push[r])
        for r in rows:
            c = computes[(int(sched.learner[r]), float(sched.t_start[r]))]
            assert c.label == sched.ts[r] == i  # computed on the weights of update i − 1's result: σ = 0
            assert pushes[(c.row, c.end)].end == sched.t_push[r]  # pushed from its compute's end until taken
        last_end = computes[(int(sched.learner[rows[-1]]), float(sched.t_start[rows[-1]]))].end
        for r in rows:
            l, t = int(sched.learner[r]), float(sched.t_push[r])
            waits = [iv for iv in tr.of(l, WAIT) if t <= iv.start < sched.update_time[i]]
            must = r != rows[-1] and t < last_end
            forced += must
            assert len(waits) == must
            if must:
                assert waits[0].end == sched.update_time[i]  # released when the update is applied
    assert forced > 0 and forced == len(tr.of(0, WAIT)) + len(tr.of(1, WAIT))
    assert sorted(iv.end for iv in tr.of(PS, PUSH)) == sorted(sched.t_push[: sched.offsets[8]].tolist())
    for iv in tr.of(PS, APPLY):
        assert iv.end == sched.update_time[iv.label]


def test_ssp_trace_waits_exactly_at_the_bound():
    """SSP s = 1, λ = 3, one learner three times slower (c = 1): a learner waits after its k-th push only while
    k − the slowest's applied pushes > s, and the update that takes it back within the bound ends its wait."""
    s = 1
    sched, sim = simulate(
        Protocol("ssp", 3, staleness_bound=s),
        120,
        k=30,
        jitter_cv=0.05,
        straggler_fraction=1 / 3,
        straggler_slowdown=3.0,
    )
    (slow,) = JitterStreams(sim.cost, 3, 0).stragglers
    tr = sim.trace
    assert tr.wait == "bound s=1"
    waits = tr.of(0, WAIT) + tr.of(1, WAIT) + tr.of(2, WAIT)
    assert waits and all(iv.row != slow for iv in waits)
    upd = sched.update_index

    def applied(j: int, i: int) -> int:  # j's pushes in updates 0…i (c = 1: applied when taken)
        return int(((sched.learner == j) & (upd <= i)).sum())

    released = 0
    for iv in waits:
        k = int(((sched.learner == iv.row) & (sched.t_push <= iv.start)).sum())  # its pushes so far
        before = [i for i in range(sched.num_updates) if sched.update_time[i] <= iv.start]
        assert k - min(applied(j, before[-1]) for j in range(3)) > s  # it had to wait
        if iv.end < tr.t_end:
            (i,) = [i for i in range(sched.num_updates) if sched.update_time[i] == iv.end]
            assert k - min(applied(j, i) for j in range(3)) <= s < k - min(applied(j, i - 1) for j in range(3))
            released += 1
    assert released > 0
    for l in range(3):
        tiles(tr, l)


@pytest.mark.parametrize(
    "protocol", [Protocol("async", 3), Protocol("softsync", 4, n=2), Protocol("ssp", 3, staleness_bound=1000)]
)
def test_no_waits_where_the_protocol_forces_none(protocol):
    _, sim = simulate(protocol, 120, k=20, straggler_fraction=0.34, straggler_slowdown=3.0)
    assert not [iv for iv in sim.trace.intervals if iv.kind == WAIT]
    assert {iv.kind for iv in sim.trace.intervals} == {COMPUTE, PUSH, PULL, APPLY}


# ------------------------------------------------------------------------------ the figure draws the trace
@pytest.mark.parametrize(
    "protocol,topology",
    [
        (Protocol("hardsync", 2), "rudra_base"),
        (Protocol("ssp", 3, staleness_bound=1), "rudra_base"),
        (Protocol("async", 3), "rudra_adv_star"),
    ],
)
def test_figure_has_a_row_per_learner_and_the_ps_and_draws_every_interval_in_its_colour(protocol, topology, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from psbench.ps.timeline import draw_timeline

    _, sim = simulate(protocol, 120, topology, k=10, straggler_fraction=0.34, straggler_slowdown=3.0)
    tr = sim.trace
    fig, ax = plt.subplots()
    try:
        rects = draw_timeline(ax, tr)
        assert [t.get_text() for t in ax.get_yticklabels()] == ["PS", *(f"learner {l}" for l in range(tr.learners))]
        drawn = []
        for coll in ax.collections:
            if coll.get_label() in KINDS:
                assert to_hex(coll.get_facecolor()[0]) == COLOURS[coll.get_label()]
                for path in coll.get_paths():
                    v = path.vertices
                    drawn.append((coll.get_label(), v[:, 0].min(), v[:, 0].max(), v[:, 1].min(), v[:, 1].max()))
    finally:
        plt.close(fig)
    expected = []
    for iv in tr.intervals:
        r = row_of(iv.row)
        lo = r + 0.4 - 0.3 if iv.lane else r - 0.4
        expected.append((iv.kind, iv.start, min(iv.end, tr.t_end), lo, r + 0.4))
    key = lambda e: (e[0], e[3], e[1])  # noqa: E731
    assert len(drawn) == len(expected) == len(rects)
    for d, e in zip(sorted(drawn, key=key), sorted(expected, key=key), strict=True):
        assert d[0] == e[0] and d[1:] == pytest.approx(e[1:], abs=1e-12)
    assert {round(y) for _, _, _, y0, y1 in drawn for y in ((y0 + y1) / 2,)} <= set(range(tr.learners + 1))
    assert any(k == PUSH for k, *_ in drawn) and any(iv.lane for iv in tr.intervals) == (topology == "rudra_adv_star")
    assert rectangles(tr) == rects


def test_the_png_is_the_same_bytes_every_time_and_carries_no_metadata(tmp_path):
    _, sim = simulate(Protocol("ssp", 3, staleness_bound=1), 120, k=10)
    hist = sim.stats.staleness.as_dict()
    a = plot_timeline(sim.trace, hist, "ssp", tmp_path / "a.png").read_bytes()
    b = plot_timeline(sim.trace, hist, "ssp", tmp_path / "b.png").read_bytes()
    assert a == b and a.startswith(b"\x89PNG")
    assert b"tEXt" not in a and b"Software" not in a and b"tIME" not in a


def test_concept_pictures_show_the_barrier_the_gate_no_waits_and_the_bound(tmp_path, capsys):
    traces = {stem: tr for stem, tr, _, _ in concept_traces()}
    assert set(traces) == {"hardsync", "softsync", "async", "ssp", "local_steps"}
    waits = {stem: [iv for iv in tr.intervals if iv.kind == WAIT] for stem, tr in traces.items()}
    assert waits["hardsync"] and waits["ssp"]
    assert not waits["async"] and not waits["softsync"] and not waits["local_steps"]
    assert traces["local_steps"].local_steps == 4
    # one local-step picture stands for all four: their schedules (and traces) are the same
    local = [
        simulate(Protocol(name, 4, local_steps=4, rho=1.0 if name == "aeasgd" else None), 80, k=10)
        for name in ("downpour", "agn", "aeasgd", "dynsgd")
    ]
    assert len({sched.sha256() for sched, _ in local}) == 1
    assert all(sim.trace.intervals == local[0][1].trace.intervals for _, sim in local)
    # 4-softsync on 8 learners: c = 2 pushes taken per update
    pushes, applies = traces["softsync"].of(PS, PUSH), traces["softsync"].of(PS, APPLY)
    assert all(sum(p.end <= a.start for p in pushes) == 2 * (a.label + 1) for a in applies)
    main(["--out", str(tmp_path)])
    written = sorted(Path(p).name for p in capsys.readouterr().out.split())
    assert written == sorted(f"timeline_{s}.png" for s in traces)
    assert all((tmp_path / n).stat().st_size > 10_000 for n in written)


def test_default_window_is_three_pushes_of_every_learner_within_a_gradient_budget():
    assert default_updates(Protocol("hardsync", 4)) == 12  # 12 rounds of the barrier
    assert default_updates(Protocol("async", 8)) == 24 and default_updates(Protocol("async", 1000)) == 64
    assert default_updates(Protocol("softsync", 30, n=4)) == 15  # c = 7: three pushes of 30 learners
    assert default_updates(Protocol("hardsync", 1000)) == 4  # 4,000 gradients, not 12,000


# ------------------------------------------------------------------------------ the run artifact
def test_a_schedule_only_run_writes_the_timeline_artifact(compose_cfg, tmp_path):
    from psbench.train import train

    out = tmp_path / "run"
    out.mkdir()
    s = train(
        compose_cfg(
            "trainer.progress=none",
            "schedule_only=true",
            "protocol=ssp",
            "protocol.staleness_bound=1",
            "trainer.timeline_updates=9",
        ),
        out,
    )
    assert str(out / "timeline.png") in s["artifacts"] and (out / "timeline.png").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "off").mkdir()
    off = train(
        compose_cfg(
            "trainer.progress=none",
            "schedule_only=true",
            "protocol=ssp",
            "protocol.staleness_bound=1",
            "trainer.timeline_updates=0",
            f"paths.output_dir={tmp_path / 'off'}",
        ),
        tmp_path / "off",
    )
    assert not any(a.endswith("timeline.png") for a in off["artifacts"])
    assert off["schedule_sha256"] == s["schedule_sha256"]


def test_a_default_run_writes_the_timeline_artifact(run_psbench, tmp_path):
    proc = run_psbench("logger=none", "trainer.max_updates=5", "trainer.progress=none", root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = sorted(p.parent for p in (tmp_path / "outputs").rglob("summary.json"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert str(run_dir / "timeline.png") in summary["artifacts"]
    assert (run_dir / "timeline.png").read_bytes().startswith(b"\x89PNG")
