"""Real third-party Lightning code, vendored small: written here after lightning-hydra-template's
``src/models/mnist_module.py`` (MNISTLitModule), ``src/models/components/simple_dense_net.py`` (SimpleDenseNet) and
``src/data/mnist_datamodule.py`` (MNISTDataModule), in the unified ``lightning`` namespace as the template imports it,
with its config's ReduceLROnPlateau on ``val/loss``. MNIST is replaced by scikit-learn's 8×8 digits (no download);
everything else keeps the template's shape: torchmetrics, ``save_hyperparameters``, ``partial`` optimizer and
scheduler factories, ``random_split`` train/val/test, ``batch_size_per_device``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from lightning import LightningDataModule, LightningModule
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split
from torchmetrics import MaxMetric, MeanMetric
from torchmetrics.classification.accuracy import Accuracy


class SimpleDenseNet(torch.nn.Module):
    """The template's SimpleDenseNet: three Linear-BatchNorm-ReLU blocks and a Linear output."""

    def __init__(
        self, input_size: int = 64, lin1_size: int = 32, lin2_size: int = 32, lin3_size: int = 32, output_size: int = 10
    ) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(
            torch.nn.Linear(input_size, lin1_size),
            torch.nn.BatchNorm1d(lin1_size),
            torch.nn.ReLU(),
            torch.nn.Linear(lin1_size, lin2_size),
            torch.nn.BatchNorm1d(lin2_size),
            torch.nn.ReLU(),
            torch.nn.Linear(lin2_size, lin3_size),
            torch.nn.BatchNorm1d(lin3_size),
            torch.nn.ReLU(),
            torch.nn.Linear(lin3_size, output_size),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, _channels, _width, _height = x.size()
        x = x.view(batch_size, -1)
        return self.model(x)


class MNISTLitModule(LightningModule):
    """The template's MNISTLitModule: cross-entropy, torchmetrics' accuracy and mean loss per stage, the best
    validation accuracy, and ``configure_optimizers`` with an lr scheduler monitoring ``val/loss``."""

    def __init__(
        self,
        net: torch.nn.Module,
        optimizer: Any,
        scheduler: Any,
        compile: bool = False,
        scheduler_interval: str = "epoch",
        scheduler_frequency: int = 1,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["net"])
        self.net = net
        self.criterion = torch.nn.CrossEntropyLoss()
        self.train_acc = Accuracy(task="multiclass", num_classes=10)
        self.val_acc = Accuracy(task="multiclass", num_classes=10)
        self.test_acc = Accuracy(task="multiclass", num_classes=10)
        self.train_loss, self.val_loss, self.test_loss = MeanMetric(), MeanMetric(), MeanMetric()
        self.val_acc_best = MaxMetric()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def on_train_start(self) -> None:
        self.val_loss.reset()
        self.val_acc.reset()
        self.val_acc_best.reset()

    def model_step(self, batch: tuple[torch.Tensor, torch.Tensor]):
        x, y = batch
        logits = self.forward(x)
        loss = self.criterion(logits, y)
        preds = torch.argmax(logits, dim=1)
        return loss, preds, y

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss, preds, targets = self.model_step(batch)
        self.train_loss(loss)
        self.train_acc(preds, targets)
        self.log("train/loss", self.train_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.val_loss(loss)
        self.val_acc(preds, targets)
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        acc = self.val_acc.compute()
        self.val_acc_best(acc)
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True, prog_bar=True)

    def test_step(self, batch, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.test_loss(loss)
        self.test_acc(preds, targets)
        self.log("test/loss", self.test_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("test/acc", self.test_acc, on_step=False, on_epoch=True, prog_bar=True)

    def predict_step(self, batch, batch_idx: int) -> torch.Tensor:
        return self.forward(batch[0]).argmax(dim=1)

    def setup(self, stage: str) -> None:
        if self.hparams.compile and stage == "fit":
            self.net = torch.compile(self.net)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.hparams.optimizer(params=self.trainer.model.parameters())
        if self.hparams.scheduler is not None:
            scheduler = self.hparams.scheduler(optimizer=optimizer)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {
                    "scheduler": scheduler,
                    "monitor": "val/loss",
                    "interval": self.hparams.scheduler_interval,
                    "frequency": self.hparams.scheduler_frequency,
                },
            }
        return {"optimizer": optimizer}


def template_module(
    lr: float = 0.05, patience: int = 0, interval: str = "epoch", frequency: int = 1, **net: int
) -> MNISTLitModule:
    """The template's ``configs/model/mnist.yaml`` as Hydra builds it (``_partial_: true`` optimizer and
    ReduceLROnPlateau; here momentum SGD and a short patience, so the plateau rule acts within a short test)."""
    return MNISTLitModule(
        net=SimpleDenseNet(**net),
        optimizer=partial(torch.optim.SGD, lr=lr, momentum=0.9),
        scheduler=partial(torch.optim.lr_scheduler.ReduceLROnPlateau, mode="min", factor=0.5, patience=patience),
        scheduler_interval=interval,
        scheduler_frequency=frequency,
    )


class DigitsDataModule(LightningDataModule):
    """The template's MNISTDataModule over scikit-learn's digits: ``train_val_test_split`` by ``random_split`` with
    generator seed 42, ``batch_size_per_device``, shuffled train loader, ``state_dict`` hooks."""

    def __init__(
        self,
        data_dir: str = "data/",
        train_val_test_split: tuple[int, int, int] = (1197, 300, 300),
        batch_size: int = 16,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.data_train: Dataset | None = None
        self.data_val: Dataset | None = None
        self.data_test: Dataset | None = None
        self.batch_size_per_device = batch_size

    @property
    def num_classes(self) -> int:
        return 10

    def prepare_data(self) -> None:
        """The template downloads MNIST here; the digits ship with scikit-learn."""

    def setup(self, stage: str | None = None) -> None:
        if self.trainer is not None:
            self.batch_size_per_device = self.hparams.batch_size // self.trainer.world_size
        if not self.data_train and not self.data_val and not self.data_test:
            from sklearn.datasets import load_digits

            x, y = load_digits(return_X_y=True)
            dataset = TensorDataset(
                torch.tensor(x, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0, torch.tensor(y, dtype=torch.int64)
            )
            self.data_train, self.data_val, self.data_test = random_split(
                dataset=dataset, lengths=self.hparams.train_val_test_split, generator=torch.Generator().manual_seed(42)
            )

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.data_train, batch_size=self.batch_size_per_device, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.data_val, batch_size=self.batch_size_per_device, shuffle=False)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.data_test, batch_size=self.batch_size_per_device, shuffle=False)

    def predict_dataloader(self) -> DataLoader[Any]:
        return self.test_dataloader()

    def teardown(self, stage: str | None = None) -> None:
        pass

    def state_dict(self) -> dict[Any, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass
