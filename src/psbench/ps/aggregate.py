"""The aggregation rule of one PS update, shared by the Lightning strategy and the dist engine.

An update of ``c`` gradients applies g = Σ_l (w_l/c)·∇L_l(θ_{ts_l}) (Zhang Eq 2). To be bit-identical
across executors the float operations must happen in one order, fixed here:

* :func:`update_weights` — the float32 weights w_l/c of the learning-rate policy's scales;
* :func:`contribution_order` — gradients newest weights first (stable in ``ts``, then reversed),
  the order in which :class:`~psbench.strategy.UpdateBatches` groups them and ``_loop`` sums them;
* :func:`learner_gradient` — one learner's ∇(mean per-sample loss · w) on its snapshot;
* :func:`sum_in_order` — left-to-right sum of the gradients in that order.

This module imports only torch and numpy, so learner processes can use it without Lightning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.func import functional_call

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, y) -> per-sample loss


def update_weights(scales: Sequence[float], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """w_l / c for the c per-gradient scales of one update, as a tensor of ``dtype``."""
    c = len(scales)
    return torch.tensor([v / c for v in scales], dtype=dtype)


def contribution_order(ts: Sequence[int]) -> list[int]:
    """Indices of an update's gradients, newest weight timestamp first (ties: reversed arrival)."""
    return np.argsort(np.asarray(ts), kind="stable")[::-1].tolist()


def learner_gradient(
    net: torch.nn.Module,
    loss: LossFn,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    weight: torch.Tensor,
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """(∇ of mean(loss)·weight w.r.t. ``params`` in their order, detached per-sample losses)."""
    leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
    per = loss(functional_call(net, leaves, (x,)), y)
    return torch.autograd.grad(per.mean() * weight, list(leaves.values())), per.detach()


def sum_in_order(grads: Sequence[torch.Tensor], order: Sequence[int]) -> torch.Tensor:
    """Σ grads[j] for j in ``order``, added left to right (first term not copied)."""
    out = grads[order[0]]
    for j in order[1:]:
        out = out + grads[j]
    return out
