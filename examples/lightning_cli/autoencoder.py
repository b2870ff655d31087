"""Lightning's autoencoder example (``examples/pytorch/basics/autoencoder.py``) with LightningCLI, on a simulated
parameter server configured in YAML — the script knows nothing about psbench::

    python examples/lightning_cli/autoencoder.py --config examples/lightning_cli/config.yaml
    python examples/lightning_cli/autoencoder.py --config examples/lightning_cli/config.yaml \\
        --trainer.strategy.init_args.learners=16 --trainer.max_epochs=2

``config.yaml`` names the strategy by ``class_path`` (``psbench.lightning.SimulatedStrategy``) and its ``init_args``
(the arguments of ``ParameterServerStrategy.simulated``). As Lightning's example: fit, then ``test`` and ``predict``
on the best checkpoint. MNIST (28×28) is replaced by scikit-learn's 8×8 digits, which need no download.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


class LitAutoEncoder(LightningModule):
    """Encoder and decoder MLPs through a 3-d code; mean squared reconstruction error; Adam."""

    def __init__(self, hidden_dim: int = 64, learning_rate: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(8 * 8, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 3))
        self.decoder = nn.Sequential(nn.Linear(3, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 8 * 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def training_step(self, batch, batch_idx):
        return self._common_step(batch, batch_idx, "train")

    def validation_step(self, batch, batch_idx):
        self._common_step(batch, batch_idx, "val")

    def test_step(self, batch, batch_idx):
        self._common_step(batch, batch_idx, "test")

    def predict_step(self, batch, batch_idx, dataloader_idx=None):
        return self(self._prepare_batch(batch))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)

    def _prepare_batch(self, batch):
        x, _ = batch
        return x.view(x.size(0), -1)

    def _common_step(self, batch, batch_idx, stage: str):
        x = self._prepare_batch(batch)
        loss = F.mse_loss(x, self(x))
        self.log(f"{stage}_loss", loss, on_step=True)
        return loss


class MyDataModule(LightningDataModule):
    """Digits in [0, 1]: 1,297 to train, 200 to validate (``random_split`` seeded 42), 300 to test."""

    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        data = TensorDataset(torch.tensor(x, dtype=torch.float32) / 16.0, torch.tensor(y))
        dataset, self.digits_test = random_split(data, [1497, 300], generator=torch.Generator().manual_seed(0))
        self.digits_train, self.digits_val = random_split(
            dataset, [1297, 200], generator=torch.Generator().manual_seed(42)
        )
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(self.digits_train, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.digits_val, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.digits_test, batch_size=self.batch_size)

    def predict_dataloader(self):
        return DataLoader(self.digits_test, batch_size=self.batch_size)


def main(args: list[str] | None = None, **cli: Any) -> dict[str, Any]:
    """Lightning's ``cli_main``: fit, test and predict on the best checkpoint; what it printed, as a dict."""
    cli = LightningCLI(
        LitAutoEncoder,
        MyDataModule,
        seed_everything_default=1234,
        run=False,
        args=args,
        save_config_kwargs={"overwrite": True},
        **cli,
    )
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    tested = cli.trainer.test(ckpt_path="best", datamodule=cli.datamodule)
    predictions = cli.trainer.predict(ckpt_path="best", datamodule=cli.datamodule)
    summary = getattr(cli.trainer.strategy, "summary", None)
    out = {"test_loss": tested[0]["test_loss_epoch"], "predictions": sum(len(p) for p in predictions or [])}
    if summary is not None:
        out.update(protocol=summary.protocol, staleness_mean=summary.staleness_mean, ps_updates=summary.ps_updates)
    print(out)
    return out


if __name__ == "__main__":
    main()
