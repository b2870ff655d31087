"""Real third-party shapes (``tests/third_party_shapes.py``: lightning-hydra-template's MNISTLitModule, SimpleDenseNet
and MNISTDataModule, in the ``lightning`` namespace) through ``psbench.lightning.ParameterServerStrategy`` unchanged:
fit with ReduceLROnPlateau on ``val/loss`` and a best checkpoint, then ``test(ckpt_path="best")``, ``validate``,
``predict`` and ``test()`` without a model, as the template's ``train.py`` runs them; and the strategy's summary after
EarlyStopping, ``max_time``, ``max_steps`` or an exception (what ran, and why it stopped).
"""

from __future__ import annotations

import warnings

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from psbench.lightning import ParameterServerStrategy
from third_party_shapes import DigitsDataModule, template_module

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*litlogger.*")
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)


class ValLoss(L.Callback):
    """``val/loss`` at every epoch's end (after the validation, before the plateau scheduler steps)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.values.append(float(trainer.callback_metrics["val/loss"]))


def test_the_templates_module_fits_with_reduce_lr_on_plateau_then_tests_the_best_checkpoint(tmp_path):
    """The template's module and datamodule as they are, on 2-softsync λ = 4: ReduceLROnPlateau steps on the
    ``val/loss`` of every epoch (the lr its own rule gives for the logged values); ``test(ckpt_path="best")``,
    ``validate()``, ``predict(ckpt_path="best")`` and ``test()`` without a model then run as in Lightning. On main:
    a ``lightning`` Trainer refused the strategy; with pytorch_lightning, ReduceLROnPlateau raised at the end of epoch
    1 and ``test(ckpt_path="best")`` was refused."""
    L.seed_everything(0, verbose=False)
    model, dm = template_module(lr=0.05, patience=0), DigitsDataModule(batch_size=16)
    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=2, learners=4, seed=0)
    best, seen = ModelCheckpoint(dirpath=tmp_path, monitor="val/acc", mode="max"), ValLoss()
    trainer = L.Trainer(strategy=strategy, max_epochs=4, callbacks=[best, seen], default_root_dir=tmp_path, **QUIET)
    trainer.fit(model, datamodule=dm)

    rule = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([torch.zeros(1)], lr=0.05), mode="min", factor=0.5, patience=0
    )
    for v in seen.values:
        rule.step(v)
    assert len(seen.values) == 4 and trainer.optimizers[0].param_groups[0]["lr"] == rule.get_last_lr()[0]
    s = strategy.summary
    assert s.status == "finished" and s.updates_done == s.ps_updates and s.staleness_max >= 1

    own = {"weights_only": False}  # the template's hparams hold functools.partial: torch.load refuses it by default
    tested = trainer.test(datamodule=dm, ckpt_path="best", verbose=False, **own)
    assert trainer.ckpt_path == best.best_model_path and tested[0]["test/acc"] > 0.5  # 10 classes
    validated = trainer.validate(datamodule=dm, verbose=False, **own)
    assert validated[0]["val/acc"] > 0.5
    predicted = trainer.predict(datamodule=dm, ckpt_path="best", **own)
    assert sum(len(p) for p in predicted) == 300
    again = trainer.test(datamodule=dm, verbose=False, **own)  # no model: the fitted one, from its best checkpoint
    assert again[0]["test/acc"] == tested[0]["test/acc"]
    assert strategy.summary.updates_done == s.updates_done  # evaluating trained nothing


class RaiseAt(L.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step >= self.step:
            raise RuntimeError("a callback failed")


@pytest.mark.parametrize(
    ("trainer_kw", "status", "reason"),
    [
        (
            {"max_epochs": 6, "callbacks": [EarlyStopping("val/loss", min_delta=10.0, patience=0)]},
            "stopped",
            "EarlyStop",
        ),
        ({"max_epochs": 6, "max_time": {"seconds": 0}}, "stopped", "max_time reached after"),
        ({"max_epochs": 6, "max_steps": 20}, "finished", "max_steps reached"),
        ({"max_epochs": 6, "callbacks": [RaiseAt(12)]}, "failed", "RuntimeError: a callback failed"),
    ],
)
def test_the_summary_says_what_ran_and_why_it_stopped(trainer_kw, status, reason):
    """After EarlyStopping, ``max_time``, ``max_steps`` or an exception the summary counts the updates that ran —
    updates, gradients, samples, epochs, simulated time, staleness of the gradients applied — and says why it stopped
    (on main: ``finished`` and the whole plan's counts after 32 updates)."""
    L.seed_everything(0, verbose=False)
    model, dm = template_module(), DigitsDataModule(batch_size=16)
    strategy = ParameterServerStrategy.simulated(protocol="async", learners=4, seed=1, updates_per_step=2)
    trainer = L.Trainer(strategy=strategy, enable_checkpointing=False, **QUIET, **trainer_kw)
    if status == "failed":
        with pytest.raises(RuntimeError, match="a callback failed"):
            trainer.fit(model, datamodule=dm)
    else:
        trainer.fit(model, datamodule=dm)
    s, schedule = strategy.summary, strategy.schedule
    done = s.updates_done
    assert s.status == status and reason in s.stop_reason and "\n" not in s.stop_reason
    assert done == s.ps_updates == trainer.global_step and done <= schedule.num_updates
    assert done > 0 or "max_time" in reason  # max_time=0 stops before the first update
    if status != "finished":
        assert done < schedule.num_updates and s.updates_total == schedule.num_updates
    g = int(schedule.offsets[done])
    assert s.gradients == g and s.samples == s.samples_trained == 16 * g and s.epochs_done == 16 * g / 1197
    assert s.sim_time_s == (float(schedule.update_time[done - 1]) if done else 0.0)
    assert sum(s.staleness_hist.values()) == g
    assert (s.failure_reason is not None) == (status == "failed")


def test_the_templates_datamodule_is_a_dataset_target_of_the_psbench_command():
    """``dataset._target_`` names the template's (``lightning``) datamodule: its train and test loaders' sets are read
    (on main: "allowed … a LightningDataModule (it returned DigitsDataModule)" — it is one, of the other namespace)."""
    from psbench.data.target import load_target

    split = load_target({"_target_": "third_party_shapes.DigitsDataModule", "batch_size": 8}, seed=0, data_dir=".")
    assert split.x_train.shape == (1197, 1, 8, 8) and split.x_test.shape == (300, 1, 8, 8)
    assert split.num_classes == 10
