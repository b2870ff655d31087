"""An lr policy with an adaptive optimizer scales its step, not the gradients (:mod:`psbench.lr.steps`, issue 41
item 5): Adam's step is invariant to a constant gradient scale, so α0/n as a gradient weight changed nothing.

With n-softsync at n = 2, ``nominal_staleness`` asks for α0/2 on every update: the run must be the constant-policy
run at lr α0/2, bit for bit (the gradients keep their relative weights, all 1; α0·0.5 is exact), and not the run at
α0 — in the CLI (built-in ``optimizer=adam``) and in the Lightning API (the user's own Adam).
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from psbench import ParameterServerStrategy
from psbench.errors import ConfigError
from psbench.lr.steps import relative, scales_step
from psbench.train import train

CASE = (
    "protocol=softsync",
    "protocol.n=2",
    "learners=8",
    "batch_size=4",
    "epochs=1",
    "trainer.max_updates=40",
    "trainer.num_threads=1",
    "trainer.progress=none",
    "trainer.save_weights=false",
    "trainer.checkpoint_every=0",
    "logger=none",
)


def test_sgd_keeps_gradient_weights_adaptive_optimizers_scale_their_lr_and_others_are_refused():
    p = [torch.nn.Parameter(torch.zeros(2))]
    assert not scales_step(torch.optim.SGD(p, lr=0.1), "mean_staleness")
    assert not scales_step(torch.optim.Adam(p), "constant")
    for opt in (torch.optim.Adam(p), torch.optim.AdamW(p), torch.optim.RMSprop(p), torch.optim.Adagrad(p)):
        assert scales_step(opt, "per_gradient")
    with pytest.raises(ConfigError, match=r"lr_policy='dynsgd' is invalid: .*constant with Rprop"):
        scales_step(torch.optim.Rprop(p), "dynsgd")
    assert relative([0.25, 0.25]) == [1.0, 1.0] and relative([1.0, 0.5]) == pytest.approx([4 / 3, 2 / 3])


def _sha(compose_cfg, tmp_path, name: str, *overrides: str) -> str:
    d = tmp_path / name
    d.mkdir()
    s = train(compose_cfg(*CASE, *overrides, f"paths.output_dir={d}"), d)
    assert s["status"] == "finished"
    return s["weights_sha256"]


def test_the_cli_policy_scales_adams_lr(compose_cfg, tmp_path):
    adam = ("optimizer=adam", "optimizer.lr=0.001")
    policy = _sha(compose_cfg, tmp_path, "policy", *adam, "lr_policy=nominal_staleness")
    half = _sha(compose_cfg, tmp_path, "half", "optimizer=adam", "optimizer.lr=0.0005")
    plain = _sha(compose_cfg, tmp_path, "plain", *adam)
    assert policy == half != plain
    assert _sha(compose_cfg, tmp_path, "mean", *adam, "lr_policy=mean_staleness") != plain  # α0/⟨σ⟩ changes Adam


class AdamClassifier(pl.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)
        )
        self.lr = lr

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def _api(digits, lr: float, policy: str) -> torch.Tensor:
    module = AdamClassifier(lr)
    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=2, learners=8, seed=0, lr_policy=policy)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_train, digits.y_train), batch_size=4)
    trainer = pl.Trainer(
        strategy=strategy,
        max_steps=30,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(module, train_dataloaders=loader)
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_the_api_policy_scales_the_users_adam(digits):
    policy, half, plain = (
        _api(digits, 1e-3, "nominal_staleness"),
        _api(digits, 5e-4, "constant"),
        _api(digits, 1e-3, "constant"),
    )
    assert torch.equal(policy, half) and not torch.equal(policy, plain)
