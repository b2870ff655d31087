"""Both Lightning namespaces through the strategy, and the lr schedulers as Lightning runs them.

``pytorch_lightning`` and ``lightning.pytorch`` (the unified ``lightning`` package) each get their own strategy class
from one definition (:mod:`psbench.lightning`); a module of either, with several schedulers (``interval`` step and
epoch, ``frequency``, ReduceLROnPlateau on a validation metric), trains on async λ = 1 to plain Lightning's weights and
learning rate; a Trainer of the other namespace names the class it takes.
"""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch
import torch.nn.functional as F

from psbench.errors import ConfigError
from psbench.ps.samples import SampleStream

warnings.filterwarnings("ignore", ".*does not have many workers.*")
NAMESPACES = ("pytorch_lightning", "lightning.pytorch")
QUIET = dict(logger=False, enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)


def namespace(name: str):
    return importlib.import_module(name)


def strategy_class(name: str):
    """The strategy a Trainer of namespace ``name`` takes."""
    from psbench import ParameterServerStrategy
    from psbench.lightning import ParameterServerStrategy as Unified

    return ParameterServerStrategy if name == "pytorch_lightning" else Unified


def scheduled_module(name: str):
    """A user's module in namespace ``name`` with three schedulers of one optimizer: StepLR every 7 steps, an
    ExponentialLR every second epoch, ReduceLROnPlateau on ``val_loss`` each epoch."""
    pl = namespace(name)

    class Scheduled(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
            )

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", F.cross_entropy(self.net(x), y) + 10.0 * self.current_epoch)  # rises: a plateau

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
            step = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.99)
            epoch = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
            return [opt], [
                {"scheduler": step, "interval": "step", "frequency": 7},
                {"scheduler": epoch, "interval": "epoch", "frequency": 2},
                {"scheduler": plateau, "monitor": "val_loss"},
            ]

    return Scheduled


class EpochOfStream(torch.utils.data.Sampler):
    """Plain Lightning's epoch e in the order of psbench's sample stream: positions e·N … (e+1)·N − 1 (Lightning
    calls ``set_epoch``)."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return iter(SampleStream(self.n, self.seed).indices(self.epoch * self.n, self.n).tolist())


def weights(module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


@pytest.mark.parametrize("name", NAMESPACES)
def test_several_schedulers_step_as_plain_lightning_steps_them(digits, name):
    """Async λ = 1 ≡ plain SGD, with a per-step StepLR (frequency 7), a per-epoch ExponentialLR (frequency 2) and a
    ReduceLROnPlateau on the validation loss: three epochs of 89 updates (N = 1424 = 89·μ) give plain Lightning's
    weights and learning rate, in either namespace. On main the strategy's manual optimization dropped the
    plateau's monitor and ReduceLROnPlateau raised at the end of epoch 1; a ``lightning`` Trainer refused it."""
    pl = namespace(name)
    mu, epochs, seed = 16, 3, 3
    data = torch.utils.data.Subset(torch.utils.data.TensorDataset(digits.x_train, digits.y_train), range(1424))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_test, digits.y_test), batch_size=120)
    cls = scheduled_module(name)
    runs = []
    for ps in (True, False):
        torch.manual_seed(0)
        module = cls()
        strategy = strategy_class(name).simulated("async", learners=1, seed=seed) if ps else None
        loader = (
            torch.utils.data.DataLoader(data, batch_size=mu, shuffle=True)
            if ps
            else torch.utils.data.DataLoader(data, batch_size=mu, sampler=EpochOfStream(len(data), seed))
        )
        kw = {"strategy": strategy} if ps else {"accelerator": "cpu"}
        t = pl.Trainer(max_epochs=epochs, num_sanity_val_steps=0, deterministic=True, **kw, **QUIET)
        t.fit(module, train_dataloaders=loader, val_dataloaders=val)
        runs.append((module, t, strategy))
    (ps_module, ps_trainer, strategy), (plain, plain_trainer, _) = runs
    lr = ps_trainer.optimizers[0].param_groups[0]["lr"]
    assert lr == pytest.approx(plain_trainer.optimizers[0].param_groups[0]["lr"], rel=1e-12)
    assert lr < 0.1 * 0.99 ** (3 * 89 // 7) * 0.9 * 0.5  # every kind stepped: 38 steps, one epoch, ≥ 1 plateau
    assert float((weights(ps_module) - weights(plain)).abs().max()) <= 1e-5
    assert strategy.summary.updates_done == 3 * 89 and strategy.summary.status == "finished"


@pytest.mark.parametrize("name", NAMESPACES)
def test_a_trainer_of_the_other_namespace_names_the_class_it_takes(name):
    """Lightning refuses a Strategy of the other namespace with its own message, which shows the strategy's repr:
    it names the class to use."""
    other = "lightning.pytorch" if name == "pytorch_lightning" else "pytorch_lightning"
    strategy = strategy_class(name).simulated(learners=2)
    with pytest.raises(ValueError, match="invalid strategy") as e:
        namespace(other).Trainer(strategy=strategy)
    assert (
        "psbench.lightning.ParameterServerStrategy" if other == "lightning.pytorch" else "psbench.Parameter"
    ) in str(e.value)


@pytest.mark.parametrize("name", NAMESPACES)
def test_configure_optimizers_returning_none_is_refused_in_one_line(digits, name):
    """No optimizer: Lightning's stand-in changes no weight, and the summary would report updates that did nothing."""
    pl = namespace(name)

    class NoOptimizer(scheduled_module(name)):
        def configure_optimizers(self):
            return None

    strategy = strategy_class(name).simulated(learners=2)
    t = pl.Trainer(strategy=strategy, max_epochs=1, **QUIET)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_train, digits.y_train), batch_size=8)
    with pytest.raises(ConfigError) as e:
        t.fit(NoOptimizer(), train_dataloaders=loader)
    assert e.value.key == "configure_optimizers" and "\n" not in str(e.value) and strategy.updates_done == 0
