"""Seeded Gaussian class clusters of any shape: a learnable, instant, offline data set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from psbench.data.preprocess import ArraySplit
from psbench.errors import ConfigError


def make_synthetic(
    shape: Sequence[int] = (1, 28, 28),
    num_classes: int = 10,
    num_train: int = 2000,
    num_test: int = 500,
    seed: int = 0,
    separation: float = 4.0,
    noise: float = 1.0,
) -> ArraySplit:
    """Class ``c`` samples are ``separation · u_c + noise · N(0, I)`` with random unit ``u_c``.

    Class means are ``separation·√2`` apart whatever the dimension, so the Bayes error depends
    on ``separation / noise`` only; labels are balanced and shuffled. Deterministic in ``seed``.
    """
    shape = tuple(int(s) for s in shape)
    if not shape or min(shape) < 1:
        raise ConfigError("dataset.shape", list(shape), "a non-empty list of positive ints")
    if num_classes < 2:
        raise ConfigError("dataset.num_classes", num_classes, "an integer >= 2")
    for key, val in (("num_train", num_train), ("num_test", num_test)):
        if val < 1:
            raise ConfigError(f"dataset.{key}", val, "an integer >= 1")
    if noise <= 0 or separation < 0:
        raise ConfigError("dataset.noise", noise, "noise > 0 and separation >= 0")
    rng = np.random.default_rng(seed)
    dim = int(np.prod(shape))
    directions = rng.standard_normal((num_classes, dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    means = separation * directions

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.permutation(np.arange(n) % num_classes)
        x = means[y] + noise * rng.standard_normal((n, dim))
        return x.astype(np.float32).reshape(n, *shape), y.astype(np.int64)

    x_tr, y_tr = draw(num_train)
    x_te, y_te = draw(num_test)
    return ArraySplit(x_tr, y_tr, x_te, y_te, scale=None)
