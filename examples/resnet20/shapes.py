"""A user's own data set: 32×32 colour images of four shapes (square, disk, triangle, cross), drawn from a seed.

``conf/dataset/shapes.yaml`` names :func:`splits` (``_target_: shapes.splits``): it returns the (train, test) pair of
map-style datasets psbench reads, each item an ``(x, y)`` pair — x a float tensor [3, 32, 32] in [-1, 1], y the
shape's class. psbench passes ``seed`` because the signature names it. Nothing to download: the example runs
from a clean clone (point ``dataset`` at ``cifar10`` for the real thing).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

CLASSES = ("square", "disk", "triangle", "cross")


def draw(label: int, rng: np.random.Generator, size: int = 32) -> np.ndarray:
    """One image [3, size, size]: a shape of random place, size and colour on a noisy background."""
    r = rng.uniform(0.22, 0.38) * size
    cy, cx = rng.uniform(r, size - r, 2)
    yy, xx = np.mgrid[:size, :size].astype(np.float32)
    dy, dx = yy - cy, xx - cx
    if label == 0:
        mask = (np.abs(dy) < r * 0.8) & (np.abs(dx) < r * 0.8)
    elif label == 1:
        mask = dy**2 + dx**2 < r**2
    elif label == 2:
        mask = (dy < r * 0.7) & (dy > -r) & (np.abs(dx) < (dy + r) * 0.6)
    else:
        mask = ((np.abs(dy) < r * 0.25) | (np.abs(dx) < r * 0.25)) & (np.abs(dy) < r) & (np.abs(dx) < r)
    colour = rng.uniform(0.3, 1.0, 3).astype(np.float32)
    image = rng.normal(0.0, 0.1, (3, size, size)).astype(np.float32)
    image += mask * colour[:, None, None]
    return np.clip(image, 0.0, 1.0) * 2.0 - 1.0


class Shapes(Dataset):
    """``n`` images of one split; item i is the same for the same (seed, split, i)."""

    def __init__(self, n: int, seed: int, split: int) -> None:
        self.n, self.seed, self.split = n, seed, split

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng([self.seed, self.split, i])
        label = i % len(CLASSES)
        return torch.from_numpy(draw(label, rng)), label


def splits(num_train: int = 2000, num_test: int = 500, seed: int = 0) -> tuple[Shapes, Shapes]:
    return Shapes(num_train, seed, 0), Shapes(num_test, seed, 1)
