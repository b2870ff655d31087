"""torchvision's ResNet (``torchvision/models/resnet.py``, BSD-3-Clause), the BasicBlock networks as torchvision writes
them: BatchNorm after every convolution (``norm_layer``), in-place ReLU, ``out += identity``, Kaiming init.

Vendored because torchvision has no CPU build that loads against this project's torch 2.13.0+cpu (the wheel on the
index bundles libcudart; its operators fail to register). With torchvision installed, ``torchvision.models.resnet18``
is the same network, parameter for parameter: ``resnet18(num_classes=10)`` has 11,181,642 parameters in both.
``width`` (64 in torchvision) makes small test networks of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


def conv3x3(c_in: int, c_out: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        norm_layer: Callable[..., nn.Module] = nn.BatchNorm2d,
    ) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(
        self,
        layers: list[int],
        num_classes: int = 1000,
        norm_layer: Callable[..., nn.Module] | None = None,
        width: int = 64,
    ) -> None:
        super().__init__()
        self._norm_layer = norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(2 * width, layers[1], stride=2)
        self.layer3 = self._make_layer(4 * width, layers[2], stride=2)
        self.layer4 = self._make_layer(8 * width, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, kernel_size=1, stride=stride, bias=False), norm_layer(planes)
            )
        layers = [BasicBlock(self.inplanes, planes, stride, downsample, norm_layer)]
        self.inplanes = planes
        layers += [BasicBlock(self.inplanes, planes, norm_layer=norm_layer) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(*, weights=None, progress: bool = True, **kwargs) -> ResNet:
    """torchvision's signature: ``weights`` must be None here (no downloads)."""
    assert weights is None, "no pretrained weights here"
    return ResNet([2, 2, 2, 2], **kwargs)


def resnet10_small(num_classes: int = 10, width: int = 8, **kwargs) -> ResNet:
    """A ResNet of one BasicBlock per stage and ``width`` 8: the tests' BatchNorm ResNet (~20k parameters)."""
    return ResNet([1, 1, 1, 1], num_classes=num_classes, width=width, **kwargs)
