"""MNIST and Fashion-MNIST from their IDX gzip files (TernGrad §4.1 trains LeNet on MNIST)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from psbench.data.idx import read_idx
from psbench.data.preprocess import ArraySplit
from psbench.data.sources import IDX_FILES
from psbench.errors import DataError


def _labels(path: Path, n: int, num_classes: int) -> np.ndarray:
    y = read_idx(path, expected_shape=(n,))
    if y.size and int(y.max()) >= num_classes:
        raise DataError(f"IDX file {path}: label {int(y.max())}, expected 0..{num_classes - 1}")
    return y.astype(np.int64)


def load_idx_folder(folder: str | Path, num_classes: int = 10) -> ArraySplit:
    """Read the four canonical IDX files in ``folder`` → uint8 images [N, 1, 28, 28]."""
    folder = Path(folder)
    xs, ys = [], []
    for part in ("train", "test"):
        x = read_idx(folder / IDX_FILES[f"{part}_images"], expected_shape=(None, 28, 28))
        y = _labels(folder / IDX_FILES[f"{part}_labels"], len(x), num_classes)
        xs.append(x[:, None, :, :])
        ys.append(y)
    return ArraySplit(xs[0], ys[0], xs[1], ys[1], scale=255.0)
