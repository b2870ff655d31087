"""The MNIST network of the AGN experiments (Hermans et al. §4).

The paper names no architecture ("all optimizers the same model with identical parameterization
of the weights"); its experiments ran in dist-keras (footnote 3), whose MNIST example
(``examples/mnist.py``, trained there with ADAG, AGN's name in that package) is the Keras MNIST
convnet: conv 32@3×3 valid → ReLU → conv 32@3×3 → ReLU → maxpool 2 → dense 225 → ReLU → dense
``num_classes`` (softmax in the loss). On 1×28×28: 28 → 26 → 24 → 12, 12·12·32 = 4608 dense
inputs, 1,048,853 parameters. The paper states no count to check it against.
"""

from __future__ import annotations

import torch
from torch import nn

from psbench.models.layers import flat_features


class AGNNet(nn.Module):
    """dist-keras' MNIST convnet (AGN §4); no dropout, no BatchNorm (vmap-safe)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[0], 32, kernel_size=3),
            nn.ReLU(),
            nn.Conv2d(32, 32, kernel_size=3),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(flat_features(self.features, tuple(input_shape)), 225),
            nn.ReLU(),
            nn.Linear(225, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
