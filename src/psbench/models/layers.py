"""Caffe building blocks that PyTorch lacks, written without in-place ops (vmap-safe)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _lrn(x: torch.Tensor, k: int, alpha: float, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y, z, z^(−β)) of :class:`WithinChannelLRN`: y = x·z^(−β), z = 1 + α·A(x²)."""
    z = 1.0 + alpha * F.avg_pool2d(x * x, k, stride=1, padding=(k - 1) // 2, count_include_pad=True)
    s = torch.pow(z, -beta)
    return x * s, z, s


def _lrn_backward(
    g: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    z: torch.Tensor,
    s: torch.Tensor,
    k: int,
    alpha: float,
    beta: float,
) -> torch.Tensor:
    """∂L/∂x = g·z^(−β) − 2αβ·x·A(g·y/z)."""
    back = F.avg_pool2d(g * y / z, k, stride=1, padding=(k - 1) // 2, count_include_pad=True)
    return g * s - (2.0 * alpha * beta) * x * back


class _WithinChannelLRN(torch.autograd.Function):
    """y = x·z^(−β), z = 1 + α·A(x²) with A the k×k zero-padded window mean, and its hand-written gradient

    ∂L/∂x = g·z^(−β) − 2αβ·x·A(g·y/z)  (A is its own adjoint: a symmetric window, stride 1, a constant k²),

    which reuses the forward's z and z^(−β): autograd's own graph of the same ops recomputes a power and keeps
    five intermediates. Forward values are those of the plain ops, bit for bit. Split forward/setup_context
    with a generated vmap rule, so :mod:`torch.func` (the look-ahead's vmap and grad) can transform it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, k: int, alpha: float, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _lrn(x, k, alpha, beta)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, k, alpha, beta = inputs
        y, z, s = output
        ctx.save_for_backward(x, y, z, s)
        ctx.k, ctx.alpha, ctx.beta = k, alpha, beta
        ctx.mark_non_differentiable(z, s)

    @staticmethod
    def backward(ctx, g: torch.Tensor, _gz, _gs):
        x, y, z, s = ctx.saved_tensors
        return _lrn_backward(g, x, y, z, s, ctx.k, ctx.alpha, ctx.beta), None, None, None


class _WithinChannelLRNEager(torch.autograd.Function):
    """:class:`_WithinChannelLRN`'s ops and gradient for plain autograd, where no :mod:`torch.func` transform is
    active: a Function with ``setup_context`` binds its arguments through ``inspect.signature`` on every
    ``apply`` (~35 µs; two layers ≈ 3 % of a 4-sample CIFAR CNN gradient at one thread)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, k: int, alpha: float, beta: float) -> torch.Tensor:
        y, z, s = _lrn(x, k, alpha, beta)
        ctx.save_for_backward(x, y, z, s)
        ctx.k, ctx.alpha, ctx.beta = k, alpha, beta
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, y, z, s = ctx.saved_tensors
        return _lrn_backward(g, x, y, z, s, ctx.k, ctx.alpha, ctx.beta), None, None, None


class WithinChannelLRN(nn.Module):
    """Caffe ``LRN`` with ``norm_region: WITHIN_CHANNEL`` (used by ``cifar10_full``).

    ``y = x / (1 + alpha · mean_{k×k window}(x²))^beta``; the window mean counts zero padding,
    like Caffe's implementation (an AVE pooling of x² with pad (k-1)/2). Parameter-free; its gradient is
    :class:`_WithinChannelLRN`'s closed form (one thread, channels_last: the layer's forward + backward at
    128×32×16×16 is 2.5× faster than autograd's graph of the same ops, the CIFAR CNN's training step ~5 %).
    """

    def __init__(self, local_size: int = 3, alpha: float = 5e-5, beta: float = 0.75) -> None:
        super().__init__()
        if local_size < 1 or local_size % 2 == 0:
            raise ValueError(f"local_size must be odd and positive, got {local_size}")
        self.local_size, self.alpha, self.beta = local_size, alpha, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch._C._are_functorch_transforms_active():  # vmap/grad need the split form (torch.func)
            return _WithinChannelLRN.apply(x, self.local_size, self.alpha, self.beta)[0]
        return _WithinChannelLRNEager.apply(x, self.local_size, self.alpha, self.beta)

    def extra_repr(self) -> str:
        return f"local_size={self.local_size}, alpha={self.alpha}, beta={self.beta}"


class AcrossChannelLRN(nn.LocalResponseNorm):
    """Caffe's ACROSS_CHANNELS LRN, ``nn.LocalResponseNorm``'s maths, through torch's 3-D path on an (N, C, H·W)
    view: the same floats, bit for bit, but its backward is ``avg_pool2d``'s where the 4-D path's is
    ``avg_pool3d``'s, which has no deterministic CUDA kernel, so under ``trainer.deterministic`` (the default)
    every GPU run of AlexNet, CifarNet or GoogLeNet failed at its first gradient."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            return super().forward(x)
        return F.local_response_norm(x.flatten(2), self.size, self.alpha, self.beta, self.k).reshape(x.shape)


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
