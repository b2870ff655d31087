"""The CIFAR-10 CNN of Rudra §4.2, after Caffe's ``cifar10_full.prototxt``.

conv1 32@5×5 pad 2 → maxpool 3/2 → ReLU → [LRN] → conv2 32@5×5 pad 2 → ReLU → avgpool 3/2
→ [LRN] → conv3 64@5×5 pad 2 → ReLU → avgpool 3/2 → fc ``num_classes``. Caffe pools in ceil
mode (32→16→8→4), so on 3×32×32 the fc input is 64·4·4 and the net has 89,578 parameters
("~90 K … ~350 kB", Rudra §4.2). Any C×H×W input works: the first conv takes C channels
and the fc input size is computed from ``input_shape`` (e.g. 1×28×28 → 64·3·3).

``lrn`` (default False) inserts Caffe's two WITHIN_CHANNEL LRN layers (local_size 3,
alpha 5e-5, beta 0.75). They hold no parameters, so communication volume and the
parameter-server dynamics studied here are unchanged, while they cost a noticeable share
of CPU time; they are off unless asked for. ``init="caffe"`` draws the prototxt's gaussian
fillers (:data:`CAFFE_STD`, constant-zero biases) instead of torch's defaults, and
``multipliers="caffe"`` sets :attr:`CifarCNN.param_mult` to the prototxt's per-parameter
``lr_mult`` / ``decay_mult`` (:data:`CAFFE_MULT`), which :func:`psbench.optimizer.build.param_groups`
turns into optimizer groups. The conf preset ``model=cifar_cnn`` keeps all three off; the Rudra
and Zhang presets turn them on (the ``cifar10_full`` recipe).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from psbench.models.layers import WithinChannelLRN, flat_features

#: Caffe ``cifar10_full`` gaussian filler std per learnable layer (biases are zero).
CAFFE_STD = {"conv1": 1e-4, "conv2": 1e-2, "conv3": 1e-2, "fc": 1e-2}
#: Caffe ``cifar10_full_train_test.prototxt`` (lr_mult, decay_mult) per parameter: conv1/conv2 biases
#: ``lr_mult: 2``; conv3 has no ``param`` blocks (1, 1); ip1 weights ``decay_mult: 250``, its bias
#: ``lr_mult: 2, decay_mult: 0``. Unlisted parameters are (1, 1), Caffe's defaults.
CAFFE_MULT: dict[str, tuple[float, float]] = {
    "features.conv1.bias": (2.0, 1.0),
    "features.conv2.bias": (2.0, 1.0),
    "fc.weight": (1.0, 250.0),
    "fc.bias": (2.0, 0.0),
}


class CifarCNN(nn.Module):
    """Rudra §4.2 / Caffe ``cifar10_full`` CNN; no BatchNorm, no dropout, no in-place ops."""

    def __init__(
        self,
        input_shape: tuple[int, ...] = (3, 32, 32),
        num_classes: int = 10,
        lrn: bool = False,
        init: str = "torch",
        multipliers: str | None = None,
    ) -> None:
        super().__init__()
        self.lrn = bool(lrn)
        #: per-parameter (lr_mult, decay_mult) for the optimizer; empty = every parameter (1, 1)
        self.param_mult: dict[str, tuple[float, float]] = dict(CAFFE_MULT) if multipliers == "caffe" else {}
        layers: list[tuple[str, nn.Module]] = [
            ("conv1", nn.Conv2d(input_shape[0], 32, kernel_size=5, padding=2)),
            ("pool1", nn.MaxPool2d(3, stride=2, ceil_mode=True)),
            ("relu1", nn.ReLU()),
            ("norm1", WithinChannelLRN()),
            ("conv2", nn.Conv2d(32, 32, kernel_size=5, padding=2)),
            ("relu2", nn.ReLU()),
            ("pool2", nn.AvgPool2d(3, stride=2, ceil_mode=True)),
            ("norm2", WithinChannelLRN()),
            ("conv3", nn.Conv2d(32, 64, kernel_size=5, padding=2)),
            ("relu3", nn.ReLU()),
            ("pool3", nn.AvgPool2d(3, stride=2, ceil_mode=True)),
        ]
        if not self.lrn:
            layers = [(n, m) for n, m in layers if not n.startswith("norm")]
        self.features = nn.Sequential(OrderedDict(layers))
        self.fc = nn.Linear(flat_features(self.features, input_shape), num_classes)
        if init == "caffe":
            for key, std in CAFFE_STD.items():
                layer = self.fc if key == "fc" else getattr(self.features, key)
                nn.init.normal_(layer.weight, std=std)
                nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))
