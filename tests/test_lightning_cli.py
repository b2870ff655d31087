"""LightningCLI configures the strategy: ``examples/lightning_cli`` (Lightning's autoencoder example with a YAML
config) trains on a simulated PS named by ``class_path`` and ``init_args``, then tests and predicts on its best
checkpoint; ``trainer_defaults`` takes the strategy as a ``class_path`` dict or a ``lazy_instance`` (jsonargparse's two
forms of a class default); the class's arguments are ``ParameterServerStrategy.simulated``'s; its Adam is stepped at
the lr an ``lr_policy`` gives (issue 41 item 5).
"""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from pathlib import Path

import lightning.pytorch as L
import pytest
import torch
from jsonargparse import lazy_instance

from psbench.api import simulated_setup
from psbench.lightning import SimulatedStrategy

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*litlogger.*")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "lightning_cli"


def example():
    spec = importlib.util.spec_from_file_location("psbench_lightning_cli_example", EXAMPLE / "autoencoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_yaml_config_names_the_strategy_and_the_example_fits_tests_and_predicts(tmp_path):
    """``config.yaml``'s strategy (2-softsync, λ = 8) from ``class_path``/``init_args``, a command-line override of an
    init arg, and Lightning's fit → ``test(ckpt_path="best")`` → ``predict(ckpt_path="best")`` (on main LightningCLI
    could not build the strategy, and test/predict on the best checkpoint were refused)."""
    ex = example()
    out = ex.main(
        [
            "--config",
            str(EXAMPLE / "config.yaml"),
            "--trainer.max_epochs=2",
            "--trainer.strategy.init_args.learners=4",
            f"--trainer.default_root_dir={tmp_path}",
        ]
    )
    assert out["protocol"] == "2-softsync" and out["staleness_mean"] > 0.5
    assert out["ps_updates"] == 2 * 1297 // 16 // 2  # ⌊epochs·N/μ⌋ gradients, c = λ/n = 2 a PS update
    import torch
    import torch.nn.functional as F

    torch.manual_seed(1234)
    x = torch.stack([x for x, _ in ex.MyDataModule().digits_test])
    with torch.no_grad():
        untrained = float(F.mse_loss(x, ex.LitAutoEncoder()(x)))
    assert out["predictions"] == 300 and out["test_loss"] < 0.7 * untrained


@pytest.mark.parametrize(
    "default",
    [
        {"class_path": "psbench.lightning.SimulatedStrategy", "init_args": {"protocol": "async", "learners": 4}},
        lazy_instance(SimulatedStrategy, protocol="async", learners=4),
    ],
    ids=["class_path", "lazy_instance"],
)
def test_trainer_defaults_take_the_strategy(tmp_path, default):
    args = ["--trainer.max_epochs=1", "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}"]
    out = example().main(args, trainer_defaults={"strategy": default})
    assert out["protocol"] == "async" and out["ps_updates"] == 1297 // 32


def test_the_class_takes_the_arguments_of_simulated():
    """One list of arguments: the class's ``__init__`` (what LightningCLI and Hydra read) is
    :func:`psbench.api.simulated_setup`'s signature."""
    mine = list(inspect.signature(SimulatedStrategy.__init__).parameters.values())[1:]
    theirs = list(inspect.signature(simulated_setup).parameters.values())
    assert [(p.name, p.kind, p.default) for p in mine] == [(p.name, p.kind, p.default) for p in theirs]


def _autoencoder_weights(lr: float, policy: str):
    """The example's Adam autoencoder after 30 PS updates of 2-softsync (λ = 8) under ``policy``."""
    ex = example()
    L.seed_everything(0)
    module, data = ex.LitAutoEncoder(learning_rate=lr), ex.MyDataModule(batch_size=4)
    strategy = SimulatedStrategy("softsync", n=2, learners=8, seed=0, lr_policy=policy, progress="none")
    trainer = L.Trainer(
        strategy=strategy,
        max_steps=30,
        limit_val_batches=0,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=data)
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_the_lr_policy_changes_the_adam_autoencoder_as_its_lr_would():
    """Rudra Eq 6 as written (α0/n, n = 2) on Adam scales Adam's step: the example's autoencoder ends where α0/2
    takes it, not where α0 does (a gradient scale would be a no-op for Adam)."""
    policy, half, plain = (
        _autoencoder_weights(1e-2, "nominal_staleness"),
        _autoencoder_weights(5e-3, "constant"),
        _autoencoder_weights(1e-2, "constant"),
    )
    assert torch.equal(policy, half) and not torch.equal(policy, plain)
