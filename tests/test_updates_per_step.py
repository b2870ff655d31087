"""Several PS updates per Trainer step: the same run, whatever K.

``trainer.updates_per_step=K`` (null: auto) hands the Trainer K consecutive updates per step. Against K = 1:
bit-identical weights, the same per-update metrics at the same steps, evaluations after the same updates,
checkpoints and stops at the exact update (also inside a step), divergence at the same update.
"""

from __future__ import annotations

import pytest
from pytorch_lightning.loggers.logger import Logger

from psbench.checkpoint import CHECKPOINT_FILE, Plan, RunStopped, load
from psbench.strategy.chunks import MAX_UPDATES, auto_updates_per_step, bounds
from psbench.strategy.pending import Pending
from psbench.train import train

BASE = ("trainer.progress=none", "trainer.num_threads=1", "batch_size=8", "trainer.log_every_n_updates=3")
TIMING = {"samples_per_s", "wall_time_s"}  # wall-clock metrics: never equal between two runs


class History(Logger):
    """Every (step, metric, value) a run logs, wall-clock metrics left out; values as float.hex (exact, nan == nan)."""

    name, version = "history", "0"

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int | None, str, str]] = []

    @property
    def experiment(self):
        return None

    def log_metrics(self, metrics, step=None) -> None:
        self.rows += [(step, k, float(v).hex()) for k, v in sorted(metrics.items()) if k not in TIMING]

    def log_hyperparams(self, *args, **kwargs) -> None:
        pass


def _run(compose_cfg, tmp_path, name, *overrides, plan=None):
    cfg = compose_cfg(*BASE, *overrides)
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    log = History()
    return train(cfg, d, log, plan), log.rows


def test_bounds_are_runs_of_at_most_k_updates_that_never_cross_an_evaluation():
    assert bounds(0, 10, 4, 6) == [0, 4, 6, 10]
    assert bounds(7, 20, 5, 6) == [7, 12, 17, 18, 20]  # a resumed run starts mid-period
    assert bounds(0, 3, 1, 6) == [0, 1, 2, 3]


def test_auto_k_gives_a_trainer_step_about_128_samples():
    from types import SimpleNamespace as S

    assert auto_updates_per_step(S(num_updates=100, num_gradients=100), 4) == 32  # 30-softsync / async, μ = 4
    assert auto_updates_per_step(S(num_updates=100, num_gradients=3000), 4) == 1  # hardsync, μλ = 120
    assert auto_updates_per_step(S(num_updates=100, num_gradients=100), 1) == MAX_UPDATES
    assert auto_updates_per_step(S(num_updates=0, num_gradients=0), 4) == 1


@pytest.mark.parametrize(
    "case",
    [
        ("protocol=async", "learners=4", "epochs=2", "optimizer=adam"),
        (
            "protocol=softsync",
            "protocol.n=2",
            "learners=8",
            "epochs=2",
            "lr_policy=mean_staleness",
            "trainer.eval_every_epochs=1",
        ),
    ],
)
def test_k_updates_per_step_equal_one_update_per_step(compose_cfg, tmp_path, case):
    one, hist_one = _run(compose_cfg, tmp_path, "k1", *case, "trainer.updates_per_step=1")
    many, hist_many = _run(compose_cfg, tmp_path, "k7", *case, "trainer.updates_per_step=7")
    auto, hist_auto = _run(compose_cfg, tmp_path, "auto", *case)
    for got, hist in ((many, hist_many), (auto, hist_auto)):
        for key in ("weights_sha256", "test_error", "test_loss", "train_loss", "updates_done", "samples_trained"):
            assert got[key] == one[key], key
        assert hist == hist_one
    loss_steps = [s for s, k, _ in hist_one if k == "train_loss"]
    assert loss_steps == list(range(0, one["updates_done"], 3))  # each update's metrics at its own step
    evals = [s for s, k, _ in hist_one if k == "test_error"]
    assert len(evals) == 2 and 0 < evals[0] < evals[1] == one["updates_done"]  # after epoch 1, and the final one


def test_checkpoint_inside_a_trainer_step_resumes_to_the_same_run(compose_cfg, tmp_path):
    case = ("protocol=softsync", "protocol.n=4", "learners=8", "epochs=1", "trainer.updates_per_step=4")
    full, hist_full = _run(compose_cfg, tmp_path, "full", *case[:-1], "trainer.updates_per_step=1")
    d = tmp_path / "cut"
    with pytest.raises(RunStopped) as stop:  # 13 and the periodic 5, 10 lie inside steps of 4 updates
        _run(compose_cfg, tmp_path, "cut", *case, plan=Plan(d / CHECKPOINT_FILE, every=5, stop_after=13))
    state = load(d / CHECKPOINT_FILE)
    assert stop.value.update == 13 and state["update"] == 13 and state["strategy"]["updates_done"] == 13
    resumed, hist = _run(compose_cfg, tmp_path, "cut", *case, plan=Plan(d / CHECKPOINT_FILE, every=5, state=state))
    assert resumed["resumed_from_update"] == 13
    assert resumed["weights_sha256"] == full["weights_sha256"] and resumed["test_error"] == full["test_error"]
    assert hist == [r for r in hist_full if r[0] is None or r[0] >= 13]  # the rest of the history, same steps


def test_divergence_stops_at_the_same_update(compose_cfg, tmp_path):
    case = ("protocol=async", "learners=8", "epochs=1", "optimizer.lr=1000")
    one, hist_one = _run(compose_cfg, tmp_path, "k1", *case, "trainer.updates_per_step=1")
    many, hist_many = _run(compose_cfg, tmp_path, "k16", *case, "trainer.updates_per_step=16")
    assert one["status"] == many["status"] == "diverged"
    assert one["diverged_at_update"] not in (None, 0) and one["diverged_at_update"] % 16  # inside a step of 16
    for key in ("diverged_at_update", "updates_done", "weights_sha256"):
        assert many[key] == one[key], key
    assert hist_many == hist_one
    assert "diverged" in {k for _, k, _ in hist_one}


@pytest.mark.parametrize("kept", [64, 4])
@pytest.mark.parametrize("lr", ["0.05", "1000"], ids=["learns", "diverges"])
def test_hardsync_read_back_per_segment_is_the_run_read_back_per_update(compose_cfg, tmp_path, monkeypatch, lr, kept):
    """Hardsync's updates are a look-ahead flush each, and in the psbench command nothing but psbench sees the weights
    between two read-backs: the strategy reads its updates back once per ``kept`` (:attr:`Pending.MAX_UPDATES`) or
    before an evaluation, not before every flush. Against a read-back before every update: the same weights, the
    same metrics at the same steps, the divergence at the same update (found up to ``kept`` − 1 updates later: the
    weights rolled back and the updates before it applied again)."""
    case = ("protocol=hardsync", "learners=4", "epochs=1", f"optimizer.lr={lr}")
    monkeypatch.setattr(Pending, "MAX_UPDATES", 1)
    each, hist_each = _run(compose_cfg, tmp_path, "each", *case)
    monkeypatch.setattr(Pending, "MAX_UPDATES", kept)
    reads = []
    read = Pending.read
    monkeypatch.setattr(Pending, "read", lambda self: reads.append(len(self.updates)) or read(self))
    got, hist_got = _run(compose_cfg, tmp_path, "kept", *case)
    for key in ("status", "diverged_at_update", "updates_done", "weights_sha256", "test_error", "train_loss"):
        assert got[key] == each[key], key
    assert hist_got == hist_each
    done = [n for n in reads if n]
    assert max(done) > 1 and len(done) <= -(-(got["updates_done"] + 1) // kept) + 1, reads  # (+ the fit's end)
    if lr == "1000":
        assert got["status"] == "diverged" and got["diverged_at_update"] % kept not in (0, 1), got["diverged_at_update"]


@pytest.mark.parametrize("kept", [1, 64])
def test_a_checkpoint_due_after_an_unread_divergence_ends_the_run_diverged_and_writes_nothing(
    compose_cfg, tmp_path, monkeypatch, kept
):
    """A periodic checkpoint and a stop request read the kept updates back before writing: if one of them diverged,
    the run ends diverged at it, as reading back per update would have ended it before the checkpoint was due —
    no checkpoint of a diverged run, no stop reported over it, the summary of the run without them."""
    case = ("protocol=hardsync", "learners=4", "epochs=1", "optimizer.lr=1000")
    monkeypatch.setattr(Pending, "MAX_UPDATES", 1)
    each, hist_each = _run(compose_cfg, tmp_path, "each", *case)
    j = each["diverged_at_update"]
    assert each["status"] == "diverged" and j > 2
    monkeypatch.setattr(Pending, "MAX_UPDATES", kept)
    d = tmp_path / f"cut{kept}"
    got, hist = _run(
        compose_cfg, tmp_path, d.name, *case, plan=Plan(d / CHECKPOINT_FILE, every=j + 2, stop_after=j + 3)
    )
    assert not (d / CHECKPOINT_FILE).exists()
    for key in ("status", "diverged_at_update", "updates_done", "weights_sha256", "checkpoints_written"):
        assert got[key] == each[key], key
    assert hist == hist_each


@pytest.mark.parametrize("mb", [0.25, 0.5])
def test_hardsync_keeps_its_updates_for_a_read_back_within_the_memory_budget(compose_cfg, tmp_path, monkeypatch, mb):
    """The aggregates kept for a read-back take only what ``trainer.memory_budget_mb`` leaves beside each flush's
    plan, and the peak the summary reports counts them; the plan itself never sees them, so the batching, and the
    floats, are those of reading back per update (at 0.25 MiB the MLP's 38 KB rows are vmapped two by two: a plan
    that counted the kept aggregates vmapped some one by one and changed the weights)."""
    case = ("protocol=hardsync", "learners=4", "epochs=2", "optimizer.lr=0.3", f"trainer.memory_budget_mb={mb}")
    monkeypatch.setattr(Pending, "MAX_UPDATES", 1)
    each, hist_each = _run(compose_cfg, tmp_path, "each", *case)
    monkeypatch.undo()
    sizes, reads = [], []
    add, read = Pending.add, Pending.read
    monkeypatch.setattr(Pending, "add", lambda self, a: sizes.append(sum(g.nbytes for g in a.grads)) or add(self, a))
    monkeypatch.setattr(Pending, "read", lambda self: reads.append(len(self.updates)) or read(self))
    got, hist = _run(compose_cfg, tmp_path, "kept", *case)
    assert got["weights_sha256"] == each["weights_sha256"] and hist == hist_each
    (size,) = set(sizes)
    assert max(reads) * size <= got["peak_snapshot_bytes"] <= mb * 2**20, (size, reads)
    if mb == 0.5:
        assert 1 < max(reads) < Pending.MAX_UPDATES, reads


def test_the_progress_bar_shows_the_loss_last_read_back_never_nan(compose_cfg, tmp_path, monkeypatch):
    """With updates kept for a read-back, a Trainer step may end before any was read back: the bar then shows no loss
    yet, not NaN, and afterwards the last one read back."""
    import pytorch_lightning as pl

    shown = []
    log = pl.LightningModule.log
    monkeypatch.setattr(
        pl.LightningModule,
        "log",
        lambda self, name, value, **k: shown.append((name, value)) or log(self, name, value, **k),
    )
    _run(compose_cfg, tmp_path, "bar", "protocol=hardsync", "learners=4", "epochs=1", "trainer.progress=rich")
    losses = [v for name, v in shown if name == "loss"]
    assert losses and all(v == v for v in losses), losses


def test_a_signal_after_a_divergence_not_read_back_yet_reports_it(compose_cfg, tmp_path, monkeypatch):
    """A signal stops the run at the next update boundary, after the updates kept for a read-back are read back: a
    run that diverged among them ends killed with its divergence said (``diverged_at_update``, the failure reason)
    and the updates done before it, those of reading back per update, which ended diverged there."""
    import signal

    from psbench import lifecycle
    from psbench.strategy.ps_strategy import ParameterServerStrategyCore as Core

    case = ("protocol=hardsync", "learners=4", "epochs=1", "optimizer.lr=1000")
    monkeypatch.setattr(Pending, "MAX_UPDATES", 1)
    each, _ = _run(compose_cfg, tmp_path, "each", *case)
    j = each["diverged_at_update"]
    monkeypatch.undo()
    apply = Core._apply

    def signalled(self, batch) -> None:
        apply(self, batch)
        if batch.index == j + 2:  # a SIGTERM received while update j + 2 is applied (the handler records it so)
            lifecycle._received.append(signal.SIGTERM)

    monkeypatch.setattr(Core, "_apply", signalled)
    lifecycle.reset()
    try:
        with pytest.raises(lifecycle.Killed) as k:
            _run(compose_cfg, tmp_path, "signalled", *case)
        got = lifecycle.summary(k.value)
    finally:
        lifecycle.reset()
    assert (
        got.status == "killed"
        and got.diverged
        and got.diverged_at_update == j == got.updates_done == each["updates_done"]
    )
    assert got.failure_reason.endswith(
        f"after {j} of {got.updates_total} PS updates; diverged at update {j} ({each['divergence']})"
    )


def test_the_read_back_casts_nothing_to_float64_and_keeps_the_values():
    """MPS has no float64: the one read-back of the kept updates' losses and checks was cast to float64 on the device,
    so every ``accelerator=mps`` run failed at its first read. It reads in the losses' own type; as Python floats the
    values are the same, and a non-finite update is still found."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from psbench.strategy.pending import Applied, Pending

    class NoFloat64(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            assert kwargs.get("dtype") is not torch.float64, f"{func} to float64"
            return func(*args, **kwargs)

    pending = Pending()
    losses = [torch.tensor(0.1), torch.tensor(2.3456789), torch.tensor(1.5)]
    terms = [
        [torch.tensor(1.0), torch.tensor(2.0)],
        [torch.tensor(3.0), torch.tensor(float("inf"))],
        [torch.tensor(0.0)] * 2,
    ]
    for loss, t in zip(losses, terms, strict=True):
        pending.add(Applied(batch=None, loss=loss, terms=t, grads=[], schedulers=[]))
    with NoFloat64():
        values, bad = pending.read()
    assert values == [float(x) for x in losses] and bad == 1
