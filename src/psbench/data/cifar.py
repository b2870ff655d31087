"""CIFAR-10 (Rudra §4.2): the standard python pickles, or the offline prefix subset npz.

The pickles are read by an unpickler that knows only the types a CIFAR batch holds (a dict of bytes, numbers
and numpy arrays): a file that would run anything else when unpickled is refused naming what it holds, also
when ``dataset.verify=false`` skips the md5 check (:func:`psbench.data.download.ensure_files`).
"""

from __future__ import annotations

import math
import pickle
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psbench.data.preprocess import ArraySplit
from psbench.data.sources import CIFAR10_TEST_BATCH, CIFAR10_TRAIN_BATCHES
from psbench.errors import DataError

CIFAR_SHAPE = (3, 32, 32)
#: the globals of a CIFAR batch pickle: numpy arrays (protocol 2 with its latin-1 strings; 4; 5) and nothing else
_ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    *((f"numpy.{core}.multiarray", "_reconstruct") for core in ("core", "_core")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")),
}


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays and builtin data only; any other global raises ``pickle.UnpicklingError``."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it would run {module}.{name} when unpickled, which a CIFAR batch never holds")


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickle (dict with ``b'data'`` uint8 [N, 3072], ``b'labels'``) → x [N,3,32,32], y."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            entry = _BatchUnpickler(fh, encoding="bytes").load()
    except FileNotFoundError:
        raise DataError(f"cifar10: batch file {path} not found") from None
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise DataError(f"cifar10: cannot unpickle {path}: {exc or type(exc).__name__}") from None
    if not isinstance(entry, dict) or b"data" not in entry:
        raise DataError(f"cifar10: {path} is not a CIFAR batch (expected dict with b'data')")
    labels = entry.get(b"labels", entry.get(b"fine_labels"))
    data = np.asarray(entry[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != int(np.prod(CIFAR_SHAPE)):
        raise DataError(f"cifar10: {path} b'data' is {data.dtype} {data.shape}, expected uint8 [N, 3072]")
    if labels is None or len(labels) != len(data):
        raise DataError(f"cifar10: {path} needs {len(data)} b'labels', got {None if labels is None else len(labels)}")
    y = np.asarray(labels, dtype=np.int64)
    if y.size and (y.min() < 0 or y.max() > 9):
        raise DataError(f"cifar10: {path} has labels outside 0..9")
    return data.reshape(-1, *CIFAR_SHAPE), y


def load_cifar10_folder(
    folder: str | Path,
    train_batches: Sequence[str] = CIFAR10_TRAIN_BATCHES,
    test_batch: str = CIFAR10_TEST_BATCH,
) -> ArraySplit:
    """Read ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch`` (50k / 10k)."""
    folder = Path(folder)
    parts = [read_cifar_batch(folder / name) for name in train_batches]
    x_test, y_test = read_cifar_batch(folder / test_batch)
    return ArraySplit(
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        x_test,
        y_test,
        scale=255.0,
    )


def _check_declared(path: Path, names: tuple[str, ...]) -> None:
    """The arrays' headers hold what they declare, and that fits in memory, before numpy allocates it."""
    from psbench.data.arrays import npz_headers
    from psbench.machine import physical_memory

    shapes, dtypes = npz_headers(path, names, "cifar10_subset")  # a header that lies about its size, before np.load
    memory = physical_memory()
    need = sum(math.prod(s) * (dtypes[k].itemsize + 8) for k, s in shapes.items())  # read, then float32 twice
    if memory is not None and need > memory // 2:
        raise DataError(
            f"cifar10_subset: {path} declares {shapes['x_train'][0]:,} training images ({need / 2**30:.3g} GiB once "
            f"read): more than half this machine's memory ({memory / 2**30:.1f} GiB)"
        )


def load_cifar10_subset(path: str | Path) -> ArraySplit:
    """Read ``cifar10-prefix-subset.npz``: x_train uint8 [5085,3,32,32], y_train, x_test, y_test."""
    path = Path(path)
    names = ("x_train", "y_train", "x_test", "y_test")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in names if k not in npz.files]
            if not missing:
                _check_declared(path, names)
            arrays = {k: npz[k] for k in names if k not in missing}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:  # truncated, corrupted
        raise DataError(f"cifar10_subset: cannot read {path}: {exc or type(exc).__name__}") from None
    if missing:
        raise DataError(f"cifar10_subset: {path} lacks array {', '.join(missing)}; expected {', '.join(names)}")
    for part in ("train", "test"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        if x.dtype != np.uint8 or x.shape[1:] != CIFAR_SHAPE or y.shape != (len(x),):
            raise DataError(
                f"cifar10_subset: {path} x_{part} {x.dtype} {x.shape} / y_{part} {y.shape}, "
                "expected uint8 [N,3,32,32] and [N]"
            )
        if y.size and (y.min() < 0 or y.max() > 9):
            raise DataError(f"cifar10_subset: {path} y_{part} has labels {y.min()}..{y.max()}, outside 0..9")
    return ArraySplit(
        arrays["x_train"],
        arrays["y_train"].astype(np.int64),
        arrays["x_test"],
        arrays["y_test"].astype(np.int64),
        scale=255.0,
    )
