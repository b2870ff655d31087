"""The sigmoid MLPs of the SSP-DNN paper (§5, "Parameter Settings"; data shapes in Table 1).

* ``timit``: 360 MFCC inputs → 6 hidden layers of 2048 sigmoid units → 2001 classes; the paper says
  "about 24 million" parameters, the stated shape has 25,821,137 (weights and biases; 7.6 % more).
* ``imagenet63k``: 21504 LLC inputs → 5000 → 3000 → 2000 → 1000 classes; "about 132 million",
  the stated shape has 130,531,000 (1.1 % fewer).

The input and class counts come from the data (synthetic data of those shapes stands in for TIMIT
and ImageNet-63K, which are not available here); ``hidden`` and ``activation`` override the
variant's, so ci-scale members of the same family (e.g. 360 → 3 × 256 → 2001) are one config key
away. The output layer is linear: the loss applies the softmax.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from math import prod

import torch
from torch import nn

from psbench.models.options import SSP_ACTIVATIONS
from psbench.models.options import SSP_VARIANTS as VARIANTS  # variant → hidden layer sizes (SSP-DNN §5)

ACTIVATIONS: dict[str, type[nn.Module]] = dict(zip(SSP_ACTIVATIONS, (nn.Sigmoid, nn.Tanh, nn.ReLU), strict=True))


class SSPMLP(nn.Module):
    """``Linear → activation`` per hidden size, then a linear classifier; inputs are flattened."""

    def __init__(
        self,
        input_shape: tuple[int, ...],
        num_classes: int,
        hidden: Sequence[int] = VARIANTS["timit"],
        activation: str = "sigmoid",
    ) -> None:
        super().__init__()
        sizes = [prod(input_shape), *(int(h) for h in hidden)]
        layers: list[nn.Module] = []
        for d_in, d_out in pairwise(sizes):
            layers += [nn.Linear(d_in, d_out), ACTIVATIONS[activation]()]
        layers.append(nn.Linear(sizes[-1], num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.flatten(x, 1))
