"""Raw train/test arrays and the papers' preprocessing (``dataset.preprocess``).

Each paper's data layer, as its published code has it:

* ``unit_mean`` (default) — pixels scaled to [0, 1] by the data set's range, then the training
  set's per-pixel mean subtracted (Rudra §4.2's mean subtraction on unit-range pixels; psbench's
  historical default).
* ``mean`` — the per-pixel mean subtracted from the raw 0–255 pixels, no scaling: Caffe's
  ``transform_param { mean_file }`` of ``cifar10_full_train_test.prototxt``, the network Rudra §4.2
  and Zhang §4.1 train ("the per-pixel mean is computed over the entire training dataset and
  subtracted from the input"); also Caffe's AlexNet data layer.
* ``symmetric`` — x/255 · 2 − 1 ∈ [−1, 1], no mean: TernGrad's LeNet on MNIST
  (``terngrad/inception/lenet_preprocessing.py`` after ``convert_image_dtype``).
* ``per_image`` — TensorFlow's ``per_image_standardization`` of [0, 1] pixels: each image minus its
  own mean, over max(std, 1/√N): TernGrad's CifarNet (``eval_cifar10_image`` of
  ``terngrad/inception/image_processing.py``; its random crops and colour jitter are not reproduced).
* ``minmax250`` — x/250, no mean: dist-keras' ``MinMaxTransformer(o_max=250)`` of its MNIST example,
  the code AGN §4 ran.
* ``none`` — the inputs as they are (as float32): a user's own features (``dataset=arrays``).

Labels stay int64; float targets (regression, ``dataset=arrays``) become float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from psbench.data.options import PREPROCESS
from psbench.errors import ConfigError


@dataclass(frozen=True)
class ArraySplit:
    """Raw numpy arrays of one data set; ``scale`` maps pixels to [0, 1] (None: already real);
    ``num_classes``: the model's output size where the data set says it (a file's classes or targets)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    scale: float | None = 255.0
    num_classes: int | None = None

    def take_train(self, k: int | None) -> ArraySplit:
        """The first ``k`` training samples (all when None); the test set is kept whole."""
        if k is None:
            return self
        n = len(self.x_train)
        if not 1 <= k <= n:
            raise ConfigError("dataset.subset", k, f"an integer in 1..{n} or null")
        return replace(self, x_train=self.x_train[:k], y_train=self.y_train[:k])


@dataclass(frozen=True)
class Tensors:
    """Preprocessed float32 inputs, int64 labels (float32 targets) and the subtracted per-pixel mean (zeros if none)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    pixel_mean: torch.Tensor


def _float(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x).astype(np.float32))  # copies


def _pixel_mean(raw_x: np.ndarray, x: torch.Tensor, raw: bool) -> torch.Tensor:
    """The per-pixel float64 mean of ``x`` as float32. Where ``x`` is the integer pixels as they are (``raw``),
    it is the int64 sum / n: float64 sums of integers below 2⁵³ are exact in any order, so this is the same
    value, ~6x faster than a float64 reduction over the first dimension."""
    if raw and np.issubdtype(np.asarray(raw_x).dtype, np.integer):
        total = torch.from_numpy(np.ascontiguousarray(raw_x)).sum(dim=0, dtype=torch.int64)
        return (total.to(torch.float64) / len(x)).to(torch.float32)
    return x.mean(dim=0, dtype=torch.float64).to(torch.float32)


def _per_image(x: torch.Tensor) -> torch.Tensor:
    """TF ``per_image_standardization``: (x − mean) / max(std, 1/√N) per image (population std)."""
    flat = x.reshape(len(x), -1)
    n = flat.shape[1]
    mean = flat.mean(dim=1, keepdim=True)
    std = flat.std(dim=1, correction=0, keepdim=True).clamp_min(1.0 / math.sqrt(n))
    return ((flat - mean) / std).reshape(x.shape)


def _targets(y: np.ndarray) -> torch.Tensor:
    y = np.asarray(y)
    return torch.from_numpy(y.astype(np.float32 if y.dtype.kind == "f" else np.int64, copy=True))


def preprocess(split: ArraySplit, how: str = "unit_mean") -> Tensors:
    """Float tensors of ``split`` preprocessed as ``how`` (:data:`PREPROCESS`, see the module doc)."""
    if how not in PREPROCESS:
        raise ConfigError("dataset.preprocess", how, "one of " + ", ".join(PREPROCESS))
    x_train, x_test = _float(split.x_train), _float(split.x_test)
    divisor = {"unit_mean": split.scale, "symmetric": split.scale, "per_image": split.scale, "minmax250": 250.0}.get(
        how
    )
    if divisor is not None:
        x_train.mul_(1.0 / divisor)
        x_test.mul_(1.0 / divisor)
    mean = torch.zeros(x_train.shape[1:])
    if how in ("unit_mean", "mean"):
        mean = _pixel_mean(split.x_train, x_train, raw=divisor is None)
        x_train.sub_(mean)
        x_test.sub_(mean)
    elif how == "symmetric":
        x_train, x_test = x_train.mul_(2.0).sub_(1.0), x_test.mul_(2.0).sub_(1.0)
    elif how == "per_image":
        x_train, x_test = _per_image(x_train), _per_image(x_test)
    return Tensors(
        x_train=x_train,
        y_train=_targets(split.y_train),
        x_test=x_test,
        y_test=_targets(split.y_test),
        pixel_mean=mean,
    )
