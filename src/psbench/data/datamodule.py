"""A LightningDataModule over whole data sets held in memory as float32 tensors.

Parameter-server workers index ``x_train`` / ``y_train`` directly (sharding, sampling);
the dataloaders serve Lightning loops and evaluation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, TensorDataset

from psbench.data.download import ensure_files
from psbench.data.preprocess import ArraySplit, preprocess
from psbench.errors import ConfigError, DataError

log = logging.getLogger("psbench")

#: Builds the raw arrays from the verified raw-file paths (``{}`` for generated data sets).
Loader = Callable[[Mapping[str, Path]], ArraySplit]


def _batched_loader(dataset: TensorDataset, batch_size: int, generator: torch.Generator | None = None) -> DataLoader:
    """Whole-batch indexing (one gather per batch, no per-sample collate)."""
    base = RandomSampler(dataset, generator=generator) if generator is not None else SequentialSampler(dataset)
    sampler = BatchSampler(base, batch_size=batch_size, drop_last=False)
    return DataLoader(dataset, sampler=sampler, batch_size=None)


def _check_labels(name: str, y_train: torch.Tensor, y_test: torch.Tensor, subset: int | None) -> str | None:
    """A classification set's labels: two classes or more in training (else :class:`DataError`: one class trains
    a constant and reports a test error of 0); test labels never seen in training are said (a warning, and the
    returned words go to ``summary.json``'s ``data_note``): the model cannot learn them."""
    from psbench.data.arrays import MAX_LABEL

    top = int(max(y_train.max(), y_test.max()))
    if top > MAX_LABEL:
        raise DataError(
            f"{name}: its largest class label is {top}: labels must be in 0..{MAX_LABEL} (the model has one output "
            "per class, num_classes = the largest label + 1)"
        )
    seen = torch.unique(y_train)
    if len(seen) < 2:
        cut = f" (dataset.subset={subset} keeps the first {subset} samples)" if subset is not None else ""
        raise DataError(
            f"{name}: the training set holds one class only (label {int(seen[0])}){cut}; "
            "classification needs two or more"
        )
    unseen = torch.unique(y_test)[~torch.isin(torch.unique(y_test), seen)]
    if not len(unseen):
        return None
    count = int(torch.isin(y_test, unseen).sum())
    shown = ", ".join(str(int(v)) for v in unseen[:10]) + (", …" if len(unseen) > 10 else "")
    note = (
        f"{count} of {len(y_test)} test samples have labels never seen in training ({shown}): "
        "the model cannot learn them, and they count as errors"
    )
    log.warning("%s: %s", name, note)
    return note


class ArrayDataModule(pl.LightningDataModule):
    """In-memory data set: ``prepare_data`` checks (and optionally downloads) raw files,
    ``setup`` decodes them and applies the paper's preprocessing ``preprocess``
    (:data:`psbench.data.preprocess.PREPROCESS`; None: ``unit_mean`` for pixels, ``none`` for other inputs).

    ``input_shape``, ``num_classes`` and ``num_train`` None: a user's file says them (``image_folder``,
    ``arrays``), known after ``setup``. ``task`` is ``classification`` (int64 labels) or ``regression``
    (float32 targets [N] or [N, k], ``dataset=arrays``); ``output_size`` is the model's output width:
    ``num_classes``, or k targets (``num_classes`` is 0 for regression)."""

    def __init__(
        self,
        name: str,
        input_shape: tuple[int, ...] | None,
        num_classes: int | None,
        num_train: int | None,
        loader: Loader,
        files: tuple[str, ...] = (),
        data_dir: str | Path = ".",
        seed: int = 0,
        download: bool = False,
        verify: bool = True,
        subset: int | None = None,
        batch_size: int = 128,
        eval_batch_size: int = 128,
        preprocess: str | None = "unit_mean",
    ) -> None:
        super().__init__()
        for key, val in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size)):
            if int(val) < 1:
                raise ConfigError(f"dataset.{key}", val, "an integer >= 1")
        if subset is not None and int(subset) < 1:
            raise ConfigError("dataset.subset", subset, "an integer >= 1 or null")
        self.name: str = name
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        self.num_classes = None if num_classes is None else int(num_classes)
        self.num_train = (
            None if num_train is None else (int(num_train) if subset is None else min(int(subset), int(num_train)))
        )
        self.task = "classification"
        self.output_size = self.num_classes
        self.loader = loader
        self.files = tuple(files)
        self.data_dir = Path(data_dir).expanduser()
        self.seed = int(seed)
        self.download = bool(download)
        self.verify = bool(verify)
        self.subset = None if subset is None else int(subset)
        self.batch_size = int(batch_size)
        self.eval_batch_size = int(eval_batch_size)
        self.preprocess = None if preprocess is None else str(preprocess)
        self._verified = False
        self.x_train: torch.Tensor | None = None
        self.y_train: torch.Tensor | None = None
        self.x_test: torch.Tensor | None = None
        self.y_test: torch.Tensor | None = None
        self.pixel_mean: torch.Tensor | None = None
        self.unseen_labels: str | None = None  # test labels never seen in training, in words (:func:`_check_labels`)

    def prepare_data(self) -> None:
        """Check every raw file's md5; download missing ones when ``download`` is set."""
        if self.files:
            ensure_files(self.name, self.data_dir, self.files, self.download, self.verify)
        self._verified = True

    def setup(self, stage: str | None = None) -> None:
        """Decode and preprocess once (idempotent); fills ``x_train`` … ``y_test``."""
        if self.x_train is not None:
            return
        paths = ensure_files(
            self.name,
            self.data_dir,
            self.files,
            download=False,
            verify=self.verify and not self._verified,
        )
        split = self.loader(paths).take_train(self.subset)
        how = self.preprocess or ("unit_mean" if split.scale is not None else "none")
        t = preprocess(split, how)
        got = tuple(t.x_train.shape[1:])
        if self.input_shape is not None and got != self.input_shape:
            raise ConfigError(f"{self.name}.input_shape", got, f"{self.input_shape}")
        if 0 in got:
            raise DataError(f"{self.name}: its samples have shape {list(got)}: no input features to learn from")
        self.input_shape = got
        if t.y_train.is_floating_point():
            self.task, self.num_classes = "regression", 0
            self.output_size = 1 if t.y_train.ndim == 1 else int(t.y_train.shape[1])
        else:
            if split.num_classes is not None:
                self.num_classes = split.num_classes
            self.output_size = self.num_classes
        if self.task == "classification":
            self.unseen_labels = _check_labels(self.name, t.y_train, t.y_test, self.subset)
        self.x_train, self.y_train = t.x_train, t.y_train
        self.x_test, self.y_test = t.x_test, t.y_test
        self.pixel_mean = t.pixel_mean
        self.num_train = len(self.x_train)

    @property
    def num_test(self) -> int:
        """Test-set size (after ``setup``)."""
        return 0 if self.y_test is None else len(self.y_test)

    def _require_setup(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x_train, y_train, x_test, y_test)``, set up first if needed."""
        if self.x_train is None:
            self.setup()
        assert self.x_train is not None and self.y_train is not None
        assert self.x_test is not None and self.y_test is not None
        return self.x_train, self.y_train, self.x_test, self.y_test

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches of ``batch_size``; the order is seeded by ``seed``."""
        x, y, _, _ = self._require_setup()
        gen = torch.Generator().manual_seed(self.seed)
        return _batched_loader(TensorDataset(x, y), self.batch_size, gen)

    def test_dataloader(self) -> DataLoader:
        """The test set in order, ``eval_batch_size`` per batch."""
        _, _, x, y = self._require_setup()
        return _batched_loader(TensorDataset(x, y), self.eval_batch_size)

    def val_dataloader(self) -> DataLoader:
        """Same as :meth:`test_dataloader` (the papers report test error during training)."""
        return self.test_dataloader()

    def __repr__(self) -> str:
        return (
            f"ArrayDataModule(name={self.name!r}, input_shape={self.input_shape}, "
            f"num_classes={self.num_classes}, num_train={self.num_train}, task={self.task!r})"
        )

    __str__ = __repr__
