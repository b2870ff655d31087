"""Look-ahead execution (issue 14, item 1): gradients of upcoming updates computed in batches, same weights.

Against the execution without look-ahead (``ahead=0``: every update's gradients when it is reached):
bit-identical in the ``loop`` mode, equal to float tolerance otherwise, and the batches really span updates.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.lr import LRPolicy
from psbench.models import build_model
from psbench.ps import Protocol, Schedule, Simulator
from psbench.ps.snapshots import SnapshotStore
from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)
PROTOCOLS = {"30-softsync": Protocol("softsync", 30, n=30), "async": Protocol("async", 16),
             "ssp-s3": Protocol("ssp", 16, staleness_bound=3), "1-softsync": Protocol("softsync", 8, n=1)}


def fit(dm, proto: Protocol, gradients: int, mu: int = 4, batching: str = "auto", **kw):
    sched = Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, 0).run())
    torch.manual_seed(0)
    net = build_model("mlp", dm.input_shape, dm.num_classes)
    strategy = ParameterServerStrategy(sched, batching, **kw)
    trainer = pl.Trainer(strategy=strategy, accelerator="cpu", max_epochs=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         limit_val_batches=0, deterministic=True)
    data = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy("per_gradient"), mu, proto.learners, 0)
    trainer.fit(ClassifierModule(net, {"name": "sgd", "lr": 0.05, "momentum": 0.9}),
                train_dataloaders=torch.utils.data.DataLoader(data, batch_size=None))
    assert strategy.updates_done == sched.num_updates
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), strategy, sched


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_loop_mode_with_look_ahead_is_bit_identical_to_update_by_update(digits, name):
    ahead, strat, sched = fit(digits, PROTOCOLS[name], 480, batching="loop")
    plain, base, _ = fit(digits, PROTOCOLS[name], 480, batching="loop", ahead=0)
    assert torch.equal(ahead, plain)
    assert len(base.lookahead.batch_rows) == sched.num_updates  # ahead=0: one batch per update
    assert max(strat.lookahead.batch_rows) > np.diff(sched.offsets).max()  # look-ahead: batches span updates
    assert not strat.lookahead.results and strat.lookahead.computed.all()


@pytest.mark.parametrize("name", ["30-softsync", "async", "ssp-s3"])
def test_look_ahead_batches_many_gradients_of_the_asynchronous_protocols(digits, name):
    got, strat, sched = fit(digits, PROTOCOLS[name], 480)
    ref, _, _ = fit(digits, PROTOCOLS[name], 480, ahead=0)
    assert torch.allclose(got, ref, atol=1e-5)
    rows = np.asarray(strat.lookahead.batch_rows)
    assert rows.sum() == sched.num_gradients
    assert rows.mean() > 0.5 * sched.staleness.mean()  # ~σ gradients (one per update) per batched call


def test_codec_path_looks_ahead_too(digits):
    opts = {"name": "terngrad", "clip": 2.5, "error_feedback": True}

    def codec(net_shapes):
        from psbench.compression.pipeline import LearnerCompression

        return LearnerCompression(opts, net_shapes, seed=0)

    shapes = {k: v.shape for k, v in build_model("mlp", digits.input_shape, digits.num_classes).named_parameters()}
    proto = Protocol("softsync", 8, n=4)
    got, strat, _ = fit(digits, proto, 320, compression=codec(shapes))
    ref, _, _ = fit(digits, proto, 320, compression=codec(shapes), ahead=0)
    assert torch.allclose(got, ref, atol=1e-5)
    assert max(strat.lookahead.batch_rows) > 2


def test_memory_budget_bounds_what_is_held(digits):
    proto = PROTOCOLS["async"]
    free, unbounded, sched = fit(digits, proto, 640)
    p_bytes = sum(p.numel() * 4 for p in build_model("mlp", digits.input_shape, digits.num_classes).parameters())
    minimum = unbounded.lookahead.minimum_bytes(p_bytes)
    assert minimum == (SnapshotStore.peak_count(sched) + 3) * p_bytes
    budget = minimum + 4 * p_bytes
    assert unbounded.peak_snapshot_bytes > budget  # the budget binds
    got, bounded, _ = fit(digits, proto, 640, memory_budget_bytes=budget)
    assert 0 < bounded.peak_snapshot_bytes <= budget
    assert torch.allclose(got, free, atol=1e-5)
    assert max(bounded.lookahead.batch_rows) < max(unbounded.lookahead.batch_rows)


def test_peak_count_is_what_update_by_update_execution_holds():
    sched = Schedule.collect(Simulator(Protocol("async", 10), COST, Topology(), 4, 600, 0).run())
    store, peak, params = SnapshotStore(sched), 0, {"w": torch.zeros(3)}
    for i in range(sched.num_updates):
        store.advance(i, params)
        peak = max(peak, len(store))
    assert peak == SnapshotStore.peak_count(sched) > 1
