"""A user's data set by ``_target_``: datasets or a LightningDataModule, read once into the in-memory tensors.

A ``dataset`` node with ``_target_`` names a callable (its other keys its arguments; ``seed`` and ``data_dir`` are
passed where its signature names them, :func:`psbench.target.build`) returning either

* ``(train, test)``: two map-style :class:`torch.utils.data.Dataset` s (``len`` and ``ds[i]``) of ``(x, y)`` items, or
* a ``LightningDataModule`` (``pytorch_lightning``'s or ``lightning.pytorch``'s): ``prepare_data()`` and
  ``setup("fit")`` are called, its ``train_dataloader().dataset`` is the training set and
  ``test_dataloader().dataset`` (after ``setup("test")``) — or, where it has no test loader,
  ``val_dataloader().dataset`` — the test set.

Each item is read once, in index order, into float32 inputs and int64 labels (classification) or float32 targets
(regression: a float y, or a 1-d float vector of k targets), so the engines index them as any in-memory data set
(the global sample stream, determinism and the memory budget as for ``dataset=arrays``); a random transform of the
user's is drawn once, under the run's seed. ``x`` is a tensor, a numpy array or a number; inputs are taken as they
are (no preprocessing). What is not so is one :class:`~psbench.errors.ConfigError` naming ``dataset._target_``: a
target that does not import or returns something else, an item that is not ``(x, y)``, shapes or kinds of y that
differ between items or splits, a set whose float32 copy would not fit in half this machine's memory. A set too
large for memory is not streamed (``dataset=imagenet`` is).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from psbench.errors import ConfigError, require
from psbench.machine import physical_memory
from psbench.target import build, label

KEY = "dataset._target_"
#: psbench's keys of a ``_target_`` data set node (:data:`psbench.data.options.TARGET_KEYS`): never the target's
OWN_KEYS = ("name", "subset", "eval_batch_size", "data_note")
WHAT = "a callable returning (train, test) map-style datasets of (x, y) items, or a LightningDataModule"


def _datasets(node: Mapping[str, Any], seed: int, data_dir: str | Path) -> tuple[Any, Any]:
    """(train, test) of the target: its pair, or its LightningDataModule's datasets (either Lightning namespace)."""
    from psbench import lightning_namespaces as ns

    shown = node["_target_"]
    got = build(KEY, node, OWN_KEYS, {"seed": seed, "data_dir": str(data_dir)}, what=WHAT)
    if ns.is_instance(got, "LightningDataModule"):
        return _from_datamodule(got, shown)
    require(
        isinstance(got, tuple | list) and len(got) == 2,
        KEY,
        shown,
        f"{WHAT} (it returned {type(got).__name__}{f' of {len(got)}' if isinstance(got, tuple | list) else ''})",
    )
    return got[0], got[1]


def _from_datamodule(dm, shown: str) -> tuple[Any, Any]:
    from psbench import lightning_namespaces as ns

    base = ns.get(ns.of(dm) or "pytorch_lightning", "LightningDataModule")  # its namespace's hooks

    def loader_set(hook: str) -> Any:
        try:
            loader = getattr(dm, hook)()
        except Exception as exc:
            raise ConfigError(
                KEY,
                shown,
                f"a LightningDataModule whose {hook}() returns a DataLoader: it raised "
                f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            ) from exc
        require(
            isinstance(loader, torch.utils.data.DataLoader),
            KEY,
            shown,
            f"a LightningDataModule whose {hook}() returns one DataLoader (it returned {type(loader).__name__})",
        )
        return loader.dataset

    try:
        dm.prepare_data()
        dm.setup("fit")
    except Exception as exc:
        raise ConfigError(
            KEY,
            shown,
            f"a LightningDataModule that prepares and sets up: it raised "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}",
        ) from exc
    train = loader_set("train_dataloader")
    if type(dm).test_dataloader is not base.test_dataloader:
        try:
            dm.setup("test")
        except Exception as exc:
            raise ConfigError(
                KEY,
                shown,
                f"a LightningDataModule that sets up its test stage: it raised "
                f"{type(exc).__name__}: {' '.join(str(exc).split())}",
            ) from exc
        return train, loader_set("test_dataloader")
    require(
        type(dm).val_dataloader is not base.val_dataloader,
        KEY,
        shown,
        "a LightningDataModule with a test_dataloader() or a val_dataloader() (the test set)",
    )
    return train, loader_set("val_dataloader")


def _array(v: Any) -> np.ndarray | None:
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return np.asarray(v)
    return None


class _Reader:
    """The items of one split into preallocated arrays, checked against the first training item."""

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.x_shape: tuple[int, ...] | None = None
        self.y_shape: tuple[int, ...] | None = None
        self.regression: bool | None = None

    def bad(self, split: str, i: int, what: str) -> ConfigError:
        return ConfigError(KEY, self.shown, f"{WHAT}: {split} item {i} {what}")

    def item(self, split: str, ds: Any, i: int) -> tuple[np.ndarray, np.ndarray]:
        try:
            it = ds[i]
        except Exception as exc:
            raise self.bad(split, i, f"could not be read ({type(exc).__name__}: {' '.join(str(exc).split())})") from exc
        if not (isinstance(it, tuple | list) and len(it) == 2):
            size = f" of {len(it)}" if isinstance(it, tuple | list) else ""
            raise self.bad(split, i, f"is a {type(it).__name__}{size}, not an (x, y) pair")
        x, y = _array(it[0]), _array(it[1])
        if x is None or x.dtype.kind not in "iuf" or x.ndim < 1:
            kind = type(it[0]).__name__ if x is None else f"{x.dtype} {list(x.shape)}"
            raise self.bad(
                split,
                i,
                f"has x a {kind}: x must be a tensor, array or number of at least one axis "
                "(a PIL image: give the dataset a transform that returns a tensor)",
            )
        if y is None or y.dtype.kind not in "iuf" or y.ndim > 1:
            kind = type(it[1]).__name__ if y is None else f"{y.dtype} {list(y.shape)}"
            raise self.bad(
                split,
                i,
                f"has y a {kind}: y must be a class label (an integer), a float target or a "
                "1-d float vector of targets",
            )
        regression = y.dtype.kind == "f"
        if self.x_shape is None:
            self.x_shape, self.y_shape, self.regression = x.shape, y.shape, regression
            require(
                regression or y.ndim == 0,
                KEY,
                self.shown,
                f"{WHAT}: {split} item {i} has y of shape "
                f"{list(y.shape)} {y.dtype}: a class label is one integer (float vectors are regression targets)",
            )
        if x.shape != self.x_shape:
            raise self.bad(
                split,
                i,
                f"has x of shape {list(x.shape)}, item 0 of train {list(self.x_shape)}: every x the same shape",
            )
        if regression != self.regression or y.shape != self.y_shape:
            first = "float targets" if self.regression else "integer labels"
            raise self.bad(
                split,
                i,
                f"has y {y.dtype} {list(y.shape)}, train item 0 {first} "
                f"{list(self.y_shape or ())}: every y the same kind and shape",
            )
        return x, y

    def read(self, split: str, ds: Any, n: int, total: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` items of ``ds``; ``total``: the samples of both splits (the memory they take is checked)."""
        x0, y0 = self.item(split, ds, 0)
        _check_memory(self.shown, x0.shape, total)
        x = np.empty((n, *x0.shape), dtype=np.float32)
        y = np.empty((n, *y0.shape), dtype=np.float32 if self.regression else np.int64)
        x[0], y[0] = x0, y0
        for i in range(1, n):
            x[i], y[i] = self.item(split, ds, i)
        bad_x = ~np.isfinite(x).reshape(n, -1).all(1)
        if bad_x.any():
            raise self.bad(split, int(np.argmax(bad_x)), "has an x that holds NaN or inf")
        if self.regression:
            bad = ~np.isfinite(y).reshape(n, -1).all(1)
            if bad.any():
                raise self.bad(split, int(np.argmax(bad)), "has a target that is NaN or inf")
        elif y.min() < 0:
            raise self.bad(split, int(np.argmin(y)), f"has the label {int(y.min())}: class labels are >= 0")
        return x, y


def _check_memory(shown: str, x_shape: tuple[int, ...], n: int) -> None:
    """The float32 inputs, twice (read, then the data module's copy), fit in half this machine's memory."""
    memory = physical_memory()
    need = 2 * 4 * math.prod(x_shape) * n
    if memory is not None and need > memory // 2:
        raise ConfigError(
            KEY,
            shown,
            f"data that fit in half this machine's memory ({memory / 2**30:.1f} GiB): "
            f"{n:,} samples of {list(x_shape)} floats take {need / 2**30:.3g} GiB to read "
            "(a larger set is not streamed)",
        )


def _size(shown: str, split: str, ds: Any) -> int:
    if isinstance(ds, torch.utils.data.IterableDataset) or not (hasattr(ds, "__getitem__") and hasattr(ds, "__len__")):
        raise ConfigError(
            KEY, shown, f"{WHAT}: the {split} set is a {type(ds).__name__}, not map-style (len(ds) and ds[i])"
        )
    n = len(ds)
    require(n >= 1, KEY, shown, f"{WHAT}: the {split} set is empty")
    return n


def load_target(node: Mapping[str, Any], seed: int, data_dir: str | Path):
    """The target's train and test sets as an :class:`~psbench.data.preprocess.ArraySplit` (see the module doc)."""
    from psbench.data.preprocess import ArraySplit

    shown = node["_target_"]
    train, test = _datasets(node, seed, data_dir)
    n_train, n_test = _size(shown, "train", train), _size(shown, "test", test)
    reader = _Reader(shown)
    x_train, y_train = reader.read("train", train, n_train, n_train + n_test)
    x_test, y_test = reader.read("test", test, n_test, n_train + n_test)
    classes = None if reader.regression else int(max(y_train.max(), y_test.max())) + 1
    if classes is not None and classes < 2:
        raise ConfigError(KEY, shown, f"{WHAT}: its labels are all 0; classification needs two classes or more")
    return ArraySplit(x_train, y_train, x_test, y_test, scale=None, num_classes=classes)


def target_datamodule(node: Mapping[str, Any], data_dir: str | Path, seed: int = 0):
    """The :class:`~psbench.data.datamodule.ArrayDataModule` of a ``_target_`` data set node."""
    from psbench.data.datamodule import ArrayDataModule

    return ArrayDataModule(
        label(node),
        None,
        None,
        None,
        lambda _paths: load_target(node, seed, data_dir),
        data_dir=data_dir,
        seed=seed,
        subset=node.get("subset"),
        eval_batch_size=int(node.get("eval_batch_size") or 128),
        preprocess="none",
    )
