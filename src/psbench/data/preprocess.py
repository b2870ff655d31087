"""Raw train/test arrays and the papers' preprocessing.

Rudra §4.2: "the per-pixel mean is computed over the entire training dataset and subtracted
from the input". Pixels are first scaled to [0, 1] (Caffe's ``scale: 0.00390625``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from psbench.errors import ConfigError


@dataclass(frozen=True)
class ArraySplit:
    """Raw numpy arrays of one data set; ``scale`` maps pixels to [0, 1] (None: already real)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    scale: float | None = 255.0

    def take_train(self, k: int | None) -> ArraySplit:
        """The first ``k`` training samples (all when None); the test set is kept whole."""
        if k is None:
            return self
        n = len(self.x_train)
        if not 1 <= k <= n:
            raise ConfigError("dataset.subset", k, f"an integer in 1..{n} or null")
        return ArraySplit(self.x_train[:k], self.y_train[:k], self.x_test, self.y_test, self.scale)


@dataclass(frozen=True)
class Tensors:
    """Preprocessed float32 inputs, int64 labels and the subtracted per-pixel mean."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    pixel_mean: torch.Tensor


def scale_and_center(split: ArraySplit) -> Tensors:
    """Scale to [0, 1] by ``split.scale``, subtract the training set's per-pixel mean."""
    x_train = torch.from_numpy(np.asarray(split.x_train).astype(np.float32))  # copies
    x_test = torch.from_numpy(np.asarray(split.x_test).astype(np.float32))
    if split.scale is not None:
        x_train.mul_(1.0 / split.scale)
        x_test.mul_(1.0 / split.scale)
    mean = x_train.mean(dim=0, dtype=torch.float64).to(torch.float32)
    x_train.sub_(mean)
    x_test.sub_(mean)
    return Tensors(
        x_train=x_train,
        y_train=torch.from_numpy(np.asarray(split.y_train, dtype=np.int64).copy()),
        x_test=x_test,
        y_test=torch.from_numpy(np.asarray(split.y_test, dtype=np.int64).copy()),
        pixel_mean=mean,
    )
