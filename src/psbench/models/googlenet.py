"""GoogLeNet (Inception v1, Szegedy et al. 2015, Caffe ``bvlc_googlenet``) without the auxiliary
classifiers, as TernGrad §4.2 / Table 3 trains it ("the loss from the last softmax layer is the
total loss").

Stem: conv 64@7×7/2 → maxpool 3/2 → LRN → conv 64@1×1 → conv 192@3×3 → LRN → maxpool 3/2; nine
inception modules (3a, 3b, pool, 4a–4e, pool, 5a, 5b), each four branches concatenated: 1×1;
1×1 → 3×3; 1×1 → 5×5; maxpool 3/1 → 1×1; ReLU after every convolution; global average pooling
(the 7×7 average pool on 224×224 inputs, any size here) → fc ``num_classes``. Pooling is Caffe's
ceil mode, LRN Caffe's (5, 1e-4, 0.75). Dropout (40 % before fc) is left out (parameter-free,
random; see :mod:`psbench.models.alexnet`). 6,998,552 parameters with 1000 classes.

``batchnorm=True`` adds BN after every convolution (whose bias it replaces), TernGrad's training
("Batch Normalization on convolutional layers", §4.2); training with it is refused by validation.
"""

from __future__ import annotations

import torch
from torch import nn

from psbench.models.layers import AcrossChannelLRN

#: module → (1×1, 3×3 reduce, 3×3, 5×5 reduce, 5×5, pool projection) output channels (Szegedy Table 1).
INCEPTION: dict[str, tuple[int, int, int, int, int, int]] = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def conv(c_in: int, c_out: int, k: int, batchnorm: bool, stride: int = 1) -> nn.Sequential:
    """k×k convolution ("same" padding) → [BN] → ReLU."""
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=not batchnorm)]
    if batchnorm:
        layers.append(nn.BatchNorm2d(c_out))
    return nn.Sequential(*layers, nn.ReLU())


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(3, stride=2, ceil_mode=True)


class Inception(nn.Module):
    """One inception module: four parallel branches, concatenated along channels."""

    def __init__(self, c_in: int, widths: tuple[int, int, int, int, int, int], batchnorm: bool) -> None:
        super().__init__()
        c1, r3, c3, r5, c5, cp = widths
        self.b1 = conv(c_in, c1, 1, batchnorm)
        self.b3 = nn.Sequential(conv(c_in, r3, 1, batchnorm), conv(r3, c3, 3, batchnorm))
        self.b5 = nn.Sequential(conv(c_in, r5, 1, batchnorm), conv(r5, c5, 5, batchnorm))
        self.bp = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), conv(c_in, cp, 1, batchnorm))
        self.out_channels = c1 + c3 + c5 + cp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)


class GoogLeNet(nn.Module):
    """Inception v1 without auxiliary classifiers or dropout; optional BN on the convolutions."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int = 1000, batchnorm: bool = False) -> None:
        super().__init__()
        lrn = AcrossChannelLRN(5, alpha=1e-4, beta=0.75, k=1.0)
        layers: list[nn.Module] = [
            conv(input_shape[0], 64, 7, batchnorm, stride=2),
            _pool(),
            lrn,
            conv(64, 64, 1, batchnorm),
            conv(64, 192, 3, batchnorm),
            lrn,
            _pool(),
        ]
        c = 192
        for name, widths in INCEPTION.items():
            block = Inception(c, widths, batchnorm)
            layers.append(block)
            c = block.out_channels
            if name in ("3b", "4e"):
                layers.append(_pool())
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))
