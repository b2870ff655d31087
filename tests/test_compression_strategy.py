"""Compression inside the strategy: each learner's gradient is compressed on its own, bytes are exact."""

from __future__ import annotations

import warnings

import pytest
import torch

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.compression.pipeline import LearnerCompression
from psbench.lr import LRPolicy
from psbench.models import build_model
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)


def run(dm, proto: Protocol, options: dict | None, mu=8, gradients=64, batching="auto"):
    sched = Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, 0).run())
    torch.manual_seed(0)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    comp = (
        None
        if options is None
        else LearnerCompression(options, {k: v.shape for k, v in net.named_parameters()}, seed=0)
    )
    strategy = ParameterServerStrategy(sched, batching, compression=comp)
    data = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy(), mu, proto.learners, 0)
    fit_updates(strategy, ClassifierModule(net, {"name": "sgd", "lr": 0.05, "momentum": 0.9}), data)
    return net, strategy, sched


def weights(net) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


@pytest.mark.parametrize("batching", ["auto", "loop"])
def test_per_learner_path_with_codec_none_equals_the_aggregated_path(digits, batching):
    proto = Protocol("softsync", 4, n=2)
    ref, _, _ = run(digits, proto, None)
    got, strat, sched = run(digits, proto, {"name": "none"}, batching=batching)
    assert torch.allclose(weights(ref), weights(got), atol=1e-5)
    assert strat.bytes_pushed == sched.num_gradients * strat.compression.push_bytes()


def test_terngrad_compresses_every_learner_with_its_own_state(digits):
    proto = Protocol("hardsync", 4)
    ref, _, _ = run(digits, proto, None)
    opts = {"name": "terngrad", "clip": 2.5, "share_scalers": True, "localize": True, "error_feedback": True}
    net, strat, sched = run(digits, proto, opts)
    comp = strat.compression
    assert sorted(comp.codecs) == [0, 1, 2, 3]  # one codec state (EF memory) per learner
    assert all(len(c.memory) == len(list(net.parameters())) for c in comp.codecs.values())
    measured = strat.bytes_pushed
    assert measured == sched.num_gradients * comp.push_bytes()
    assert 15 < 4 * sum(p.numel() for p in net.parameters()) / (measured / sched.num_gradients) < 16
    d = (weights(net) - weights(ref)).abs().max()
    assert 0 < d < 1.0  # compressed, not diverged
    again, strat2, _ = run(digits, proto, opts)
    assert torch.equal(weights(again), weights(net))  # seeded codec streams: deterministic
    state = strat2.compression.state_dict()
    assert set(state["codecs"]) == {0, 1, 2, 3}


@pytest.mark.parametrize("protocol", ["async", "hardsync"])
def test_a_diverged_run_counts_the_bytes_pushed_up_to_its_divergence(compose_cfg, tmp_path, protocol):
    """A divergence read back late (once per look-ahead flush) rolls back the updates after it: their pushes are
    taken back too, so ``bytes_pushed_measured`` is that of checking every update before its step — the run
    stopped just before the non-finite update, plus that update's own pushes (its learners pushed it; the PS did
    not apply it). Before, a diverged async run counted every update of the flush it was read back in."""
    from psbench.train import train

    case = ("trainer.progress=none", "trainer.num_threads=1", "batch_size=8", "logger=none", f"protocol={protocol}")
    case += ("learners=4", "epochs=1", "optimizer.lr=1000", "compression=signsgd")
    (tmp_path / "div").mkdir()
    (tmp_path / "ref").mkdir()
    div = train(compose_cfg(*case), tmp_path / "div")
    assert div["status"] == "diverged" and div["updates_done"] == div["diverged_at_update"] > 1
    ref = train(compose_cfg(*case, f"trainer.max_updates={div['updates_done']}"), tmp_path / "ref")
    per_update = ref["bytes_pushed_measured"] // ref["updates_done"]  # signSGD: the same bytes every push
    assert ref["bytes_pushed_measured"] == per_update * ref["updates_done"]
    assert div["bytes_pushed_measured"] == ref["bytes_pushed_measured"] + per_update
