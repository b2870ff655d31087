"""Caffe building blocks that PyTorch lacks, written without in-place ops (vmap-safe)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class WithinChannelLRN(nn.Module):
    """Caffe ``LRN`` with ``norm_region: WITHIN_CHANNEL`` (used by ``cifar10_full``).

    ``y = x / (1 + alpha · mean_{k×k window}(x²))^beta``; the window mean counts zero padding,
    like Caffe's implementation (an AVE pooling of x² with pad (k-1)/2). Parameter-free.
    """

    def __init__(self, local_size: int = 3, alpha: float = 5e-5, beta: float = 0.75) -> None:
        super().__init__()
        if local_size < 1 or local_size % 2 == 0:
            raise ValueError(f"local_size must be odd and positive, got {local_size}")
        self.local_size, self.alpha, self.beta = local_size, alpha, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = (self.local_size - 1) // 2
        sq_mean = F.avg_pool2d(x * x, self.local_size, stride=1, padding=pad, count_include_pad=True)
        return x * torch.pow(1.0 + self.alpha * sq_mean, -self.beta)

    def extra_repr(self) -> str:
        return f"local_size={self.local_size}, alpha={self.alpha}, beta={self.beta}"


def caffe_xavier_(weight: torch.Tensor) -> None:
    """Caffe ``xavier`` filler: U(-a, a), a = sqrt(3 / fan_in)."""
    fan_in = weight[0].numel()
    bound = math.sqrt(3.0 / fan_in)
    with torch.no_grad():
        weight.uniform_(-bound, bound)


def flat_features(features: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Number of features ``features`` outputs for one input of ``input_shape`` (no RNG use).

    One forward of zeros in eval mode (BatchNorm accepts a single 1×1 sample and keeps its running
    statistics); under ``with torch.device("meta")`` it costs no FLOPs. Raises ``RuntimeError`` when
    the input is too small for the stack.
    """
    training = features.training
    features.eval()
    try:
        with torch.no_grad():
            out = features(torch.zeros(1, *input_shape))
    finally:
        features.train(training)
    return int(out[0].numel())


class TFSameMaxPool2d(nn.Module):
    """TensorFlow ``max_pool(..., padding="SAME")``: output ⌈n/stride⌉, the odd pad cell at the end.

    PyTorch pads symmetrically, so its windows start one cell earlier than TF's on even sizes;
    here the input is padded with −inf exactly as TF pads (``before = total // 2``), then pooled.
    """

    def __init__(self, kernel_size: int = 3, stride: int = 2) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride

    def _pad(self, n: int) -> tuple[int, int]:
        out = -(-n // self.stride)
        total = max((out - 1) * self.stride + self.kernel_size - n, 0)
        return total // 2, total - total // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top, bottom = self._pad(x.shape[-2])
        left, right = self._pad(x.shape[-1])
        x = F.pad(x, (left, right, top, bottom), value=float("-inf"))
        return F.max_pool2d(x, self.kernel_size, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}"

