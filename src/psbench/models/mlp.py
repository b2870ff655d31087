"""Fully connected ReLU network on flattened inputs (no dropout, no normalisation)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from math import prod

import torch
from torch import nn


class MLP(nn.Module):
    """``Linear → ReLU`` per hidden size, then a linear classifier; inputs are flattened."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: Sequence[int] = (128,)) -> None:
        super().__init__()
        sizes = [prod(input_shape), *(int(h) for h in hidden)]
        layers: list[nn.Module] = []
        for d_in, d_out in pairwise(sizes):
            layers += [nn.Linear(d_in, d_out), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.flatten(x, 1))
