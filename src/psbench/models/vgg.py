"""VGG-A (VGG-11, Simonyan & Zisserman configuration A): TernGrad §5 / Fig 5 ("VggNet-A").

Eight 3×3 convolutions (pad 1) with ReLU, max pooling 2/2 after conv 1, 2, 4, 6 and 8:
64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M, then fc 4096 → ReLU → fc 4096 → ReLU → fc
``num_classes``. On 3×224×224 the fc input is 7·7·512 and the net has 132,863,336 parameters;
the fc input follows ``input_shape`` (any H, W ≥ 32). Dropout is left out (parameter-free, random;
see :mod:`psbench.models.alexnet`). ``batchnorm=True`` adds BN after every convolution (whose bias
it replaces), as TernGrad trains its DNNs (§4.2); training with it is refused by validation.
"""

from __future__ import annotations

import torch
from torch import nn

from psbench.models.layers import flat_features

#: Configuration A (Simonyan & Zisserman Table 1): channels per conv, "M" = max pool 2/2.
CONFIG_A: tuple[int | str, ...] = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGGA(nn.Module):
    """VGG-11 without dropout; optional BN on the convolutions."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int = 1000, batchnorm: bool = False) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = input_shape[0]
        for v in CONFIG_A:
            if v == "M":
                layers.append(nn.MaxPool2d(2, stride=2))
                continue
            layers.append(nn.Conv2d(c_in, int(v), kernel_size=3, padding=1, bias=not batchnorm))
            if batchnorm:
                layers.append(nn.BatchNorm2d(int(v)))
            layers.append(nn.ReLU())
            c_in = int(v)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(flat_features(self.features, tuple(input_shape)), 4096),
            nn.ReLU(),
            nn.Linear(4096, 4096),
            nn.ReLU(),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
