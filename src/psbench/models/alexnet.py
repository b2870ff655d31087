"""AlexNet in Caffe's form (``bvlc_alexnet``): Rudra §4.2 (ImageNet), TernGrad §4.2 / Table 2.

conv1 96@11×11/4 → ReLU → LRN → maxpool 3/2 → conv2 256@5×5 pad 2 (2 groups) → ReLU → LRN →
maxpool 3/2 → conv3 384@3×3 → ReLU → conv4 384@3×3 (2 groups) → ReLU → conv5 256@3×3 (2 groups)
→ ReLU → maxpool 3/2 → fc6 4096 → ReLU → fc7 4096 → ReLU → fc8 ``num_classes``. LRN is Caffe's
ACROSS_CHANNELS (local_size 5, alpha 1e-4, beta 0.75) = ``nn.LocalResponseNorm(5, 1e-4, 0.75, 1)``;
pooling is Caffe's ceil mode.

Size. Rudra §4.2 states "~72 million trainable parameters and the total model size is 289 MB"
(289 MB = 4 bytes × 72.25 M) and that the images are "converted to a fixed resolution of 256 ×
256 to be used input". On 3×256×256, Caffe's ceil-mode pooling gives pool5 7×7 and 74,596,712
parameters (298.4 MB, 3.3 % above the paper); on Caffe's usual 227×227 crops pool5 is 6×6 and the
net has 60,965,224 (fc8 is 6.7 % of them, TernGrad §4.2's figure). Which exact variant gave 72 M
is not stated; the fc6 input follows ``input_shape``. ``groups=1`` drops Caffe's two-GPU grouping.

Dropout (Rudra: 50 % on fc6 and fc7) is left out: it is parameter-free and random, which the
harness' vmap-over-snapshots gradient path does not support.

``batchnorm=True`` is TernGrad's variant ("Batch Normalization on convolutional layers", §4.2):
BN after every convolution, whose bias it replaces (so 5 × C fewer biases, 2 × C BN parameters).
BN's running statistics are buffers that the harness cannot update under vmap, so training with
it is refused by config validation (key ``model.batchnorm``); it serves parameter counts,
``schedule_only`` runs and the performance model.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from psbench.models.layers import AcrossChannelLRN, flat_features

#: (name, out channels, kernel, stride, padding, grouped in Caffe) per convolution.
CONVS = (
    ("conv1", 96, 11, 4, 0, False),
    ("conv2", 256, 5, 1, 2, True),
    ("conv3", 384, 3, 1, 1, False),
    ("conv4", 384, 3, 1, 1, True),
    ("conv5", 256, 3, 1, 1, True),
)
#: convolutions followed by LRN (norm) and/or max pooling (pool).
_NORM = {"conv1", "conv2"}
_POOL = {"conv1", "conv2", "conv5"}


class AlexNet(nn.Module):
    """Caffe's AlexNet without dropout; ``groups`` 2 (Caffe) or 1; optional BN on the convolutions."""

    def __init__(
        self, input_shape: tuple[int, ...], num_classes: int = 1000, batchnorm: bool = False, groups: int = 2
    ) -> None:
        super().__init__()
        layers: list[tuple[str, nn.Module]] = []
        c_in = input_shape[0]
        for name, c_out, k, s, p, grouped in CONVS:
            g = groups if grouped else 1
            layers.append((name, nn.Conv2d(c_in, c_out, k, stride=s, padding=p, groups=g, bias=not batchnorm)))
            if batchnorm:
                layers.append((f"bn{name[-1]}", nn.BatchNorm2d(c_out)))
            layers.append((f"relu{name[-1]}", nn.ReLU()))
            if name in _NORM:
                layers.append((f"norm{name[-1]}", AcrossChannelLRN(5, alpha=1e-4, beta=0.75, k=1.0)))
            if name in _POOL:
                layers.append((f"pool{name[-1]}", nn.MaxPool2d(3, stride=2, ceil_mode=True)))
            c_in = c_out
        self.features = nn.Sequential(OrderedDict(layers))
        self.classifier = nn.Sequential(
            OrderedDict(
                [
                    ("fc6", nn.Linear(flat_features(self.features, tuple(input_shape)), 4096)),
                    ("relu6", nn.ReLU()),
                    ("fc7", nn.Linear(4096, 4096)),
                    ("relu7", nn.ReLU()),
                    ("fc8", nn.Linear(4096, num_classes)),
                ]
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
