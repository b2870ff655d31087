"""A user's own network: ResNet-20 for 32×32 images (He et al. 2016, §4.2), built by psbench from
``conf/model/resnet20.yaml`` (``_target_: resnet20.ResNet20``).

Three stages of three basic blocks (16, 32, 64 channels; 6·3 + 2 = 20 weighted layers), identity shortcuts with
zero-padded channels where the stage widens ("option A"), global average pooling, one linear layer. One change from
the paper: GroupNorm instead of BatchNorm. psbench takes each learner's gradient on the weight snapshot it read,
functionally, where BatchNorm cannot keep running statistics; psbench refuses a BatchNorm network unless
``schedule_only=true``.

psbench passes ``input_shape`` and ``num_classes`` because the signature names them; ``groups`` comes from the yaml.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.stride, self.pad = stride, c_out - c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        short = x[:, :, :: self.stride, :: self.stride] if self.stride > 1 else x
        if self.pad:  # option A: the new channels of the shortcut are zeros
            short = F.pad(short, (0, 0, 0, 0, 0, self.pad))
        return F.relu(out + short)


class ResNet20(nn.Module):
    def __init__(
        self, input_shape: tuple[int, ...] = (3, 32, 32), num_classes: int = 10, groups: int = 4, blocks: int = 3
    ) -> None:
        super().__init__()
        self.stem = nn.Conv2d(input_shape[0], 16, 3, padding=1, bias=False)
        self.norm = nn.GroupNorm(groups, 16)
        layers, c = [], 16
        for width, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(blocks):
                layers.append(BasicBlock(c, width, stride if b == 0 else 1, groups))
                c = width
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(F.relu(self.norm(self.stem(x))))
        return self.fc(x.mean(dim=(2, 3)))
