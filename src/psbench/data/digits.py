"""scikit-learn's 8×8 digits (1,797 images, 10 classes): a tiny offline stand-in for MNIST."""

from __future__ import annotations

import numpy as np

from psbench.data.preprocess import ArraySplit
from psbench.errors import ConfigError

NUM_DIGITS = 1797


def load_digits_split(seed: int = 0, test_size: int = 360) -> ArraySplit:
    """Stratified split seeded by ``seed`` (default 1437 train / 360 test), x [N, 1, 8, 8]."""
    if not 10 <= test_size <= NUM_DIGITS - 10:
        raise ConfigError("dataset.test_size", test_size, f"an integer in 10..{NUM_DIGITS - 10}")
    from sklearn.datasets import load_digits  # lazy: sklearn costs ~2 s to import
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None, :, :]  # pixel values 0..16
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_size, stratify=y, random_state=seed, shuffle=True)
    return ArraySplit(x_tr, y_tr, x_te, y_te, scale=16.0)
