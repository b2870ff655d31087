"""An existing Lightning project's model and data, written without psbench: a small CNN on scikit-learn's 8×8 digits.

Nothing here knows about parameter servers; ``train.py`` trains it with plain Lightning or, with one line, on a
simulated parameter server (``ParameterServerStrategy.simulated``).
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits


class DigitsData(pl.LightningDataModule):
    """scikit-learn's digits (1,797 images of 8×8, 10 classes) as tensors in [0, 1]: 1,437 to train, 360 to validate."""

    def __init__(self, batch_size: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.batch_size, self.seed = batch_size, seed

    def setup(self, stage: str | None = None) -> None:
        x, y = load_digits(return_X_y=True)
        x = torch.tensor(x, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
        y = torch.tensor(y, dtype=torch.int64)
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(self.seed))
        train, val = order[:1437], order[1437:]
        self.train = torch.utils.data.TensorDataset(x[train], y[train])
        self.val = torch.utils.data.TensorDataset(x[val], y[val])

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(self.val, batch_size=180)


class LitConvNet(pl.LightningModule):
    """Two 3×3 convolutions, max pooling and a linear classifier; mean cross-entropy; momentum SGD whose lr halves
    every epoch."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.classifier = torch.nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]
