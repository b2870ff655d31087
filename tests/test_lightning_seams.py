"""Lightning's private internals that psbench touches (:mod:`psbench.lightning_seams`), one behavioural test each.

Each test drives a tiny plain-Lightning fit and checks that the seam does what the strategy relies on, so a Lightning
upgrade that moves or changes one fails here by name — and :func:`~psbench.lightning_seams.check` refuses it at run
time in one line.
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from logged_metrics import LoggedMetrics
from psbench import lightning_seams as seams

QUIET = dict(enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)


def loader(n: int = 8, batch: int = 2) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(n, 3, generator=g)), batch_size=batch)


class Tiny(pl.LightningModule):
    """One linear layer; ``step`` runs in ``training_step`` before the loss."""

    def __init__(self, step=None, manual: bool = False) -> None:
        super().__init__()
        self.layer, self.step, self.validations = torch.nn.Linear(3, 1), step, 0
        self.automatic_optimization = not manual

    def training_step(self, batch, batch_idx):
        if self.step is not None:
            self.step(self, batch_idx)
        loss = self.layer(batch[0]).pow(2).mean()
        if not self.automatic_optimization:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
        return loss

    def validation_step(self, batch, batch_idx):
        return None

    def on_validation_epoch_end(self) -> None:
        self.validations += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_check_passes_here_and_names_a_missing_seam(monkeypatch):
    found = []

    class Check(pl.Callback):
        def setup(self, trainer, pl_module, stage) -> None:
            seams.check(trainer)
            found.append(True)
            monkeypatch.delattr(type(trainer.fit_loop), "_can_stop_early")
            with pytest.raises(RuntimeError, match=r"fit_loop\._can_stop_early.*pytorch-lightning"):
                seams.check(trainer)
            monkeypatch.undo()

    pl.Trainer(max_steps=1, logger=False, callbacks=[Check()], **QUIET).fit(Tiny(), loader())
    assert found == [True]


def test_train_dataloader_is_the_users_loader_at_setup():
    data, seen = loader(), []

    class AtSetup(pl.Callback):
        def setup(self, trainer, pl_module, stage) -> None:
            seen.append(seams.train_dataloader(trainer))

    pl.Trainer(max_steps=1, logger=False, callbacks=[AtSetup()], **QUIET).fit(Tiny(), data)
    assert seen == [data]


def test_checkpoint_every_n_train_steps_is_what_model_checkpoint_saves_by(tmp_path):
    """The Trainer's ModelCheckpoint callbacks' step interval: three checkpoints of a 9-step fit at every 3."""
    seen: list[list[int]] = []

    class AtSetup(pl.Callback):
        def setup(self, trainer, pl_module, stage) -> None:
            seen.append(seams.checkpoint_every_n_train_steps(trainer))

    for name, every in (("by_steps", {"every_n_train_steps": 3}), ("by_epochs", {})):
        ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / name, save_top_k=-1, **every)
        pl.Trainer(max_steps=9, logger=False, callbacks=[AtSetup(), ck], enable_progress_bar=False).fit(
            Tiny(), loader(n=18)
        )
    assert seen == [[3], [0]] and len(list((tmp_path / "by_steps").iterdir())) == 3


def test_batches_are_updates_is_what_estimated_stepping_batches_counts():
    """While ``configure_optimizers`` runs: 7 batches per epoch, where the loader has 4; after it, the loader's 4."""
    seen = []

    class Reads(Tiny):
        def configure_optimizers(self):
            seen.append(self.trainer.estimated_stepping_batches)
            return super().configure_optimizers()

    t = pl.Trainer(max_epochs=3, logger=False, **QUIET)
    original = t.strategy.setup_optimizers

    def setup_optimizers(trainer) -> None:
        with seams.batches_are_updates(trainer, 7):
            original(trainer)

    t.strategy.setup_optimizers = setup_optimizers
    t.fit(Reads(), loader())
    assert seen == [21] and t.num_training_batches == 4 and t.global_step == 12


def test_evaluate_when_decides_the_validation_runs():
    """Validation after Trainer step 2 only (batch 1 of 4), though Lightning would validate at the epoch's end."""
    module = Tiny()

    class Start(pl.Callback):
        def on_train_start(self, trainer, pl_module) -> None:
            seams.evaluate_when(trainer, lambda data_fetcher=None: trainer.fit_loop.epoch_loop.batch_idx == 1)

    t = pl.Trainer(max_epochs=1, logger=False, callbacks=[Start()], num_sanity_val_steps=0, **QUIET)
    t.fit(module, loader(), loader())
    assert module.validations == 1 and t.global_step == 4


def test_can_stop_early_is_lightnings_rule_for_a_stop():
    """A stop asked for before ``min_steps`` = 2 steps are done is not one Lightning honours: the fit goes on until it
    is (after the second step), and ends there."""
    answers = []

    class Ask(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            trainer.should_stop = True
            answers.append(seams.can_stop_early(trainer))

    t = pl.Trainer(max_steps=10, min_steps=2, min_epochs=0, logger=False, callbacks=[Ask()], **QUIET)
    t.fit(Tiny(), loader(16))
    assert answers == [False, True] and t.global_step == 2


def test_log_at_sets_the_step_metrics_are_logged_at():
    def step(module, batch_idx):
        seams.log_at(module.trainer, 100 + batch_idx)
        module.log("m", float(batch_idx))

    logger = LoggedMetrics()
    pl.Trainer(max_steps=3, logger=logger, log_every_n_steps=1, **QUIET).fit(Tiny(step, manual=True), loader())
    assert [s for s, m in logger.logged if "m" in m] == [100, 101, 102]


def test_log_batch_gives_self_log_its_batch_size():
    """An epoch-mean metric weighted by the batch log_batch names: (0·1 + 4·3)/4 = 3, not the plain mean 2."""

    def step(module, batch_idx):
        seams.log_batch(module.trainer, torch.zeros(1 if batch_idx == 0 else 3))
        module.log("m", torch.tensor(0.0 if batch_idx == 0 else 4.0), on_step=False, on_epoch=True)

    t = pl.Trainer(max_epochs=1, logger=False, **QUIET)
    t.fit(Tiny(step), loader(4))
    assert float(t.callback_metrics["m"]) == pytest.approx(3.0)


def test_the_batch_hook_sees_every_batch_before_the_move_and_unwraps():
    module, seen = Tiny(), []

    def wrap(hook):
        def before(batch, dataloader_idx=0):
            seen.append(len(batch[0]))
            return hook(batch, dataloader_idx)

        return before

    class Wrap(pl.Callback):
        def setup(self, trainer, pl_module, stage) -> None:
            seams.wrap_batch_hook(pl_module, wrap)
            assert seams.batch_hook(pl_module).__name__ == "before"

    pl.Trainer(max_steps=3, logger=False, callbacks=[Wrap()], **QUIET).fit(module, loader())
    assert seen == [2, 2, 2]
    seams.unwrap_batch_hook(module)
    assert seams.batch_hook(module).__func__ is pl.LightningModule._on_before_batch_transfer
    assert seams.attached_trainer(module) is not None and seams.attached_trainer(Tiny()) is None


def test_plateau_steps_at_runs_where_lightning_steps_a_plateau_scheduler():
    """In a manual-optimization fit of 2 epochs of 2 steps, evaluated every step: ``"step"`` after each evaluation,
    ``"epoch"`` after each ``on_train_epoch_end``, each before the next step's or epoch's start hooks (the epoch's
    step offered twice, as its owner steps what it owes once); unwrapped, the loops' own methods again."""
    seen: list[str] = []
    owed: set[str] = set()

    def step(interval: str) -> None:
        if interval == "step" or interval in owed:
            seen.append(interval)
            owed.discard(interval)

    class Order(pl.Callback):
        def setup(self, trainer, pl_module, stage) -> None:
            seams.plateau_steps_at(trainer, step)
            seams.plateau_steps_at(trainer, step)  # a Trainer that fits again: still one step each

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            seen.append("epoch start")

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            seen.append("batch start")

        def on_validation_end(self, trainer, pl_module) -> None:
            seen.append("evaluated")

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            seen.append("epoch end")
            owed.add("epoch")

    t = pl.Trainer(
        max_epochs=2, val_check_interval=1, num_sanity_val_steps=0, logger=False, callbacks=[Order()], **QUIET
    )
    t.fit(Tiny(manual=True), loader(4), loader(2))
    one = ["batch start", "evaluated", "step"]
    assert seen == 2 * ["epoch start", *one, *one, "epoch end", "epoch"]
    seams.unwrap_plateau_steps(t)
    assert t.fit_loop.epoch_loop.update_lr_schedulers.__func__ is type(t.fit_loop.epoch_loop).update_lr_schedulers
    assert t.fit_loop.on_advance_end.__func__ is type(t.fit_loop).on_advance_end


def test_step_counters_carry_global_step_across_optimization_modes():
    """A manual-optimization fit of 3 steps: after the copy, global_step in automatic optimization is 3; resuming
    sets every counter (and the logging step) to k."""
    module = Tiny(manual=True)
    t = pl.Trainer(max_steps=3, logger=False, **QUIET)
    t.fit(module, loader())
    assert t.global_step == 3
    seams.count_manual_steps_as_automatic(t)
    module.automatic_optimization = True
    assert t.global_step == 3
    seams.resume_step_counters(t, 7)
    assert t.global_step == 7 and t.fit_loop.epoch_loop._batches_that_stepped == 7
    module.automatic_optimization = False
    assert t.global_step == 7


class GradNorms(pl.Callback):
    """A gradient-norm logger, as users write one: ``on_before_optimizer_step``."""

    def __init__(self) -> None:
        self.norms: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.norms.append(float(torch.cat([p.grad.flatten() for p in pl_module.parameters()]).norm()))


class HookedTiny(Tiny):
    def on_before_optimizer_step(self, optimizer) -> None:
        pass


def test_the_lean_optimizer_step_counts_as_lightnings_and_yields_to_what_needs_the_wrapper():
    """Where the wrapper adds only the count, the lean step counts global_step as ``LightningOptimizer.step`` does
    and steps the same weights; a hook, a profiler or a precision plugin keeps Lightning's wrapper (None)."""
    used: list[object] = []

    def lean(module, batch_idx):  # in place of the wrapper's step, in the next training_step's opt.step()
        step = seams.lean_optimizer_step(module.trainer, module, module.optimizers().optimizer)
        used.append(step)
        if step is not None:
            module.optimizers().step = lambda closure=None: step()

    weights = []
    for step in (None, lean):
        module = Tiny(step=step, manual=True)
        torch.manual_seed(0)
        module.layer.reset_parameters()
        t = pl.Trainer(max_steps=3, logger=False, **QUIET)
        t.fit(module, loader())
        assert t.global_step == 3
        weights.append(module.layer.weight.detach().clone())
    assert all(s is not None for s in used) and torch.equal(*weights)

    for module, kwargs in (
        (Tiny(step=lean, manual=True), {"callbacks": [GradNorms()]}),
        (HookedTiny(step=lean, manual=True), {}),
        (Tiny(step=lean, manual=True), {"profiler": "simple"}),
        (Tiny(step=lean, manual=True), {"precision": "bf16-mixed"}),
    ):
        used.clear()
        pl.Trainer(max_steps=1, logger=False, **QUIET, **kwargs).fit(module, loader())
        assert used == [None], kwargs


def test_devices_are_what_the_trainers_devices_flag_named():
    """``devices=2`` on the CPU: two CPU devices; the default: one (the seam a single-device strategy reads its
    CUDA index from: ``accelerator="gpu", devices=[3]``, ``tests/test_device.py``)."""
    two = pl.Trainer(accelerator="cpu", devices=2, logger=False, enable_progress_bar=False, strategy="ddp_spawn")
    assert seams.devices(two) == [torch.device("cpu")] * 2
    assert seams.devices(pl.Trainer(accelerator="cpu", logger=False)) == [torch.device("cpu")]
