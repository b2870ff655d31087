"""The Lightning strategy executes schedules exactly (issue: The harness).

Rudra Eq 7 (hardsync λ×μ ≡ one learner of μλ), async λ = 1 ≡ SGD, batched ≡ per-learner
gradients, snapshots are freed, determinism of weights.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.lr import LRPolicy
from psbench.models import build_model
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import (
    ClassifierModule,
    ParameterServerStrategy,
    SampleStream,
    SnapshotStore,
    UpdateBatches,
)
from psbench.strategy.lookahead import Lookahead

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)


def schedule(proto: Protocol, mu: int, gradients: int, seed: int = 0) -> Schedule:
    return Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, seed).run())


def run(
    dm,
    sched: Schedule,
    mu: int,
    learners: int,
    policy: LRPolicy | None = None,
    optimizer=None,
    batching="auto",
    model="mlp",
    seed=0,
) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = build_model(model, dm.input_shape, dm.num_classes)
    module = ClassifierModule(net, optimizer or {"name": "sgd", "lr": 0.05, "momentum": 0.9})
    strategy = ParameterServerStrategy(sched, batching)
    batches = UpdateBatches(sched, dm.x_train, dm.y_train, mu, policy or LRPolicy(), mu, learners, seed)
    fit_updates(strategy, module, batches)
    assert strategy.updates_done == sched.num_updates
    return net


def max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_hardsync_equals_one_learner_with_batch_mu_lambda(digits):
    """Rudra Eq 7: (σ, μ, λ) = (0, 8, 4) ≡ (0, 32, 1) on the same sample order, momentum SGD, 20 updates."""
    lam, mu = 4, 8
    many = run(digits, schedule(Protocol("hardsync", lam), mu, 20 * lam), mu, lam)
    one = run(digits, schedule(Protocol("hardsync", 1), mu * lam, 20), mu * lam, 1)
    assert max_diff(many, one) <= 1e-5
    # and it is not vacuous: a different sample order gives different weights
    other = run(digits, schedule(Protocol("hardsync", 1), mu * lam, 20), mu * lam, 1, seed=1)
    assert max_diff(other, one) > 1e-3


def test_async_with_one_learner_is_plain_sgd(digits):
    mu, steps = 16, 25
    ps = run(digits, schedule(Protocol("async", 1), mu, steps), mu, 1)
    torch.manual_seed(0)
    net = build_model("mlp", digits.input_shape, digits.num_classes)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    stream = SampleStream(len(digits.x_train), 0)
    for i in range(steps):
        idx = stream.indices(i * mu, mu)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(digits.x_train[idx]), digits.y_train[idx]).backward()
        opt.step()
    assert max_diff(ps, net) <= 1e-6


def update_gradients(net, batches: UpdateBatches, sched: Schedule, snaps: dict, mode: str, updates: int) -> list:
    """(gradient, mean loss) of updates 0..updates-1 computed by :class:`Lookahead` in ``mode``, update i's
    master weights being ``snaps[i]`` (distinct per timestamp, so every snapshot a row reads matters)."""
    ahead = Lookahead(sched, batches, net, ClassifierModule.loss, mode=mode)
    return [ahead.update_gradient(i, snaps[i]) for i in range(updates)]


@pytest.mark.parametrize("model", ["mlp", "cifar_cnn"])
def test_batched_gradients_equal_each_learner_alone(digits, model):
    """grouped (shared snapshots in one call) and vmap (torch.func over snapshots) ≡ a per-learner loop."""
    lam, mu = 12, 4
    sched = schedule(Protocol("softsync", lam, n=3), mu, 12 * 40)
    x = digits.x_train if model == "mlp" else torch.randn(len(digits.x_train), 1, 28, 28)
    shape = tuple(x.shape[1:])
    batches = UpdateBatches(sched, x, digits.y_train, mu, LRPolicy("per_gradient"), mu, lam, 0)
    torch.manual_seed(0)
    net = build_model(model, shape, 10)
    snaps = {}
    for t in range(sched.num_updates + 1):  # distinct random weights per timestamp
        snaps[t] = {k: v.detach() + 0.01 * torch.randn_like(v) for k, v in net.named_parameters()}
    multi = [i for i in range(5, sched.num_updates) if len(batches[i].groups) >= 2][:4]
    assert len(multi) == 4, "the schedule has too few updates reading two snapshots"
    ref = update_gradients(net, batches, sched, snaps, "loop", multi[-1] + 1)
    for mode in ("grouped", "vmap"):
        got = update_gradients(net, batches, sched, snaps, mode, multi[-1] + 1)
        for i in range(multi[-1] + 1):
            assert torch.allclose(got[i][1], ref[i][1], atol=1e-6), (mode, i)
            for k in ref[i][0]:
                assert torch.allclose(got[i][0][k], ref[i][0][k], atol=1e-5, rtol=1e-4), (mode, i, k)
    # not vacuous: the same rows on another update's snapshot give another gradient
    shifted = update_gradients(
        net, batches, sched, {t: snaps[t + 1] for t in snaps if t + 1 in snaps}, "loop", multi[0] + 1
    )
    assert any(not torch.allclose(shifted[multi[0]][0][k], ref[multi[0]][0][k], atol=1e-5) for k in ref[0][0])


def test_grouped_units_larger_than_max_samples_are_computed_in_chunks(digits):
    """A conv net on the CPU computes an (update, snapshot) unit of λμ = 96 samples in chunks of ``max_samples``
    (cache-sized forwards, Lookahead's ``CPU_CONV_SAMPLES``); the summed gradient and loss equal the one-call
    gradient to float tolerance."""
    lam, mu = 4, 24
    sched = schedule(Protocol("hardsync", lam), mu, lam * 3)
    x = torch.randn(len(digits.x_train), 1, 28, 28)
    batches = UpdateBatches(sched, x, digits.y_train, mu, LRPolicy(), mu, lam, 0)
    torch.manual_seed(0)
    net = build_model("cifar_cnn", (1, 28, 28), 10)
    params = {k: v.detach() for k, v in net.named_parameters()}
    sizes: list[int] = []
    net.features.conv1.register_forward_hook(lambda m, i, o: sizes.append(len(i[0])))
    whole = Lookahead(sched, batches, net, ClassifierModule.loss, mode="grouped", max_samples=None)
    g_whole, loss_whole = whole.update_gradient(0, params)
    assert sizes == [lam * mu]
    sizes.clear()
    chunked = Lookahead(sched, batches, net, ClassifierModule.loss, mode="grouped", max_samples=40)
    g_chunked, loss_chunked = chunked.update_gradient(0, params)
    assert sizes == [40, 40, 16]
    assert torch.allclose(loss_chunked, loss_whole, atol=1e-6)
    for k in g_whole:
        assert torch.allclose(g_chunked[k], g_whole[k], atol=1e-6, rtol=1e-5), k
    sizes.clear()
    Lookahead(sched, batches, net, ClassifierModule.loss, mode="grouped").update_gradient(0, params)
    assert sizes == [lam * mu]  # "auto": whole below CPU_CONV_SAMPLES (128)
    assert Lookahead(sched, batches, net, ClassifierModule.loss).max_samples == 128
    mlp = build_model("mlp", digits.input_shape, 10)
    plain = UpdateBatches(sched, digits.x_train, digits.y_train, mu, LRPolicy(), mu, lam, 0)
    assert Lookahead(sched, plain, mlp, ClassifierModule.loss).max_samples is None  # no convolutions: one call


def test_snapshot_store_keeps_only_what_pending_learners_read():
    sched = schedule(Protocol("async", 10), 4, 3000)
    store = SnapshotStore(sched)
    params = {"w": torch.zeros(3)}
    peak = 0
    for i in range(sched.num_updates):
        params["w"].fill_(i)
        store.advance(i, params)
        for t in sched.ts[sched.rows(i)].tolist():
            if t != i:
                assert float(store[t]["w"][0]) == t  # the weights as they were at timestamp t
        peak = max(peak, len(store))
    assert peak <= sched.staleness.max() + 1
    assert len(SnapshotStore(schedule(Protocol("hardsync", 10), 4, 300))._snaps) == 0


def test_staleness_modulated_lr_changes_the_weights(digits):
    lam, mu = 8, 8
    sched = schedule(Protocol("async", lam), mu, 200)
    a = run(digits, sched, mu, lam, LRPolicy("constant"))
    b = run(digits, sched, mu, lam, LRPolicy("per_gradient"))
    c = run(digits, sched, mu, lam, LRPolicy("per_gradient"))
    assert max_diff(a, b) > 1e-4 and max_diff(b, c) == 0.0


def test_sample_stream_covers_every_sample_once_per_epoch():
    s = SampleStream(10, seed=3)
    first = torch.cat([s.indices(p, 3) for p in range(0, 9, 3)] + [s.indices(9, 1)])
    assert sorted(first.tolist()) == list(range(10))
    across = s.indices(8, 4)  # crosses into epoch 1
    assert across[:2].tolist() == first[8:].tolist()
    assert across[2:].tolist() == s.indices(10, 2).tolist()


@pytest.mark.parametrize("starts", [[4, 0, 8], [8, 27, 3, 15], [29], []])
def test_many_rows_samples_at_once_are_each_rows_samples(starts):
    """``SampleStream.rows`` (a flush's rows in a few tensor ops) is ``indices`` of every start, concatenated: any
    order, rows that cross an epoch's end or lie epochs apart."""
    s = SampleStream(10, seed=3)
    want = [i for p in starts for i in SampleStream(10, seed=3).indices(p, 3).tolist()]
    got = s.rows(np.array(starts, dtype=np.int64), 3)
    assert got.dtype == torch.int64 and got.tolist() == want


def test_in_a_users_trainer_the_built_in_door_reads_back_before_each_flush(digits):
    """``ParameterServerStrategy(schedule)`` in a user's Trainer: a user's callback may look at the weights after
    any Trainer step, so hardsync's updates are read back before each flush, as a flush holds one update (only the
    psbench command's strategy, ``defer_read_back=True``, keeps them longer): the callback sees non-finite weights
    at most at the step of the update that diverged, never after it."""
    import pytorch_lightning as pl

    lam, mu = 4, 8
    sched = schedule(Protocol("hardsync", lam), mu, 40 * lam)

    class Watch(pl.Callback):
        def __init__(self) -> None:
            self.seen: list[tuple[int, bool]] = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            self.seen.append((batch.index, all(bool(p.isfinite().all()) for p in pl_module.parameters())))

    torch.manual_seed(0)
    module = ClassifierModule(build_model("mlp", digits.input_shape, digits.num_classes), {"name": "sgd", "lr": 1e3})
    strategy = ParameterServerStrategy(sched, divergence_factor=None)
    batches = UpdateBatches(sched, digits.x_train, digits.y_train, mu, LRPolicy(), mu, lam, 0)
    watch = Watch()
    fit_updates(strategy, module, batches, callbacks=[watch])
    j = strategy.diverged_at
    assert j is not None and 0 < j < sched.num_updates - 2
    assert [i for i, finite in watch.seen if not finite] in ([], [j]), watch.seen
    assert max(i for i, _ in watch.seen) <= j + 1
