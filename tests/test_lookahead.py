"""Look-ahead execution: gradients of upcoming updates computed in batches, same weights.

Against the execution without look-ahead (``ahead=0``: every update's gradients when it is reached):
bit-identical in the ``loop`` mode, equal to float tolerance otherwise, and the batches really span updates.
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
from psbench.ps.snapshots import SnapshotStore
from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches
from psbench.strategy.lookahead import GATHER_SAMPLES

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)
PROTOCOLS = {
    "30-softsync": Protocol("softsync", 30, n=30),
    "async": Protocol("async", 16),
    "ssp-s3": Protocol("ssp", 16, staleness_bound=3),
    "1-softsync": Protocol("softsync", 8, n=1),
}


def fit(dm, proto: Protocol, gradients: int, mu: int = 4, batching: str = "auto", model: str = "mlp", **kw):
    sched = Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, 0).run())
    torch.manual_seed(0)
    net = build_model(model, dm.input_shape, dm.num_classes)
    strategy = ParameterServerStrategy(sched, batching, **kw)
    data = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy("per_gradient"), mu, proto.learners, 0)
    fit_updates(strategy, ClassifierModule(net, {"name": "sgd", "lr": 0.05, "momentum": 0.9}), data)
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


def test_conv_net_on_the_cpu_computes_grouped_in_channels_last_to_the_loops_weights(digits):
    """auto on a conv net on the CPU: one forward/backward per (update, snapshot), samples in NHWC."""
    proto = PROTOCOLS["30-softsync"]
    got, strat, _ = fit(digits, proto, 240, model="cifar_cnn")
    ref, _, _ = fit(digits, proto, 240, model="cifar_cnn", batching="loop", ahead=0)
    assert strat.lookahead.channels_last and not strat.lookahead.vmap_pays
    assert torch.allclose(got, ref, atol=1e-5)


def test_a_conv_nets_snapshots_are_channels_last_and_give_the_same_weights(digits, monkeypatch):
    """``grouped`` on a conv net on the CPU copies conv weights into snapshots in channels_last, the layout its
    convolutions on channels_last samples read: the same values, so the same weights as NCHW snapshots to float
    tolerance (oneDNN may pick another kernel for another weight layout)."""
    copy = SnapshotStore._copy
    layouts: list[tuple[bool, bool]] = []

    def spy(self, v):
        out = copy(self, v)
        if out.dim() == 4:
            layouts.append((out.is_contiguous(memory_format=torch.channels_last), out.is_contiguous()))
        return out

    monkeypatch.setattr(SnapshotStore, "_copy", spy)
    proto = PROTOCOLS["async"]
    got, strat, _ = fit(digits, proto, 480, model="cifar_cnn")
    monkeypatch.setattr(SnapshotStore, "_copy", lambda self, v: v.clone())  # NCHW snapshots
    ref, _, _ = fit(digits, proto, 480, model="cifar_cnn")
    assert strat.lookahead.snapshots.channels_last and layouts
    assert all(cl for cl, _ in layouts) and not all(nchw for _, nchw in layouts)
    assert torch.allclose(got, ref, atol=1e-5)


@pytest.mark.parametrize("name, mu", [("async", 4), ("1-softsync", 4), ("async", 100)])
def test_grouped_units_share_a_gather_of_at_most_gather_samples(digits, monkeypatch, name, mu):
    """A conv net's small units are gathered together (one index and layout copy for ~32 units of 4 samples),
    never more than GATHER_SAMPLES samples at once unless one unit alone is larger (then alone, as before):
    memory stays what the units need, not what a look-ahead batch spans."""
    sizes: list[int] = []
    samples = UpdateBatches.samples

    def spy(self, rows):
        sizes.append(len(rows) * self.spg)
        return samples(self, rows)

    monkeypatch.setattr(UpdateBatches, "samples", spy)
    got, strat, sched = fit(digits, PROTOCOLS[name], 1_920 // mu, mu=mu, model="cifar_cnn")
    la = strat.lookahead
    unit = np.unique(sched.update_index.astype(np.int64) * (sched.num_updates + 1) + sched.ts, return_counts=True)[1]
    assert max(sizes) <= max(GATHER_SAMPLES, unit.max() * mu)
    assert sum(sizes) == sched.num_gradients * mu  # every sample gathered once
    if unit.max() * mu <= GATHER_SAMPLES // 4:  # small units: several share a gather
        assert len(sizes) < 0.5 * len(unit)
    monkeypatch.setattr(UpdateBatches, "samples", samples)
    ref, _, _ = fit(digits, PROTOCOLS[name], 1_920 // mu, mu=mu, model="cifar_cnn", ahead=0)
    assert la.channels_last and torch.allclose(got, ref, atol=1e-5)


def test_a_net_sharing_a_parameter_gets_the_gradient_of_both_uses(digits):
    """The look-ahead's functional calls skip the search for tied weights unless the net shares a parameter
    under two names; one that does still gets the gradient through both uses (hardsync: the batch's mean loss)."""
    from psbench.strategy.lookahead import Lookahead

    torch.manual_seed(0)
    a, b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
    b.weight = a.weight  # one Parameter under the names 1.weight and 3.weight
    net = torch.nn.Sequential(torch.nn.Flatten(), a, torch.nn.Tanh(), b, torch.nn.Linear(64, 10))
    sched = Schedule.collect(Simulator(Protocol("hardsync", 4), COST, Topology(), 4, 16, 0).run())
    data = UpdateBatches(sched, digits.x_train, digits.y_train, 4, LRPolicy(), 4, 4, 0)
    loss = lambda z, y: torch.nn.functional.cross_entropy(z, y, reduction="none")  # noqa: E731
    ahead = Lookahead(sched, data, net, loss, mode="grouped")
    params = dict(net.named_parameters())
    got, _ = ahead.update_gradient(0, params)
    x, y = data.samples(sched.rows(0))
    want = torch.autograd.grad(loss(net(x), y).mean(), list(params.values()))
    for k, w in zip(params, want, strict=True):
        assert torch.allclose(got[k], w, atol=1e-6), k
    assert ahead.tied


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


def test_a_dropped_snapshots_buffers_hold_the_next_one(digits, monkeypatch):
    """Snapshots are copied into dropped snapshots' buffers (one ``_foreach_copy_``): a run allocates snapshot
    buffers only while it holds more snapshots than ever before, never one per snapshot taken, and the weights are
    those of fresh buffers for every snapshot, bit for bit. Results that are views of a vmapped flush's tensor
    count their bytes until the last is used."""
    copy, take, advance = SnapshotStore._copy, SnapshotStore._take, SnapshotStore.advance
    allocated, taken, held = [0], [0], [0]

    def spy_copy(self, v):
        allocated[0] += 1
        return copy(self, v)

    def spy_take(self, params):
        taken[0] += 1
        return take(self, params)

    def spy_advance(self, ts, params):
        advance(self, ts, params)
        held[0] = max(held[0], len(self))

    monkeypatch.setattr(SnapshotStore, "_copy", spy_copy)
    monkeypatch.setattr(SnapshotStore, "_take", spy_take)
    monkeypatch.setattr(SnapshotStore, "advance", spy_advance)
    got, strat, _ = fit(digits, PROTOCOLS["async"], 960)
    sets = allocated[0] / len(strat.lookahead.weights())
    assert 0 < sets <= held[0] and taken[0] > 4 * sets
    assert strat.lookahead.result_bytes == 0 and not strat.lookahead._blocks

    def fresh(self, params):  # every snapshot in new buffers
        with torch.no_grad():
            return {k: copy(self, v) for k, v in params.items()}

    monkeypatch.setattr(SnapshotStore, "_take", fresh)
    ref, _, _ = fit(digits, PROTOCOLS["async"], 960)
    assert torch.equal(got, ref)


def test_free_snapshot_slots_stay_within_the_memory_budget(digits):
    """The dropped snapshots' buffers kept for the next count in what is held, and a flush releases those that do
    not fit its budget: at λ = 64 with a tight budget, keeping them all would hold 52 weight copies against 42."""
    proto = Protocol("async", 64)
    p_bytes = sum(p.numel() * 4 for p in build_model("mlp", digits.input_shape, digits.num_classes).parameters())
    free, unbounded, _ = fit(digits, proto, 1280)
    budget = unbounded.lookahead.minimum_bytes(p_bytes) + 8 * p_bytes
    got, bounded, _ = fit(digits, proto, 1280, memory_budget_bytes=budget)
    assert bounded.lookahead.snapshots.free_bytes > 0  # slots are kept
    assert 0 < bounded.peak_snapshot_bytes <= budget < unbounded.peak_snapshot_bytes
    assert torch.allclose(got, free, atol=1e-5)


def test_peak_count_is_what_update_by_update_execution_holds():
    sched = Schedule.collect(Simulator(Protocol("async", 10), COST, Topology(), 4, 600, 0).run())
    store, peak, params = SnapshotStore(sched), 0, {"w": torch.zeros(3)}
    for i in range(sched.num_updates):
        store.advance(i, params)
        peak = max(peak, len(store))
    assert peak == SnapshotStore.peak_count(sched) > 1


SYNTH_CIFAR = (
    "trainer.progress=none",
    "dataset=synthetic",
    "dataset.shape=[3,32,32]",
    "dataset.num_test=100",
    "model=cifar_cnn",
    "batch_size=4",
    "protocol=async",
    "trainer.eval_every_epochs=100",
    "hardware=p775",
)


def _train(compose_cfg, tmp_path, *overrides):
    from psbench.train import train

    out = tmp_path / "run"
    out.mkdir(parents=True, exist_ok=True)
    return train(compose_cfg(*overrides), out)


def test_a_schedule_that_cannot_fit_the_budget_is_refused_up_front(compose_cfg, tmp_path):
    from psbench.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _train(
            compose_cfg, tmp_path, *SYNTH_CIFAR, "learners=200", "dataset.num_train=8000", "trainer.memory_budget_mb=10"
        )  # p775: up to 72 distinct snapshots in flight
    line = str(err.value)
    assert err.value.key == "trainer.memory_budget_mb" and "\n" not in line
    assert line.startswith("trainer.memory_budget_mb=10 is invalid: allowed at least ")
    assert "weight snapshots of 0.34 MiB" in line  # the CIFAR CNN's 89,578 float32 parameters
    assert not (tmp_path / "run" / "weights.pt").exists()


@pytest.mark.slow
def test_async_with_1000_learners_on_the_cifar_cnn_runs_within_its_budget(compose_cfg, tmp_path):
    """λ = 1,000: ~1,000 gradients of the CIFAR CNN in flight (0.34 MiB each); computing them all ahead would
    hold ~340 MiB, the 100 MiB budget makes the look-ahead shrink."""
    s = _train(
        compose_cfg,
        tmp_path,
        *SYNTH_CIFAR,
        "learners=1000",
        "dataset.num_train=8000",
        "epochs=2",
        "lr_policy=mean_staleness",
        "trainer.memory_budget_mb=100",
    )
    assert s["status"] == "finished" and s["updates_done"] == s["ps_updates"] == 4000
    assert s["staleness_max"] > 900
    assert 20 * 2**20 < s["peak_snapshot_bytes"] <= 100 * 2**20


DEVICE_RUN = (
    "trainer.progress=none",
    "epochs=1",
    "protocol=softsync",
    "protocol.n=4",
    "learners=8",
    "batch_size=8",
    "lr_policy=mean_staleness",
)


def test_accelerator_cpu_is_the_default_and_a_missing_device_is_refused(compose_cfg, tmp_path):
    from psbench.errors import ConfigError

    default = _train(compose_cfg, tmp_path, *DEVICE_RUN)
    cpu = _train(compose_cfg, tmp_path, *DEVICE_RUN, "trainer.accelerator=cpu")
    assert cpu["weights_sha256"] == default["weights_sha256"] and default["peak_snapshot_bytes"] > 0
    missing = "cuda" if not torch.cuda.is_available() else "mps" if not torch.backends.mps.is_available() else None
    if missing is None:
        pytest.skip("both CUDA and MPS are present: no missing device to refuse")
    with pytest.raises(ConfigError, match=rf"trainer.accelerator='{missing}' is invalid: .*no {missing} device"):
        _train(compose_cfg, tmp_path, *DEVICE_RUN, f"trainer.accelerator={missing}")


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device on this machine: the CUDA run cannot be compared with the CPU run",
)
def test_cuda_gives_the_cpu_weights_to_float_tolerance(compose_cfg, tmp_path):
    cpu = _train(compose_cfg, tmp_path / "cpu", *DEVICE_RUN, "trainer.accelerator=cpu")
    cuda = _train(compose_cfg, tmp_path / "cuda", *DEVICE_RUN, "trainer.accelerator=cuda")
    assert cuda["status"] == "finished" and cuda["updates_done"] == cpu["updates_done"]
    assert abs(cuda["test_loss"] - cpu["test_loss"]) < 1e-3 and abs(cuda["train_loss"] - cpu["train_loss"]) < 1e-3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: nothing to run there")
def test_cuda_trains_cifarnet_under_the_default_deterministic_mode(compose_cfg, tmp_path, monkeypatch):
    """TernGrad's CifarNet (across-channel LRN) on a GPU under ``trainer.deterministic`` (the default): its LRN's
    backward was ``avg_pool3d``'s, which has no deterministic CUDA kernel, so the run failed at its first gradient;
    it now ends as the CPU run does, to float tolerance. cuDNN's convolutions run in TF32 by default (a 10-bit
    mantissa: on an H200 the test losses were 2.1e-3 apart, 2026-11-29); float32 here, as on the CPU."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    data = ("dataset=synthetic", "dataset.shape=[3,32,32]", "dataset.num_train=256", "dataset.num_test=64")
    args = (*DEVICE_RUN, *data, "model=cifarnet")
    cpu = _train(compose_cfg, tmp_path / "cpu", *args, "trainer.accelerator=cpu")
    cuda = _train(compose_cfg, tmp_path / "cuda", *args, "trainer.accelerator=cuda")
    assert cuda["status"] == "finished" and cuda["updates_done"] == cpu["updates_done"]
    assert abs(cuda["test_loss"] - cpu["test_loss"]) < 1e-3


def test_a_checkpoint_written_without_look_ahead_resumes_to_the_same_weights(compose_cfg, tmp_path, monkeypatch):
    """Its state holds only the snapshots; the resumed run continues update by update, then looks ahead."""
    from psbench.checkpoint import CHECKPOINT_FILE, Plan, RunStopped, load
    from psbench.strategy.lookahead import Lookahead
    from psbench.train import train

    init = Lookahead.__init__

    def update_by_update(self, *a, **kw):  # the execution that wrote such checkpoints
        init(self, *a, **{**kw, "ahead": 0})

    args = (
        "trainer.progress=none",
        "trainer.num_threads=1",
        "epochs=1",
        "batch_size=8",
        "protocol=softsync",
        "protocol.n=4",
        "learners=8",
        "trainer.batching=loop",
    )
    cfg = compose_cfg(*args)
    (tmp_path / "full").mkdir()
    full = train(cfg, tmp_path / "full", None, None)
    d = tmp_path / "cut"
    d.mkdir()
    monkeypatch.setattr(Lookahead, "__init__", update_by_update)
    with pytest.raises(RunStopped):
        train(cfg, d, None, Plan(d / CHECKPOINT_FILE, stop_after=13))
    monkeypatch.undo()
    state = load(d / CHECKPOINT_FILE)
    del state["strategy"]["lookahead"]  # as written before look-ahead execution
    assert len(state["strategy"]["snapshots"]) > 0
    resumed = train(cfg, d, None, Plan(d / CHECKPOINT_FILE, state=state))
    assert resumed["weights_sha256"] == full["weights_sha256"]


@pytest.mark.parametrize("every", [1, 0.7])
def test_the_summarys_test_error_and_loss_are_the_final_weights_evaluation(compose_cfg, tmp_path, monkeypatch, every):
    """The run's test error and loss equal evaluate() of the saved weights exactly: with an evaluation after the
    last update (every epoch) the run reuses its sums instead of evaluating again; with none (every 0.7 epoch of
    one) it evaluates. 300 test images: three batches of ``eval_batch_size`` 128, summed in the same order."""
    from psbench.assemble import build_data_and_model
    from psbench.models.evaluate import evaluate

    cfg = compose_cfg(
        "trainer.progress=none",
        "dataset=synthetic",
        "dataset.shape=[3,32,32]",
        "dataset.num_test=300",
        "dataset.num_train=400",
        "model=cifar_cnn",
        "epochs=1",
        "protocol=softsync",
        "protocol.n=2",
        "learners=4",
        "batch_size=8",
        f"trainer.eval_every_epochs={every}",
        "dataset.eval_batch_size=128",
    )
    from psbench.strategy import executor
    from psbench.train import train

    calls = []
    monkeypatch.setattr(executor, "evaluate", lambda *a, **k: calls.append(1) or evaluate(*a, **k))  # counts calls
    s = train(cfg, tmp_path)
    assert len(calls) == (0 if every == 1 else 1)
    dm, net = build_data_and_model(cfg)
    net.load_state_dict(torch.load(tmp_path / "weights.pt"))
    x = dm.x_test.contiguous(memory_format=torch.channels_last)
    assert (s["test_error"], s["test_loss"]) == evaluate(net, x, dm.y_test, batch=dm.eval_batch_size)
    assert dm.eval_batch_size == 128 and 0.0 < s["test_error"] < 1.0


def test_a_checkpoints_look_ahead_state_moves_to_where_the_data_lives(digits):
    """A checkpoint is loaded onto the CPU; resumed on a GPU, the snapshots, the gradients computed ahead and their
    BatchNorm statistics must be on the GPU, or the first stale gradient mixes devices (found by reading: every
    CUDA resume of async, softsync or SSP failed at its first update). ``meta`` stands in for the GPU here."""
    from types import SimpleNamespace

    from psbench.strategy.lookahead import Lookahead

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    sched = Schedule.collect(Simulator(Protocol("async", 4), COST, Topology(), 4, 16, 0).run())
    data = UpdateBatches(sched, digits.x_train, digits.y_train, 4, LRPolicy(), 4, 4, 0)
    loss = lambda z, y: torch.nn.functional.cross_entropy(z, y, reduction="none")  # noqa: E731
    cl = torch.ones(1, 2, 3, 3).to(memory_format=torch.channels_last)
    sd = {
        "snapshots": {0: {"1.weight": torch.ones(10, 64), "conv": cl}},
        "readers": np.ones(sched.num_updates + 1, dtype=np.int64),
        "computed": np.zeros(sched.num_gradients, dtype=bool),
        "results": {3: [{"1.weight": torch.ones(10, 64)}, torch.tensor(1.0), 4]},
        "peak_bytes": 0,
        "row_stats": {2: {"bn.running_mean": torch.zeros(3)}},
    }
    ahead = Lookahead(sched, data, net, loss, mode="grouped")
    ahead.data = SimpleNamespace(x=torch.empty(0, device="meta"))
    ahead.load_state_dict(sd)
    moved = [*ahead.snapshots[0].values(), *ahead.results[3][0].values(), ahead.results[3][1]]
    moved += list(ahead.row_stats[2].values())
    assert all(t.device.type == "meta" for t in moved)
    assert ahead.snapshots[0]["conv"].is_contiguous(memory_format=torch.channels_last)
    assert ahead.results[3][2] == 4
    ahead.resume_update_by_update(0, {0: {"1.weight": torch.ones(10, 64)}})
    assert ahead.snapshots[0]["1.weight"].device.type == "meta"


def test_a_users_net_with_dropout_is_vmapped_each_row_with_its_own_masks(digits):
    """A user's MLP with dropout (``model._target_``): vmap refused every random op ("randomness error mode"), so
    async over it crashed on the CPU, and any net with dropout on a GPU, where conv nets are vmapped too. Each row
    now draws its own masks, as each learner would; the same seed gives the same gradients."""
    from psbench.strategy.lookahead import Lookahead

    def gradients(p: float, seed: int) -> list[torch.Tensor]:
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.Dropout(p), torch.nn.ReLU(), torch.nn.Linear(32, 10)
        )
        sched = Schedule.collect(Simulator(Protocol("async", 16), COST, Topology(), 4, 64, 0).run())
        data = UpdateBatches(sched, digits.x_train, digits.y_train, 4, LRPolicy(), 4, 16, 0)
        loss = lambda z, y: torch.nn.functional.cross_entropy(z, y, reduction="none")  # noqa: E731
        ahead = Lookahead(sched, data, net, loss)
        assert ahead.vmap_pays  # an MLP is vmapped on the CPU too
        params = dict(net.named_parameters())
        torch.manual_seed(seed)
        got = [ahead.update_gradient(i, params)[0]["1.weight"] for i in range(sched.num_updates)]
        assert max(ahead.batch_rows) > ahead.vmap_threshold  # rows were vmapped: the path that refused dropout
        return got

    a, b, other, none = gradients(0.5, 1), gradients(0.5, 1), gradients(0.5, 2), gradients(0.0, 1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(torch.stack(a), torch.stack(other)) and not torch.equal(torch.stack(a), torch.stack(none))
    assert all(torch.isfinite(g).all() for g in a)
