"""The PS update step, one owner for both engines (Rudra §3.1: θ_{i+1} = θ_i − α·g_i).

The simulator's strategy (:mod:`psbench.strategy.ps_strategy`) and the dist PS
(:mod:`psbench.distributed.ps_server`) call :func:`apply_update` with the aggregated gradient of update i, so
the same pushes in the same order give the same weights bit for bit in either engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

from psbench.optimizer.build import finite_update, scale_weight_decay


def apply_update(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    loss: float,
    optimizer: torch.optim.Optimizer,
    *,
    lr_scale: float = 1.0,
    clip: float | None = None,
    schedulers: Iterable = (),
    step: Callable[[], object] | None = None,
) -> bool:
    """Apply one PS update; False (nothing changed) when it is not finite (:func:`finite_update`: diverged).

    In order: the divergence check on the loss and Σ⟨θ, g⟩; this update's weight decay (``lr_scale``, the mean
    lr-policy weight of its gradients: :func:`scale_weight_decay`); p.grad = g; gradient clipping by the global
    norm ``clip`` (None or 0: none — Lightning's ``gradient_clip_val`` convention); the optimizer's step
    (``step``, e.g. Lightning's optimizer wrapper, which also counts the step; default ``optimizer.step``); the
    lr schedules' steps; p.grad = None.
    """
    if not finite_update(loss, params, grads):
        return False
    scale_weight_decay(optimizer, lr_scale)
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    if clip:
        torch.nn.utils.clip_grad_norm_(params, float(clip))
    (step or optimizer.step)()
    for s in schedulers:
        s.step()
    for p in params:
        p.grad = None
    return True
