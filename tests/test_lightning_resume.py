"""A user's PS fit resumed from a Lightning checkpoint (:mod:`psbench.strategy.resume`): ``trainer.fit(model,
ckpt_path=…)`` after the fit was interrupted gives the uninterrupted fit, bit for bit on the CPU — the weights and
buffers, the optimizer's momentum, the three kinds of lr scheduler, ``global_step`` and the epoch, the losses of every
update after the resume — from an epoch-end checkpoint and from one in the middle of an epoch, with stale gradients
pending at the checkpoint, a codec's error state, BatchNorm statistics and dropout's RNG. A checkpoint the fit cannot
resume from is refused in one line, before the module's weights change.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from psbench.errors import ConfigError
from test_lightning_namespaces import namespace, strategy_class

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*litlogger.*|.*litmodels.*")
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
EPOCHS, MU = 3, 16


def module_class(name: str, bn: bool = False, dropout: bool = False, plateau: str = "epoch"):
    """A user's module in namespace ``name``: an MLP (optionally with BatchNorm and dropout), momentum SGD, a StepLR
    every 7 steps, an ExponentialLR every epoch and a ReduceLROnPlateau on ``val_loss`` (``plateau``: ``epoch``, each
    epoch; ``reduces``, each epoch, reducing at every step after its first; ``step``, every 10 updates, reducing)."""
    pl = namespace(name)

    class Net(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            nn = torch.nn
            norm = [nn.BatchNorm1d(32, momentum=0.3)] if bn else []
            drop = [nn.Dropout(0.2)] if dropout else []
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), *norm, nn.ReLU(), *drop, nn.Linear(32, 10))

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", F.cross_entropy(self.net(x), y))

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
            sched = torch.optim.lr_scheduler
            reduce = {"threshold": 100.0, "threshold_mode": "abs"} if plateau != "epoch" else {}
            return [opt], [
                {"scheduler": sched.StepLR(opt, step_size=1, gamma=0.97), "interval": "step", "frequency": 7},
                {"scheduler": sched.ExponentialLR(opt, gamma=0.9), "interval": "epoch"},
                {
                    "scheduler": sched.ReduceLROnPlateau(opt, factor=0.7, patience=0, **reduce),
                    "monitor": "val_loss",
                    **({"interval": "step", "frequency": 10} if plateau == "step" else {}),
                },
            ]

    return Net


class Preempted(Exception):
    pass


def callbacks(name: str, folder, checkpoint: dict, stop_at: int | None) -> list:
    """A ``ModelCheckpoint`` keeping ``last.ckpt`` (``checkpoint``: its other arguments), a recorder of each Trainer
    step's loss, and a preemption at ``stop_at`` steps."""
    pl = namespace(name)

    class Losses(pl.Callback):
        def __init__(self) -> None:
            self.by_step: dict[int, float] = {}

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            self.by_step[trainer.global_step] = float(outputs["loss"]) if outputs else None
            if stop_at is not None and trainer.global_step >= stop_at:
                raise Preempted(f"at step {trainer.global_step}")

    return [Losses(), pl.callbacks.ModelCheckpoint(dirpath=folder, save_last=True, **checkpoint)]


def fit(digits, folder, case: dict, stop_at=None, ckpt_path=None, **trainer_kw):
    """One fit of ``case`` (torch seeded first, as a script's ``seed_everything``): (module, Trainer, strategy,
    losses)."""
    name = case.get("name", "pytorch_lightning")
    pl = namespace(name)
    data = torch.utils.data.TensorDataset(digits.x_train, digits.y_train)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_test, digits.y_test), batch_size=256)
    torch.manual_seed(0)
    module = module_class(name, **case.get("module", {}))()
    strategy = strategy_class(name).simulated(seed=1, **case["options"])
    cbs = callbacks(name, folder, case.get("checkpoint", {}), stop_at)
    kw = {"max_epochs": EPOCHS, **case.get("trainer", {}), **trainer_kw}
    trainer = pl.Trainer(strategy=strategy, callbacks=cbs, default_root_dir=folder, deterministic=True, **QUIET, **kw)
    try:
        trainer.fit(
            module,
            train_dataloaders=torch.utils.data.DataLoader(data, batch_size=MU, shuffle=True),
            val_dataloaders=val,
            ckpt_path=ckpt_path,
        )
    except Preempted:
        assert stop_at is not None
    return module, trainer, strategy, cbs[0].by_step


ASYNC = dict(protocol="async", learners=4)
CASES = {
    "softsync n=2, λ=4, at an epoch's end, a plateau that reduces": dict(
        options=dict(protocol="softsync", n=2, learners=4), module=dict(plateau="reduces")
    ),
    "async λ=4 mid-epoch, lightning.pytorch": dict(
        name="lightning.pytorch", options=ASYNC, checkpoint=dict(every_n_train_steps=5)
    ),
    "ssp s=2 λ=4 with TernGrad mid-epoch": dict(
        options=dict(protocol="ssp", staleness_bound=2, learners=4, compression={"name": "terngrad", "clip": 2.5}),
        checkpoint=dict(every_n_train_steps=7),
    ),
    "async λ=4, BatchNorm and dropout, mid-epoch": dict(
        options=ASYNC, module=dict(bn=True, dropout=True), checkpoint=dict(every_n_train_steps=6)
    ),
    "async λ=4, max_steps without max_epochs, at an epoch's end": dict(
        options=ASYNC, trainer=dict(max_epochs=None, max_steps=250)
    ),
    "async λ=4, a per-step plateau that reduces, saved after each evaluation": dict(
        options=ASYNC,
        module=dict(plateau="step"),
        trainer=dict(val_check_interval=10),
        checkpoint=dict(monitor="val_loss"),
        stop_at=105,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_fit_resumed_from_its_last_checkpoint_is_the_uninterrupted_fit(digits, tmp_path, case):
    """Preempted after ~100 PS updates, resumed with ``ckpt_path="last"`` by a new Trainer and module: everything the
    uninterrupted fit ends with, bit for bit, and the same loss at every Trainer step after the checkpoint."""
    c = CASES[case]
    stop = c.get("stop_at", 100)
    whole, t_whole, s_whole, losses = fit(digits, tmp_path / "whole", c)
    *_, s_cut, _ = fit(digits, tmp_path / "cut", c, stop_at=stop)
    saved = torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)  # tensors and plain data only
    at = saved["global_step"]
    assert 0 < at < stop <= s_cut.updates_done < s_whole.updates_done
    mid = "every_n_train_steps" in c.get("checkpoint", {}) or "monitor" in c.get("checkpoint", {})
    assert (at not in s_whole.loader.bounds) is mid  # mid-epoch where saved every so many steps
    resumed, t_res, s_res, res_losses = fit(digits, tmp_path / "cut", c, ckpt_path="last")

    assert t_res.global_step == t_whole.global_step == s_res.updates_done == s_whole.updates_done
    assert t_res.current_epoch == t_whole.current_epoch
    for k, v in whole.state_dict().items():  # weights and buffers (BatchNorm's statistics)
        assert torch.equal(resumed.state_dict()[k], v), k
    momentum = [t_whole.optimizers[0].state[p]["momentum_buffer"] for p in whole.parameters()]
    assert all(
        torch.equal(t_res.optimizers[0].state[p]["momentum_buffer"], m)
        for p, m in zip(resumed.parameters(), momentum, strict=True)
    )
    for a, b in zip(t_res.lr_scheduler_configs, t_whole.lr_scheduler_configs, strict=True):
        assert a.scheduler.state_dict() == b.scheduler.state_dict()
    assert t_res.optimizers[0].param_groups[0]["lr"] == t_whole.optimizers[0].param_groups[0]["lr"] < 0.1 * 0.9**2
    assert min(res_losses) > at and sum(v is not None for v in res_losses.values()) >= 10  # (an empty step: None)
    assert res_losses == {k: v for k, v in losses.items() if k > at}
    summary = s_res.summary
    assert summary.status == "finished" and summary.staleness_max == s_whole.summary.staleness_max >= 1
    if "compression" in c["options"]:
        assert summary.bytes_pushed_measured is not None


def test_without_the_ps_state_the_rng_and_the_checks_it_would_not_be(digits, tmp_path, monkeypatch):
    """The test above can fail: a resume that does not set the saved RNG streams gives other dropout masks, other
    weights."""
    from psbench.strategy import ps_strategy

    case = CASES["async λ=4, BatchNorm and dropout, mid-epoch"]
    whole, *_ = fit(digits, tmp_path / "whole", case)
    fit(digits, tmp_path / "cut", case, stop_at=100)
    monkeypatch.setattr(ps_strategy, "set_rng_state", lambda state: None)
    resumed, *_ = fit(digits, tmp_path / "cut", case, ckpt_path="last")
    assert not torch.equal(resumed.net[1].weight, whole.net[1].weight)


def test_a_checkpoint_the_fit_cannot_resume_from_is_one_line_before_the_weights_change(digits, tmp_path):
    """Plain Lightning's checkpoint (no PS state), one of another schedule (max_epochs), one saved with another
    number of PS updates per Trainer step: each a ``ConfigError`` naming ``ckpt_path``, the module untouched."""
    pl = namespace("pytorch_lightning")
    case = dict(options=ASYNC, checkpoint=dict(every_n_train_steps=5))
    fit(digits, tmp_path / "ps", case, stop_at=40)
    torch.manual_seed(0)
    plain = module_class("pytorch_lightning")()
    data = torch.utils.data.TensorDataset(digits.x_train, digits.y_train)
    trainer = pl.Trainer(max_steps=3, accelerator="cpu", **QUIET, default_root_dir=tmp_path / "plain")
    trainer.fit(plain, torch.utils.data.DataLoader(data, batch_size=MU), torch.utils.data.DataLoader(data, 256))
    trainer.save_checkpoint(tmp_path / "plain.ckpt")

    for path, kw, words in (
        (tmp_path / "plain.ckpt", {}, "holds no PS state"),
        (tmp_path / "ps" / "last.ckpt", {"trainer": {"max_epochs": EPOCHS + 1}}, "a checkpoint of this fit's schedule"),
        (tmp_path / "ps" / "last.ckpt", {"checkpoint": {}}, "Trainer steps per epoch"),
    ):
        with pytest.raises(ConfigError, match="ckpt_path") as e:
            fit(digits, tmp_path / "again", {**case, **kw}, ckpt_path=path)
        assert words in str(e.value) and "\n" not in str(e.value)


def test_a_refused_checkpoint_leaves_the_modules_weights_as_they_were(digits, tmp_path):
    """Plain Lightning's checkpoint is refused before Lightning loads its weights into the module."""
    pl = namespace("pytorch_lightning")
    data = torch.utils.data.TensorDataset(digits.x_train, digits.y_train)
    torch.manual_seed(1)
    other = module_class("pytorch_lightning")()
    t = pl.Trainer(max_steps=2, accelerator="cpu", **QUIET, default_root_dir=tmp_path)
    t.fit(other, torch.utils.data.DataLoader(data, batch_size=MU), torch.utils.data.DataLoader(data, 256))
    t.save_checkpoint(tmp_path / "plain.ckpt")
    torch.manual_seed(0)
    module = module_class("pytorch_lightning")()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    strategy = strategy_class("pytorch_lightning").simulated(learners=2)
    trainer = pl.Trainer(strategy=strategy, max_epochs=1, default_root_dir=tmp_path, **QUIET)
    with pytest.raises(ConfigError, match="holds no PS state"):
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=MU), ckpt_path=tmp_path / "plain.ckpt")
    assert all(torch.equal(module.state_dict()[k], v) for k, v in before.items())


def test_a_checkpoint_saved_inside_a_trainer_step_is_refused(digits, tmp_path):
    """``trainer.save_checkpoint`` where a signal lands (SLURM's auto-requeue handler saves there): inside a Trainer
    step a PS update may be half applied, so resuming from it is refused in one line rather than resumed wrong."""
    pl = namespace("pytorch_lightning")
    path = tmp_path / "hpc_ckpt_1.ckpt"

    class SavesInside(module_class("pytorch_lightning")):
        def training_step(self, batch, batch_idx):
            if batch_idx == 5 and not path.exists():  # (the look-ahead's call, inside update 5's Trainer step)
                self.trainer.save_checkpoint(path)
            return super().training_step(batch, batch_idx)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_train, digits.y_train), batch_size=MU)
    for ckpt_path in (None, path):
        torch.manual_seed(0)
        trainer = pl.Trainer(
            strategy=strategy_class("pytorch_lightning").simulated(learners=2, seed=1),
            max_epochs=1,
            default_root_dir=tmp_path,
            **QUIET,
        )
        if ckpt_path is None:
            trainer.fit(SavesInside(), data, data)
            assert path.exists()
            continue
        with pytest.raises(ConfigError, match="saved inside one"):
            trainer.fit(SavesInside(), data, data, ckpt_path=ckpt_path)


def test_a_fit_preempted_by_sigterm_resumes_from_the_checkpoint_saved_on_it(digits, tmp_path):
    """A cluster's preemption: SIGTERM to the process mid-fit. Lightning ends the fit after the Trainer step it lands
    in (``SIGTERMException``) and ``ModelCheckpoint(save_on_exception=True)`` saves there, between Trainer steps; the
    fit resumed from that ``last.ckpt`` is the uninterrupted one."""
    import os
    import signal

    pl = namespace("pytorch_lightning")
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    class Preemption(pl.Callback):
        def on_train_batch_end(self, trainer, *args) -> None:
            if trainer.global_step >= 70 and not trainer.received_sigterm:
                os.kill(os.getpid(), signal.SIGTERM)

    def run(folder, stop: bool, ckpt_path=None):
        torch.manual_seed(0)
        module = module_class("pytorch_lightning", dropout=True)()
        checkpoint = pl.callbacks.ModelCheckpoint(dirpath=folder, save_last=True, save_on_exception=True)
        trainer = pl.Trainer(
            strategy=strategy_class("pytorch_lightning").simulated(protocol="async", learners=4, seed=1),
            max_epochs=2,
            callbacks=[checkpoint, *([Preemption()] if stop else [])],
            default_root_dir=folder,
            deterministic=True,
            **QUIET,
        )
        data = torch.utils.data.TensorDataset(digits.x_train, digits.y_train)
        val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_test, digits.y_test), 256)
        trainer.fit(module, torch.utils.data.DataLoader(data, MU, shuffle=True), val, ckpt_path=ckpt_path)
        return module, trainer

    whole, t_whole = run(tmp_path / "whole", stop=False)
    with pytest.raises(SIGTERMException):
        run(tmp_path / "cut", stop=True)
    at = torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)["global_step"]
    assert 70 <= at < 80  # (a Trainer step carries 8 updates here)
    resumed, t_res = run(tmp_path / "cut", stop=False, ckpt_path="last")
    assert t_res.global_step == t_whole.global_step > at
    assert all(torch.equal(resumed.state_dict()[k], v) for k, v in whole.state_dict().items())
