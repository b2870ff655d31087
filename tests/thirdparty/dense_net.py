"""lightning-hydra-template's ``SimpleDenseNet`` (``src/models/components/simple_dense_net.py``, MIT), as written
there: three Linear → BatchNorm1d → ReLU blocks and a Linear head, arguments ``input_size``, ``lin*_size``,
``output_size`` (the template's MNIST defaults)."""

from __future__ import annotations

import torch
from torch import nn


class SimpleDenseNet(nn.Module):
    def __init__(
        self,
        input_size: int = 784,
        lin1_size: int = 256,
        lin2_size: int = 256,
        lin3_size: int = 256,
        output_size: int = 10,
    ) -> None:
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(input_size, lin1_size),
            nn.BatchNorm1d(lin1_size),
            nn.ReLU(),
            nn.Linear(lin1_size, lin2_size),
            nn.BatchNorm1d(lin2_size),
            nn.ReLU(),
            nn.Linear(lin2_size, lin3_size),
            nn.BatchNorm1d(lin3_size),
            nn.ReLU(),
            nn.Linear(lin3_size, output_size),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, _channels, _width, _height = x.size()
        x = x.view(batch_size, -1)  # (batch, 1, width, height) -> (batch, 1*width*height)
        return self.model(x)
