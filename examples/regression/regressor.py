"""A user's own regression: Friedman's #1 problem (y = 10 sin(π x1 x2) + 20 (x3 − ½)² + 10 x4 + 5 x5 + noise, with
five more inputs that do not matter) and an MLP with one output, trained on the mean squared error.

``conf/dataset/friedman1.yaml`` names :func:`friedman1` (float targets: psbench sees a regression, reports
``test_loss`` and no ``test_error``); ``conf/model/mlp_regressor.yaml`` names :class:`MLPRegressor` with
``loss: mse``. psbench passes ``input_shape``, ``output_size`` and ``seed`` where the signatures name them.
"""

from __future__ import annotations

import itertools
import math

import torch
from sklearn.datasets import make_friedman1
from torch import nn
from torch.utils.data import TensorDataset


def friedman1(
    num_train: int = 2000, num_test: int = 500, noise: float = 1.0, seed: int = 0
) -> tuple[TensorDataset, TensorDataset]:
    x, y = make_friedman1(num_train + num_test, n_features=10, noise=noise, random_state=seed)
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    y = (y - y[:num_train].mean()) / y[:num_train].std()  # standardized on the training set
    return TensorDataset(x[:num_train], y[:num_train]), TensorDataset(x[num_train:], y[num_train:])


class MLPRegressor(nn.Module):
    def __init__(self, input_shape: tuple[int, ...], output_size: int, hidden: tuple[int, ...] = (64, 64)) -> None:
        super().__init__()
        sizes = [math.prod(input_shape), *hidden]
        layers: list[nn.Module] = [nn.Flatten()]
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.Tanh()]
        layers.append(nn.Linear(sizes[-1], output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
