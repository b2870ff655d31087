"""Local-step protocols: DOWNPOUR windows, AGN, asynchronous EASGD, DynSGD; temporal efficiency.

Papers: Hermans et al. (AGN) Eq 1–2, Algorithm 1, Eq 4; Zhang, Choromanska, LeCun 2015 (EASGD).
"""

from __future__ import annotations

import copy
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.data import build_datamodule
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.models import build_model
from psbench.models.evaluate import weights_sha256
from psbench.optimizer.build import server_optimizer
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, SampleStream, UpdateBatch, UpdateBatches
from psbench.strategy.local_steps import LocalLearners, WindowBatches
from psbench.tracking.temporal_efficiency import mlflow_curve, temporal_efficiency
from psbench.validate import validate

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)
LOCAL = ("downpour", "agn", "aeasgd", "dynsgd")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: intra-op threads only add synchronization (10x slower on a shared 2-core machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    dm = build_datamodule("digits", tmp_path_factory.mktemp("data"), seed=0)
    dm.setup("fit")
    return dm


def schedule(proto: Protocol, mu: int, gradients: int) -> Schedule:
    return Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, 0).run())


def run(dm, proto: Protocol, mu: int, gradients: int, optimizer: dict, batching: str = "auto"):
    """Execute the schedule with the Trainer; local-step protocols get LocalLearners + the server SGD."""
    sched = schedule(proto, mu, gradients)
    torch.manual_seed(0)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    if proto.name in LOCAL:
        local = LocalLearners(proto, sched, dm.x_train, dm.y_train, mu, 0, optimizer)
        module = ClassifierModule(net, server_optimizer(optimizer))
        data = WindowBatches(sched, mu * proto.local_steps)
    else:
        local = None
        module = ClassifierModule(net, optimizer)
        data = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy(), mu, proto.learners, 0)
    strategy = ParameterServerStrategy(sched, batching, local=local)
    fit_updates(strategy, module, data)
    assert strategy.updates_done == sched.num_updates
    return net, sched, local


def max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_h1_agn_equals_downpour_equals_async_bit_for_bit(digits):
    """H = 1: AGN's commit −η·d/1 and DOWNPOUR's −η·d are the async gradient step, applied by the same
    SGD arithmetic (θ ← θ − η·g, no momentum) — same schedule, same weights hash. The reference async
    run uses the strategy's vmap gradients (the local steps are vmapped too); ``auto`` agrees to 1e-6."""
    lam, mu, g = 5, 8, 60
    sgd = {"name": "sgd", "lr": 0.05, "momentum": 0.0}
    a, sa, _ = run(digits, Protocol("async", lam), mu, g, sgd, "vmap")
    agn, sg, local = run(digits, Protocol("agn", lam, local_steps=1), mu, g, sgd)
    dp, sd, _ = run(digits, Protocol("downpour", lam, local_steps=1), mu, g, sgd)
    assert sa.sha256() == sg.sha256() == sd.sha256()  # the schedule does not see the protocol's commit rule
    assert weights_sha256(agn) == weights_sha256(dp) == weights_sha256(a)
    assert local.windows_computed == g and local.windows_computed / local.flushes > 2  # batched over learners
    auto, _, _ = run(digits, Protocol("async", lam), mu, g, sgd, "auto")
    assert max_diff(auto, agn) <= 1e-6


@pytest.mark.parametrize(
    "opt", [{"name": "sgd", "lr": 0.05, "momentum": 0.9}, {"name": "adam", "lr": 0.003, "betas": [0.9, 0.999]}]
)
def test_one_learner_agn_is_normalized_local_training(digits, opt):
    """λ = 1, H = 4, k = 5 commits. With θ_{k,0} = θ̃_k, θ_{k,h+1} = θ_{k,h} + u_{k,h} where u_{k,h} is one step of
    the learner's torch optimizer (state kept across commits) on mini-batch kH + h of the sample stream:

        AGN:      θ̃_{k+1} = θ̃_k + (1/H)·Σ_{h<H} u_{k,h} = θ̃_k + (θ_{k,H} − θ̃_k)/H      (AGN Eq 1–2)
        DOWNPOUR: θ̃_{k+1} = θ̃_k + Σ_{h<H} u_{k,h} = θ_{k,H}  (= H·k plain steps of the optimizer)

    checked against a plain PyTorch loop that does exactly that, to float32 tolerance."""
    H, K, mu = 4, 5, 8
    proto = {"agn": Protocol("agn", 1, local_steps=H), "downpour": Protocol("downpour", 1, local_steps=H)}
    got = {name: run(digits, p, mu, K, opt)[0] for name, p in proto.items()}

    def reference(normalize: bool) -> torch.nn.Module:
        torch.manual_seed(0)
        center = build_model("mlp", digits.input_shape, digits.num_classes)
        learner = copy.deepcopy(center)
        cls = torch.optim.SGD if opt["name"] == "sgd" else torch.optim.Adam
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in opt.items() if k != "name"}
        optim = cls(learner.parameters(), **kw)
        stream = SampleStream(len(digits.x_train), 0)
        for k in range(K):
            learner.load_state_dict(center.state_dict())  # pull θ̃_k
            for h in range(H):
                idx = stream.indices((k * H + h) * mu, mu)
                optim.zero_grad()
                torch.nn.functional.cross_entropy(learner(digits.x_train[idx]), digits.y_train[idx]).backward()
                optim.step()
            with torch.no_grad():
                for c, p in zip(center.parameters(), learner.parameters(), strict=True):
                    c += (p - c) / (H if normalize else 1)
        return center

    agn_ref, plain = reference(True), reference(False)
    assert max_diff(got["agn"], agn_ref) <= 2e-5
    assert max_diff(got["downpour"], plain) <= 2e-5
    assert max_diff(got["agn"], got["downpour"]) > 1e-3  # the normalization is not vacuous


def test_one_learner_aeasgd_is_elastic_averaging(digits):
    """λ = 1, α = ρη: at each pull e = α(θ_l − θ̃), θ_l ← θ_l − e, θ̃ ← θ̃ + e, then H SGD steps on θ_l."""
    H, K, mu, lr, rho = 3, 6, 8, 0.05, 4.0
    opt = {"name": "sgd", "lr": lr, "momentum": 0.0}
    got, _, local = run(digits, Protocol("aeasgd", 1, local_steps=H, rho=rho), mu, K, opt)
    torch.manual_seed(0)
    center = build_model("mlp", digits.input_shape, digits.num_classes)
    learner = copy.deepcopy(center)
    stream = SampleStream(len(digits.x_train), 0)
    for k in range(K):
        with torch.no_grad():
            for c, p in zip(center.parameters(), learner.parameters(), strict=True):
                e = lr * rho * (p - c)
                p -= e
                c += e
        for h in range(H):
            idx = stream.indices((k * H + h) * mu, mu)
            learner.zero_grad()
            torch.nn.functional.cross_entropy(learner(digits.x_train[idx]), digits.y_train[idx]).backward()
            with torch.no_grad():
                for p in learner.parameters():
                    p -= lr * p.grad
    assert max_diff(got, center) <= 1e-5
    assert float((local.local["net.0.weight"][0] - learner.net[0].weight.detach()).abs().max()) <= 1e-5


def _drive(local: LocalLearners, net, steps: int, lr: float = 0.05, start: int = 0) -> list[dict]:
    """Call update_direction on a fixed master trajectory θ_i = θ_0 + noise(i) (independent of the commits)."""
    base = {k: v.detach().clone() for k, v in net.named_parameters()}
    out = []
    for i in range(start, start + steps):
        g = torch.Generator().manual_seed(i)
        params = {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in base.items()}
        batch = UpdateBatch(i, [], 0.0, 0.0, 0)
        G, _ = local.update_direction(net, ClassifierModule.loss, batch, params, lr)
        out.append({k: v.clone() for k, v in G.items()})
    return out


def _local(dm, proto, sched, opt):
    return LocalLearners(proto, sched, dm.x_train, dm.y_train, 8, 0, opt)


def test_commit_scales_agn_over_h_and_dynsgd_over_staleness(digits):
    """On one schedule and master trajectory: G_agn = G_downpour/H and G_dynsgd,i = G_downpour,i/(σ_i + 1)."""
    H, lam = 3, 5
    sched = schedule(Protocol("agn", lam, local_steps=H), 8, 30)
    torch.manual_seed(0)
    net = build_model("mlp", digits.input_shape, digits.num_classes)
    opt = {"name": "adam", "lr": 0.003}
    runs = {
        n: _drive(_local(digits, Protocol(n, lam, local_steps=H), sched, opt), net, sched.num_updates)
        for n in ("downpour", "agn", "dynsgd")
    }
    sigma = sched.staleness
    assert sigma.max() >= 2
    for i in range(sched.num_updates):
        for k, v in runs["downpour"][i].items():
            assert torch.allclose(runs["agn"][i][k], v / H, rtol=1e-6, atol=1e-9)
            assert torch.allclose(runs["dynsgd"][i][k], v / (sigma[i] + 1), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "name,opt", [("agn", {"name": "adam", "lr": 0.003}), ("aeasgd", {"name": "sgd", "lr": 0.05, "momentum": 0.9})]
)
def test_vmapped_windows_equal_one_window_at_a_time(digits, name, opt):
    """Lazy batches of ≈λ windows (vmap over learners) give the commits of computing each window alone."""
    lam, H = 6, 3
    proto = Protocol(name, lam, local_steps=H, rho=2.0 if name == "aeasgd" else None)
    sched = schedule(proto, 8, 40)
    torch.manual_seed(0)
    net = build_model("mlp", digits.input_shape, digits.num_classes)

    class OneAtATime(LocalLearners):
        def _capture(self, i, params, net, loss, lr):
            super()._capture(i, params, net, loss, lr)
            if self.pending:
                self._flush(net, loss, lr)

    lazy = _local(digits, proto, sched, opt)
    eager = OneAtATime(proto, sched, digits.x_train, digits.y_train, 8, 0, opt)
    a, b = _drive(lazy, net, sched.num_updates), _drive(eager, net, sched.num_updates)
    assert lazy.windows_computed / lazy.flushes > 2 and eager.flushes >= 2 * lazy.flushes
    for ga, gb in zip(a, b, strict=True):
        for k in ga:
            assert torch.allclose(ga[k], gb[k], rtol=1e-4, atol=1e-6)


def test_learner_state_dict_resumes_exactly(digits):
    proto = Protocol("aeasgd", 4, local_steps=2, rho=3.0)
    sched = schedule(proto, 8, 30)
    torch.manual_seed(0)
    net = build_model("mlp", digits.input_shape, digits.num_classes)
    opt = {"name": "adam", "lr": 0.003}
    whole = _drive(_local(digits, proto, sched, opt), net, sched.num_updates)
    first = _local(digits, proto, sched, opt)
    half = sched.num_updates // 2
    _drive(first, net, half)
    sd = copy.deepcopy(first.state_dict())
    assert sd["local"]["net.0.weight"].shape[0] == 4 and "exp_avg" in sd["state"]
    resumed = _local(digits, proto, sched, opt)
    resumed.load_state_dict(sd)
    rest = _drive(resumed, net, sched.num_updates - half, start=half)
    for ga, gb in zip(whole[half:], rest, strict=True):
        for k in ga:
            assert torch.equal(ga[k], gb[k])


def test_train_runs_agn_end_to_end(compose_cfg, tmp_path):
    from psbench.train import train

    cfg = compose_cfg(
        "trainer.progress=none",
        "protocol=agn",
        "protocol.local_steps=5",
        "learners=4",
        "batch_size=16",
        "epochs=1",
        "optimizer=adam",
    )
    validate(cfg)
    (tmp_path / "run").mkdir(exist_ok=True)
    s = train(cfg, tmp_path / "run")
    assert s["status"] == "finished" and s["protocol"] == "agn-H5"
    assert s["samples"] == s["gradients"] * 16 * 5 and s["test_error"] < 0.9


def test_polynomial_decay_reaches_the_server_and_the_learners(compose_cfg, tmp_path):
    """TernGrad §4's lr decay applies to local-step runs too (server SGD and the learners read the same lr)."""
    from psbench.train import train

    base = (
        "trainer.progress=none",
        "protocol=agn",
        "protocol.local_steps=3",
        "learners=2",
        "batch_size=16",
        "epochs=1",
        "trainer.max_updates=6",
        "logger=none",
    )
    sha = {}
    for label, extra in (("const", ()), ("poly", ("optimizer.poly_power=0.5",))):
        (tmp_path / label).mkdir()
        sha[label] = train(compose_cfg(*base, *extra), tmp_path / label)["weights_sha256"]
    assert server_optimizer({"lr": 0.1, "poly_power": 0.5, "poly_epochs": 3})["poly_power"] == 0.5
    assert sha["const"] != sha["poly"]


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["protocol=async", "+protocol.local_steps=4"], "protocol.local_steps"),
        (["protocol=softsync", "protocol.n=2", "+protocol.local_steps=1"], "protocol.local_steps"),
        (["protocol=agn", "protocol.local_steps=0"], "protocol.local_steps"),
        (["protocol=dynsgd", "protocol.local_steps=2.5"], "protocol.local_steps"),
        (["protocol=aeasgd", "protocol.rho=0"], "protocol.rho"),
        (["protocol=aeasgd", "protocol.rho=-1.0"], "protocol.rho"),
        (["protocol=aeasgd", "protocol.rho=20", "optimizer.lr=0.1"], "protocol.rho"),  # ρη = 2 overshoots the center
        (["protocol=agn", "+protocol.rho=1.0"], "protocol.rho"),
    ],
)
def test_bad_local_step_input_names_the_key(compose_cfg, overrides, key):
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg(*overrides))
    assert e.value.key == key and key in str(e.value)


@pytest.mark.parametrize(
    "kw,key",
    [
        (dict(name="async", local_steps=3), "protocol.local_steps"),
        (dict(name="agn", local_steps=0), "protocol.local_steps"),
        (dict(name="aeasgd", local_steps=2), "protocol.rho"),
        (dict(name="aeasgd", rho=0.0), "protocol.rho"),
        (dict(name="dynsgd", rho=1.0), "protocol.rho"),
    ],
)
def test_protocol_refuses_bad_local_steps(kw, key):
    with pytest.raises(ConfigError) as e:
        Protocol(learners=4, **kw)
    assert e.value.key == key


def test_temporal_efficiency_eq4():
    t = np.linspace(0, 10, 11)
    assert temporal_efficiency((t, np.ones_like(t)), (t, 0.5 * np.ones_like(t))) == pytest.approx(2.0)
    # only the minimal shared time m = 5 counts: b's later (better) accuracy is ignored
    a = (t[:6], t[:6] / 10)
    b = (t, np.where(t <= 5, t / 20, 1.0))
    assert temporal_efficiency(a, b) == pytest.approx(2.0)
    assert temporal_efficiency(b, a) == pytest.approx(0.5)

    def hist(pairs):
        return [types.SimpleNamespace(step=s, value=v, timestamp=0) for s, v in pairs]

    client = types.SimpleNamespace(
        get_metric_history=lambda run, m: {
            ("r", "train_accuracy"): hist([(0, 0.1), (10, 0.5), (20, 0.9)]),
            ("r", "sim_time_s"): hist([(0, 0.0), (10, 2.0), (20, 4.0)]),
        }[(run, m)]
    )
    ts, f = mlflow_curve(client, "r")
    assert ts.tolist() == [0.0, 2.0, 4.0] and f.tolist() == [0.1, 0.5, 0.9]


def _agn_sweep_and_report(root: Path, entry: str, *args: str) -> Path:
    """Run ``python -m sweeps <entry>`` in ``root`` (its MLflow store), then the report; the report's dir."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "sweeps", entry, *args, "trainer.num_threads=1"],
        cwd=repo,  # `-m sweeps` from the repository root; the runner works in PSBENCH_ROOT
        env={**os.environ, "PSBENCH_ROOT": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    sys.path.insert(0, str(repo))
    from analysis.report import build

    build(root, root / "reports")
    return root / "reports"


@pytest.mark.slow
def test_agn_table1_ci_runs_in_one_command(tmp_path):
    """Reduced AGN Table 1 (MNIST, n ∈ {10, 20}, H ∈ {10, 20, 40}, 3 epochs, seeds 0-2) in one command; the report
    shows AGN's and AEASGD's accuracy, simulated time and E(AGN, AEASGD) per cell, the paper's numbers in the same
    row (~15 min)."""
    from analysis.runs import load_runs

    reports = _agn_sweep_and_report(tmp_path, "agn_table1", "scale=ci")
    runs = [r for r in load_runs(f"sqlite:///{tmp_path / 'mlflow.db'}") if r.tags.get("table") == "1"]
    assert len(runs) == 6 * 2 * 3  # every (n, H) cell, both optimizers, seeds 0-2
    out = (reports / "agn_table1.md").read_text()
    rows = [line for line in out.splitlines() if line.startswith("| 10 |") or line.startswith("| 20 |")]
    assert len(rows) == 6  # one row per (n, H)
    assert "1066.08" in out and "E(AGN, AEASGD)" in out  # the paper's (10, 10) cell beside ours


@pytest.mark.slow
def test_agn_fig7a_reports_dynsgd_curves(tmp_path):
    """AGN Fig 7a setting (n = 20, H = 10): the three optimizers' measured curves are tabled and plotted by the
    report, whatever DynSGD does (no tuning to make it match the paper)."""
    reports = _agn_sweep_and_report(tmp_path, "agn_fig7a")
    out = (reports / "agn_fig7.md").read_text()
    assert "| dynsgd |" in out and "| agn |" in out and "| aeasgd |" in out
    assert (reports / "agn_fig7a_ci.png").exists()
