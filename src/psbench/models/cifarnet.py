"""CifarNet of TernGrad §4.1 / Table 1: the TensorFlow CIFAR-10 tutorial network (``cifar10.py``).

conv1 64@5×5 SAME → ReLU → maxpool 3/2 SAME → LRN → conv2 64@5×5 SAME → ReLU → LRN → maxpool 3/2
SAME → local3 fc 384 → ReLU → local4 fc 192 → ReLU → linear ``num_classes``. LRN is TF's
``lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75)`` = ``nn.LocalResponseNorm(9, alpha=0.001,
beta=0.75, k=1)`` (TF sums the squares, PyTorch averages them over the window of 9).

TernGrad trains on random 24×24 crops of the 32×32 images (mirrored, brightness/contrast jitter)
and tests on the centre crop (§4.1). Augmentation is the data's job and is not done here; the
model takes the centre ``crop``×``crop`` of any input at least that large (default 24, the
paper's, so the fc sizes and the 1,068,298 parameters are TF's: 24 → 12 → 6, 6·6·64 = 2304 fc
inputs). ``crop=None`` uses the whole input and sizes local3 from it (32×32 → 8·8·64 inputs).
No dropout, no BatchNorm, no in-place ops (vmap-safe).
"""

from __future__ import annotations

import torch
from torch import nn

from psbench.models.layers import AcrossChannelLRN, TFSameMaxPool2d, flat_features

#: TF tutorial's crop size (``IMAGE_SIZE = 24``), TernGrad §4.1.
CROP = 24


class CifarNet(nn.Module):
    """TF CIFAR-10 tutorial CNN; the centre ``crop`` of the input (``None``: all of it)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int = 10, crop: int | None = CROP) -> None:
        super().__init__()
        if crop is not None and min(input_shape[1:]) < crop:
            raise RuntimeError(f"input {tuple(input_shape)} is smaller than the {crop}×{crop} crop")
        self.crop = crop
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[0], 64, kernel_size=5, padding=2),
            nn.ReLU(),
            TFSameMaxPool2d(3, 2),
            AcrossChannelLRN(9, alpha=0.001, beta=0.75, k=1.0),
            nn.Conv2d(64, 64, kernel_size=5, padding=2),
            nn.ReLU(),
            AcrossChannelLRN(9, alpha=0.001, beta=0.75, k=1.0),
            TFSameMaxPool2d(3, 2),
        )
        shape = (input_shape[0], crop, crop) if crop is not None else tuple(input_shape)
        self.classifier = nn.Sequential(
            nn.Linear(flat_features(self.features, shape), 384),
            nn.ReLU(),
            nn.Linear(384, 192),
            nn.ReLU(),
            nn.Linear(192, num_classes),
        )

    def center_crop(self, x: torch.Tensor) -> torch.Tensor:
        if self.crop is None:
            return x
        top, left = (x.shape[-2] - self.crop) // 2, (x.shape[-1] - self.crop) // 2
        return x[..., top : top + self.crop, left : left + self.crop]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(self.center_crop(x)), 1))
