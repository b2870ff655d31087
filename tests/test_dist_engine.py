"""engine=dist: the PS event loop, replay ≡ simulation, stress counts, SSP, failures, bad input.

Two kinds of tests:

* the PS's logic with an in-process transport double (:class:`FakeLearners`) that computes each
  gradient with the learners' own code and delivers pushes in a seeded random order (a slowed
  learner is picked less often) — fast, part of the default run;
* the real thing: ``psbench engine=dist`` with λ learner processes over gloo (``slow``: on a shared
  2-core machine λ processes take ~7 s each to import torch).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from psbench.distributed import messages as m
from psbench.distributed.learner import per_sample_loss
from psbench.distributed.ps_server import ParameterServer
from psbench.distributed.transport import Inbound, LearnerFailure
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule
from psbench.ps.aggregate import learner_gradient
from psbench.ps.samples import SampleStream

TINY = ("dataset=synthetic", "dataset.shape=[1,4,4]", "model=mlp", "model.hidden=[8]")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: OpenMP threads only spin against each other on a shared machine (12 ms per loss)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ----------------------------------------------------------------------------- the transport double
class FakeLearners:
    """λ learners in this process: a COMPUTE computes the gradient now; pushes are delivered in random order."""

    def __init__(self, net, x, y, spg, seed, learners, slow=None, rng_seed=0):
        self.net, self.x, self.y, self.spg, self.lam = net, x, y, spg, learners
        self.stream = SampleStream(len(x), seed)
        self.names = [k for k, _ in net.named_parameters()]
        self.shapes = [p.shape for _, p in net.named_parameters()]
        self.sizes = [p.numel() for _, p in net.named_parameters()]
        self.weights = [None] * learners
        self.clock = [0] * learners
        self.inflight = [Inbound(l, m.Push(m.HELLO, 0, 0, 0, 0, 0, 0, 0, 0), None, None) for l in range(learners)]
        self.rng = random.Random(rng_seed)
        self.slow = slow or {}
        self.stopped = set()
        self.reads: list[tuple[int, int, int]] = []  # (learner, clock, ts) of every weight read

    def send(self, l, header, payload=None):
        r = m.decode_reply(header)
        if r.kind == m.STOP:
            self.stopped.add(l)
            return
        if payload is not None:
            self.weights[l] = payload.clone()
        assert r.has_weights == (payload is not None) and self.weights[l] is not None
        flat = self.weights[l]
        views = [t.view(s) for t, s in zip(flat.split(self.sizes), self.shapes, strict=True)]
        params = dict(zip(self.names, views, strict=True))
        idx = self.stream.indices(r.sample_start, self.spg)
        grads, per = learner_gradient(
            self.net, per_sample_loss, params, self.x[idx], self.y[idx], torch.tensor(r.weight, dtype=torch.float32)
        )
        g = torch.cat([t.reshape(-1) for t in grads])
        self.reads.append((l, self.clock[l], r.ts))
        push = m.Push(m.PUSH, r.ts, self.clock[l], r.sample_start, 0.0, 0.0, float(per.sum()), len(per), r.row)
        self.clock[l] += 1
        self.inflight.append(Inbound(l, push, g, None))

    def defer_pull(self, l):
        self.inflight.append(Inbound(l, m.Push(m.PULL, 0, 0, 0, 0, 0, 0, 0, -1), None, None))

    def get(self, timeout):
        if not self.inflight:
            return None
        w = [1.0 / self.slow.get(msg.learner, 1.0) for msg in self.inflight]
        j = self.rng.choices(range(len(self.inflight)), weights=w)[0]
        return self.inflight.pop(j)

    def check(self, learners):
        pass


def _setup(learners, n_train=64, spg=2, seed=0):
    from psbench.models import build_model

    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n_train, 1, 4, 4, generator=g), torch.randint(0, 3, (n_train,), generator=g)
    torch.manual_seed(seed)
    net = build_model("mlp", (1, 4, 4), 3, hidden=(8,))
    return net, x, y


def _ps(protocol, G, slow=None, policy="dynsgd", replay=None, learners=None, rng_seed=0):
    lam = protocol.learners
    net, x, y = _setup(lam)
    fake = FakeLearners(net, x, y, 2, 0, lam, slow=slow, rng_seed=rng_seed)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    ps = ParameterServer(
        net, opt, None, protocol, LRPolicy(policy), 2, 2, G, fake, replay=replay, timeout_s=0.5, poll_s=0.0
    )
    return ps, fake


def _check_log(log: Schedule, c: int, G: int):
    """Every push applied exactly once: (learner, clock) pairs unique and gap-free, c per update, samples once."""
    assert log.num_gradients == G and log.num_updates == G // c
    assert (np.diff(log.offsets) == c).all()
    for l in np.unique(log.learner):
        clocks = np.sort(log.clock[log.learner == l])
        assert (clocks == np.arange(len(clocks))).all()
    assert sorted(log.sample_start.tolist()) == list(range(0, 2 * G, 2))


@pytest.mark.parametrize("name,n", [("hardsync", None), ("softsync", 1), ("softsync", 2), ("async", None)])
def test_ps_counts_every_push_once_and_timestamp_is_pushes_over_c(name, n):
    p = Protocol(name, 6, n=n)
    ps, fake = _ps(p, 300, slow={0: 3.0})
    st = ps.run()
    c = p.gradients_per_update
    assert st.pushes_received == st.pushes_applied == 300 - 300 % c
    assert ps.root_ts == st.pushes_applied // c == st.updates
    assert fake.stopped == set(range(6))
    log = ps.event_log()
    _check_log(log, c, st.pushes_applied)
    if name == "hardsync":
        assert log.staleness.max() == 0  # σ ≡ 0 (Rudra Eq 3)
    else:
        assert log.staleness.max() > 0


def _ssp_invariant_holds(log: Schedule, reads, s: int, lam: int) -> bool:
    """Independent of the PS: a read at clock k of ts holds ≥ k−s pushes of everyone and all k of its own."""
    counts = np.zeros((log.num_updates + 1, lam), dtype=np.int64)
    for i in range(log.num_updates):
        counts[i + 1] = counts[i] + np.bincount(log.learner[log.rows(i)], minlength=lam)
    return all(counts[ts, l] == k and counts[ts].min() >= k - s for l, k, ts in reads)


def test_ssp_bound_holds_on_every_read_with_a_slowed_learner():
    p = Protocol("ssp", 5, staleness_bound=2)
    ps, fake = _ps(p, 400, slow={0: 8.0})
    st = ps.run()
    assert st.ssp_reads == st.reads == 400 and st.ssp_violations == 0
    assert st.parks > 0 and st.ssp_max_lag == 2  # the slow learner held the others back, exactly at the bound
    assert _ssp_invariant_holds(ps.event_log(), fake.reads, 2, 5)


def test_replay_applies_a_simulated_schedule_in_order_whatever_the_arrival_order():
    """Same schedule, two different arrival orders -> bit-identical weights, log in the schedule's order."""
    from psbench.cluster import CostModel, Topology
    from psbench.ps import Simulator

    p = Protocol("softsync", 4, n=1)
    sched = Schedule.collect(Simulator(p, CostModel(jitter_cv=0.3), Topology("rudra_base"), 2, 200, 0).run())
    out = []
    for rng_seed in (0, 1):
        ps, _ = _ps(p, 0, replay=sched, rng_seed=rng_seed)
        st = ps.run()
        assert st.pushes_applied == sched.num_gradients and ps.root_ts == sched.num_updates
        log = ps.event_log()
        assert (log.learner == sched.learner).all() and (log.ts == sched.ts).all() and (log.clock == sched.clock).all()
        out.append(torch.cat([q.detach().reshape(-1) for q in ps.params]))
        assert not ps.snapshots  # every snapshot dropped after its last reader
    assert torch.equal(out[0], out[1])


def _summary(ps, schedule, **kw):
    from psbench.distributed.launcher import run_summary

    return run_summary(
        ps,
        schedule,
        num_train=64,
        model_bytes=4 * sum(p.numel() for p in ps.params),
        join_time_s=0.0,
        bytes_pushed=0,
        bytes_pulled=0,
        push_payload_bytes=None,
        **kw,
    )


def test_a_free_runs_summary_carries_measured_time_under_run_time_s():
    """The dist summary is a RunSummary; a free run simulated nothing: sim_time_s is null, not the wall clock."""
    from psbench.summary import FIELDS, RunSummary

    p = Protocol("softsync", 4, n=1)
    ps, _ = _ps(p, 200)
    t0 = time.time()
    st = ps.run()
    measured = time.time() - t0
    s = _summary(ps, ps.event_log({"engine": "dist"}), mode="free_run")
    assert isinstance(s, RunSummary) and list(s.to_dict()) == list(FIELDS)
    assert s.engine == "dist" and s.mode == "free_run"
    assert s.sim_time_s is None and 0 < s.run_time_s == st.run_time_s <= measured + 1.0
    assert s.pushes_per_s == pytest.approx(st.pushes_received / st.run_time_s)
    assert s.gradients == s.pushes_applied == 200 and s.samples == 400 and s.epochs_done == 400 / 64
    assert s.ps_updates == s.ps_timestamp == 200 // p.gradients_per_update
    assert RunSummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_a_replays_summary_carries_the_schedules_simulated_time():
    from psbench.cluster import CostModel, Topology
    from psbench.distributed.launcher import simulated_time
    from psbench.ps import Simulator

    p = Protocol("async", 3)
    sim = Simulator(p, CostModel(), Topology("rudra_base"), 2, 60, 0)
    sched = Schedule.collect(sim.run())
    ps, _ = _ps(p, 0, replay=sched)
    ps.run()
    s = _summary(ps, sched, mode="replay", sim_time_s=simulated_time(sched))
    assert s.sim_time_s == sim.stats.sim_time_s > 0  # the cost model's clock, whatever the replay took
    assert s.run_time_s == ps.stats.run_time_s != s.sim_time_s
    assert s.schedule_sha256 == sched.sha256()
    assert simulated_time(ps.event_log({"engine": "dist"})) is None  # a measured event log has no simulated time


def test_a_silent_learner_fails_the_run_naming_ranks():
    p = Protocol("async", 3)
    ps, fake = _ps(p, 50)
    fake.get = lambda timeout: None  # nobody ever answers
    with pytest.raises(LearnerFailure, match=r"no message from learner ranks \[1, 2, 3\]"):
        ps.run()


class DyingLearners(FakeLearners):
    """Learner ``victim`` dies after ``after`` pushes: its in-flight gradient is lost, its process gone."""

    def __init__(self, *a, victim=2, after=20, **k):
        super().__init__(*a, **k)
        self.victim, self.after, self.dead = victim, after, False

    def get(self, timeout):
        msg = super().get(timeout)
        if msg is not None and msg.learner == self.victim and self.clock[self.victim] >= self.after:
            self.dead = True
            return None
        return msg

    def check(self, learners):
        if self.dead and self.victim in learners:
            raise LearnerFailure(self.victim, f"learner rank {self.victim + 1} (pid 0) exited with code -9 (SIGKILL)")


@pytest.mark.parametrize("tolerate", [False, True])
def test_a_dead_learner_fails_the_run_or_is_written_off(tolerate):
    p = Protocol("async", 4)
    net, x, y = _setup(4)
    fake = DyingLearners(net, x, y, 2, 0, 4)
    ps = ParameterServer(
        net,
        torch.optim.SGD(net.parameters(), lr=0.05),
        None,
        p,
        LRPolicy(),
        2,
        2,
        200,
        fake,
        timeout_s=0.5,
        tolerate_failures=tolerate,
        poll_s=0.0,
    )
    if not tolerate:
        with pytest.raises(LearnerFailure, match=r"learner rank 3 .*SIGKILL"):
            ps.run()
        return
    st = ps.run()
    assert st.failed_learners == [3] and st.lost_gradients == 1
    assert st.pushes_applied == st.pushes_received == 199 and ps.root_ts == 199
    assert fake.stopped == {0, 1, 3}


# ----------------------------------------------------------------------------- real processes
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _learner_processes(run_dir: Path) -> list[int]:
    f = run_dir / "dist_pids.json"
    if not f.exists():
        return []
    pids = json.loads(f.read_text())
    return [pid for k, pid in pids.items() if k != "ps" and _alive(pid)]


def _dist(run_psbench, root, *args, timeout=600):
    out = root / "run"
    r = run_psbench("engine=dist", "trainer.progress=none", f"hydra.run.dir={out}", *args, root=root, timeout=timeout)
    return r, out


def _replay_against_sim(compose_cfg, run_psbench, tmp_path, *args) -> tuple[dict, dict]:
    """(simulator summary, engine=dist replay summary) of the same config; the replay left no learner behind."""
    from psbench.train import train

    (tmp_path / "run").mkdir(exist_ok=True)
    sim = train(compose_cfg("trainer.progress=none", *args), tmp_path / "run")
    root = tmp_path / "d"
    root.mkdir()
    r, out = _dist(run_psbench, root, "engine.mode=replay", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not _learner_processes(out)
    dist = json.loads((out / "summary.json").read_text())
    assert dist["schedule_sha256"] == sim["schedule_sha256"]
    assert str(out / "weights.pt") in dist["artifacts"]  # trainer.save_weights (default true)
    assert str(out / "timeline.png") in dist["artifacts"]  # the simulated schedule's picture, the simulator's own
    assert (out / "timeline.png").read_bytes() == (tmp_path / "run" / "timeline.png").read_bytes()
    return sim, dist


@pytest.mark.parametrize(
    "local",
    [
        ("protocol=agn", "protocol.local_steps=3", "optimizer.momentum=0.9"),
        pytest.param(("protocol=aeasgd", "protocol.local_steps=2", "protocol.rho=2.0"), marks=pytest.mark.slow),
    ],
)
def test_replay_of_a_local_step_protocol_gives_the_simulators_weights(compose_cfg, run_psbench, tmp_path, local):
    """H local steps run in the learner processes (same window code, k = 1) and reach the simulator's weights."""
    sim, dist = _replay_against_sim(
        compose_cfg,
        run_psbench,
        tmp_path,
        "learners=3",
        "batch_size=8",
        "epochs=1",
        "trainer.max_updates=12",
        "trainer.num_threads=1",
        "logger=none",
        "optimizer.lr=0.05",
        *local,
    )
    assert dist["pushes_applied"] == sim["gradients"] == 12 and dist["ps_timestamp"] == sim["ps_updates"]
    assert dist["weights_sha256"] == sim["weights_sha256"]


@pytest.mark.parametrize(
    "codec",
    [
        ("protocol=async", "compression=terngrad"),
        pytest.param(("protocol=softsync", "protocol.n=1", "compression=topk"), marks=pytest.mark.slow),
        pytest.param(
            ("protocol=hardsync", "compression=terngrad", "compression.share_scalers=false"), marks=pytest.mark.slow
        ),
    ],
)
def test_replay_with_a_codec_gives_the_simulators_weights(compose_cfg, run_psbench, tmp_path, codec):
    """Learners push their codec's exact bytes (same codec state and generator as the simulator's pipeline);
    the PS decodes, weights and aggregates them: the simulator's weights, bit for bit."""
    sim, dist = _replay_against_sim(
        compose_cfg,
        run_psbench,
        tmp_path,
        "learners=3",
        "batch_size=8",
        "epochs=1",
        "trainer.max_updates=20",
        "trainer.num_threads=1",
        "trainer.batching=loop",
        "logger=none",
        *codec,
    )
    assert dist["weights_sha256"] == sim["weights_sha256"]
    assert dist["bytes_pushed"] == dist["pushes_received"] * (dist["push_payload_bytes"] + m.HEADER * 8)
    if "compression=terngrad" in codec:  # 2-bit codes + one fp32 scaler per tensor: ≈ 16× fewer bytes
        assert 12 < dist["model_bytes"] / dist["push_payload_bytes"] < 16


@pytest.mark.parametrize(
    "args,key",
    [
        (("learners=5", "engine.max_learners=4"), "learners=5"),
        (("engine.backend=nccl",), "engine.backend='nccl'"),
        (("topology=rudra_adv",), "topology.name"),
        (("compression=terngrad",), "compression.share_scalers"),  # hardsync, c = 4: no negotiation round yet
    ],
)
def test_bad_input_is_one_line_and_starts_nothing(run_psbench, tmp_path, args, key):
    r, out = _dist(run_psbench, tmp_path, "logger=none", *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("psbench: error: ") and key in lines[-1], r.stderr
    assert "Traceback" not in r.stderr and not (out / "dist_pids.json").exists()


def test_port_in_use_is_one_line_and_starts_nothing(run_psbench, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r, out = _dist(run_psbench, tmp_path, "logger=none", f"engine.port={port}")
    assert r.returncode == 2 and "engine.port" in r.stderr.strip().splitlines()[-1], r.stderr
    assert "in use" in r.stderr and not (out / "dist_pids.json").exists()


@pytest.mark.slow
def test_replay_of_simulated_1_softsync_gives_the_simulators_weights(compose_cfg, run_psbench, tmp_path):
    sim, dist = _replay_against_sim(
        compose_cfg,
        run_psbench,
        tmp_path,
        "learners=4",
        "protocol=softsync",
        "protocol.n=1",
        "batch_size=8",
        "epochs=1",
        "trainer.max_updates=25",
        "lr_policy=dynsgd",
        "trainer.num_threads=1",
        "trainer.batching=loop",
        "logger=none",
    )
    assert dist["weights_sha256"] == sim["weights_sha256"]
    assert dist["pushes_applied"] == sim["gradients"] and dist["ps_timestamp"] == sim["ps_updates"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "protocol", [("protocol=hardsync",), ("protocol=softsync", "protocol.n=1"), ("protocol=async",)]
)
def test_stress_16_learner_processes_10k_pushes(run_psbench, tmp_path, protocol):
    r, out = _dist(
        run_psbench,
        tmp_path,
        *TINY,
        "dataset.num_train=2000",
        "learners=16",
        "batch_size=1",
        "epochs=5.2",
        "logger=none",
        "engine.connect_timeout_s=600",
        "optimizer.lr=0.01",
        "optimizer.momentum=0.0",
        "trainer.num_threads=1",
        *protocol,
        timeout=1200,
    )  # σ ≈ 15: no divergence
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    c = {"hardsync": 16, "1-softsync": 16, "async": 1}[s["protocol"]]
    assert s["pushes_received"] == s["pushes_applied"] == s["gradients"] >= 10_000
    assert s["ps_timestamp"] == s["pushes_applied"] // c == s["ps_updates"]
    log = Schedule.load(out / "schedule.npz")
    assert log.num_gradients == s["gradients"] and (np.diff(log.offsets) == c).all()
    pairs = set(zip(log.learner.tolist(), log.clock.tolist(), strict=True))
    assert len(pairs) == log.num_gradients  # no push applied twice
    for l in range(16):
        clocks = np.sort(log.clock[log.learner == l])
        assert (clocks == np.arange(len(clocks))).all()  # none lost
    assert not _learner_processes(out)


@pytest.mark.slow
def test_ssp_bound_on_real_processes_with_a_slowed_learner(run_psbench, tmp_path):
    r, out = _dist(
        run_psbench,
        tmp_path,
        *TINY,
        "learners=4",
        "batch_size=4",
        "epochs=1",
        "logger=none",
        "protocol=ssp",
        "protocol.staleness_bound=1",
        "engine.learner_delay_s={0: 0.03}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["ssp_reads"] == s["pulls"] == s["gradients"] and s["ssp_violations"] == 0
    assert s["parks"] > 0 and s["ssp_max_lag"] <= 1
    log = Schedule.load(out / "schedule.npz")
    reads = list(zip(log.learner.tolist(), log.clock.tolist(), log.ts.tolist(), strict=True))
    assert _ssp_invariant_holds(log, reads, 1, 4)


@pytest.mark.slow
def test_killing_a_learner_fails_the_run_within_30s_and_leaves_nothing(psbench_root, mlflow_runs):
    out = psbench_root / "run"
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PSBENCH_ROOT"] = str(psbench_root)
    cmd = [
        sys.executable,
        "-m",
        "psbench.cli",
        "engine=dist",
        "learners=4",
        "protocol=async",
        *TINY,
        "epochs=500",
        "trainer.progress=none",
        f"hydra.run.dir={out}",
        "engine.learner_delay_s={0: 0.01, 1: 0.01, 2: 0.01}",
    ]
    proc = subprocess.Popen(cmd, cwd=psbench_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not (out / "learner_2.log").exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.5)
        pids = json.loads((out / "dist_pids.json").read_text())
        while time.monotonic() < deadline and "learners joined" not in (out / "psbench.log").read_text():
            assert proc.poll() is None
            time.sleep(0.5)
        time.sleep(2)  # mid-run
        os.kill(pids["2"], signal.SIGKILL)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and elapsed < 30
    assert "learner rank 2" in err and "SIGKILL" in err, err[-2000:]
    line = err.strip().splitlines()[-1]  # one line, not a traceback
    assert proc.returncode == 1 and line.startswith("psbench: error: learner rank 2 ") and "Traceback" not in err
    runs = mlflow_runs(psbench_root)
    assert [r["status"] for r in runs] == ["FAILED"]
    assert runs[0]["tags"]["failure_reason"] == line.removeprefix("psbench: error: ")
    summary = json.loads((out / "summary.json").read_text())  # the failed job's record
    assert summary["status"] == "failed" and summary["engine"] == "dist"
    assert summary["mlflow_run_id"] == runs[0]["run_id"]
    assert summary["failure_reason"] == runs[0]["tags"]["failure_reason"]
    assert not (out / "learner_data.pt").exists()
    assert not [pid for pid in pids.values() if _alive(pid)]


@pytest.mark.slow
def test_calibration_of_a_lambda_8_free_run(run_psbench, tmp_path):
    """Fit the cost model to a plain λ = 8 async free run; the simulation reproduces σ and time per epoch.

    8 learners and the PS time-share two cores here, so the run is bound by the PS's CPU time, whose
    busy periods vary (measured CV ≈ 0.6–0.9) and which the cost model now has a term for
    (``ps_jitter_cv``). 2,000 gradients, so the KS distance on the 1,000 of the second half (the
    half not used to fit the noise terms) is not sampling noise (95 % KS band of a perfect model ≈ 0.05).
    Measured: KS 0.04–0.06, time per epoch within 4–14 %.
    """
    r, out = _dist(
        run_psbench,
        tmp_path,
        *TINY,
        "learners=8",
        "batch_size=16",
        "epochs=16",
        "logger=none",
        "protocol=async",
        "trainer.num_threads=1",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    cal = s["calibration"]
    print(json.dumps(cal, indent=1))
    assert s["gradients"] >= 2000
    assert cal["ks_staleness"] <= 0.15
    assert cal["epoch_time_rel_error"] <= 0.25


@pytest.mark.parametrize(
    "options",
    [
        {
            "name": "terngrad",
            "clip": 2.5,
            "wire": "2bit",
            "share_scalers": True,
            "float_last_layer": True,
            "localize": True,
            "error_feedback": False,
        },
        {
            "name": "terngrad",
            "clip": None,
            "wire": "base3",
            "share_scalers": False,
            "float_last_layer": False,
            "localize": False,
            "error_feedback": False,
        },
        {"name": "topk", "k": 0.1, "error_feedback": True},
        {"name": "qsgd", "levels": 4, "bucket": 64, "error_feedback": False},
        {"name": "fp16", "error_feedback": False},
    ],
)
@pytest.mark.filterwarnings("error::RuntimeWarning")  # TernGrad's Eq 9 clip once computed inf · 0 for unclipped rows
def test_gradient_wire_decodes_to_what_the_learners_codec_decodes(options):
    """A push's bytes (fixed size, the codec's exact payloads) decode at the PS to the pipeline's decoded gradient."""
    from psbench.compression.pipeline import LearnerCompression
    from psbench.compression.wire import GradientWire

    torch.manual_seed(0)
    shapes = {
        "0.weight": torch.Size([7, 5]),
        "0.bias": torch.Size([7]),
        "1.weight": torch.Size([3, 7]),
        "1.bias": torch.Size([3]),
    }
    sender, receiver = GradientWire(options, shapes, seed=4), GradientWire(options, shapes, seed=4)
    reference = LearnerCompression({**options, "share_scalers": False}, shapes, seed=4)
    assert sender.push_bytes == reference.push_bytes()
    for _ in range(3):  # stateful codecs (error feedback) and generator streams advance alike
        grads = {n: torch.randn(s) for n, s in shapes.items()}
        buf = sender.encode(2, grads)
        assert buf.dtype == torch.uint8 and buf.numel() == sender.push_bytes
        codec, gen = reference.codec(2), reference.generators[2]
        want = torch.cat(
            [
                g.reshape(-1) if n in reference.floats else codec.decompress(codec.compress(g, n, gen)).reshape(-1)
                for n, g in grads.items()
            ]
        )
        assert torch.equal(receiver.decode(buf), want)


# ----------------------------------------------------------------------------- the learners' spec
def test_the_learner_spec_is_typed_and_checked_at_the_ps_before_any_process_starts(compose_cfg, tmp_path, monkeypatch):
    """The spec the PS writes reads back as the learners read it (a local-step protocol's window typed); a misspelt
    key is refused by that reader, naming it; and a value no learner could run with fails the run at the PS, one line,
    before any learner process starts."""
    import dataclasses

    from psbench.assemble import build_run
    from psbench.distributed import launcher
    from psbench.distributed.spec import LearnerSpec
    from psbench.errors import RunFailure

    setup = build_run(
        compose_cfg(*TINY, "engine=dist", "learners=2", "protocol=agn", "protocol.local_steps=2", "logger=none")
    )
    data = tmp_path / "learner_data.pt"
    data.write_bytes(b"")
    spec = launcher.learner_spec(setup, setup.dist, 29500, data)
    spec.check()
    path = spec.save(tmp_path / "dist_spec.json")
    assert LearnerSpec.load(path) == spec and spec.window is not None and spec.window.local_steps == 2
    assert spec.samples_per_gradient == 2 * spec.window.batch_size and spec.world_size == 3

    text = json.loads(path.read_text())
    text["thread"] = text.pop("threads")
    path.write_text(json.dumps(text))
    with pytest.raises(ValueError, match=r"missing \['threads'\], unknown \['thread'\]"):
        LearnerSpec.load(path)

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    bad = dataclasses.replace(spec, samples_per_gradient=spec.samples_per_gradient + 1)
    monkeypatch.setattr(launcher, "learner_spec", lambda *args: bad)
    with pytest.raises(RunFailure, match=r"not one they can run: window: H·μ = 2·32 ≠ samples_per_gradient=65$") as e:
        launcher.train_dist(setup, run_dir)
    assert "\n" not in str(e.value)
    assert not (run_dir / "dist_pids.json").exists() and not list(run_dir.glob("learner_*"))  # nothing started


def test_replay_stops_at_the_simulators_loss_rule_update(compose_cfg, run_psbench, tmp_path):
    """The loss rule (psbench.ps.divergence) runs in the dist PS as in the simulator: async λ = 8 at α0 = 0.5 on
    digits stays finite but climbs past 4× its start; the replay stops at the same update, with the same weights."""
    sim, dist = _replay_against_sim(
        compose_cfg,
        run_psbench,
        tmp_path,
        *("protocol=async", "learners=8", "batch_size=8", "epochs=1", "optimizer.lr=0.5", "logger=none"),
        *("trainer.num_threads=1", "trainer.checkpoint_every=0"),
    )
    assert sim["status"] == dist["status"] == "diverged"
    assert dist["diverged_at_update"] == sim["diverged_at_update"] is not None
    assert dist["divergence"] == sim["divergence"] and "(mean of 128 updates)" in sim["divergence"]
    assert dist["weights_sha256"] == sim["weights_sha256"]
