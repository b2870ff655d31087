"""Caffe LeNet (``examples/mnist/lenet_train_test.prototxt``), trained on MNIST in TernGrad §4.1.

conv 20@5×5 → maxpool 2 → conv 50@5×5 → maxpool 2 → fc 500 → ReLU → fc ``num_classes``;
431,080 parameters on 1×28×28 (no nonlinearity after the convolutions, as in Caffe).
"""

from __future__ import annotations

import torch
from torch import nn

from psbench.models.layers import caffe_xavier_, flat_features


class LeNet(nn.Module):
    """Caffe LeNet; ``init="caffe"`` uses Caffe's xavier weights and zero biases."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int = 10, init: str = "torch") -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(input_shape[0], 20, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.Conv2d(20, 50, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(flat_features(self.features, input_shape), 500),
            nn.ReLU(),
            nn.Linear(500, num_classes),
        )
        if init == "caffe":
            for m in self.modules():
                if isinstance(m, nn.Conv2d | nn.Linear):
                    caffe_xavier_(m.weight)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
