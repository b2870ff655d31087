"""Calibrate the compute model: time the real model's forward+backward at a few μ on this machine."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from psbench.cluster.cost import ComputeModel


def calibrate(
    net: torch.nn.Module,
    input_shape: Sequence[int],
    num_classes: int,
    batch_sizes: Sequence[int] = (1, 4, 16, 64),
    repeats: int = 5,
    loss=None,
    target_shape: Sequence[int] | None = None,
) -> ComputeModel:
    """Median seconds of forward+backward per μ, as a piecewise-linear :class:`ComputeModel`.

    ``loss``: the run's per-sample loss (:class:`psbench.models.loss.SampleLoss`; None: cross-entropy) on random
    labels < ``num_classes``, or on random float targets of ``target_shape`` per sample (regression).
    Every shape is warmed up first (oneDNN is several times slower on a new shape's first calls).
    """
    points = []
    for mu in sorted(set(batch_sizes)):
        x = torch.randn(mu, *input_shape)
        y = torch.randn(mu, *target_shape) if target_shape is not None else torch.randint(0, num_classes, (mu,))
        times = []
        for r in range(repeats + 2):
            t0 = time.perf_counter()
            net.zero_grad(set_to_none=True)
            (F.cross_entropy(net(x), y) if loss is None else loss.mean(net(x), y)).backward()
            if r >= 2:
                times.append(time.perf_counter() - t0)
        points.append((mu, sorted(times)[len(times) // 2]))
    net.zero_grad(set_to_none=True)
    return ComputeModel(points=tuple(points))
