"""The PS update step, one owner for both engines (Rudra §3.1: θ_{i+1} = θ_i − α·g_i).

The simulator's strategy (:mod:`psbench.strategy.ps_strategy`) and the dist PS
(:mod:`psbench.distributed.ps_server`) apply the aggregated gradient of update i with :func:`step_update`, so the
same pushes in the same order give the same weights bit for bit in either engine. The dist PS checks each update
on the host first (:func:`apply_update`); the strategy checks on the device and reads the checks back once per
look-ahead flush (:mod:`psbench.strategy.pending`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

import torch

from psbench.optimizer.build import finite_update, scale_weight_decay


def step_update(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    optimizer: torch.optim.Optimizer,
    *,
    lr_scale: float = 1.0,
    step_scale: float | None = None,
    clip: float | None = None,
    schedulers: Iterable = (),
    step: Callable[[], object] | None = None,
    gradless: Collection[int] = (),
) -> None:
    """Apply one PS update, unchecked; no host synchronisation (every value stays where the tensors are).

    In order: this update's weight decay (``lr_scale``, the mean lr-policy weight of its gradients:
    :func:`scale_weight_decay`); p.grad = g; gradient clipping by the global norm ``clip`` (None or 0: none —
    Lightning's ``gradient_clip_val`` convention; with ``step``, inside the optimizer's step after its closure, where
    Lightning runs ``on_before_optimizer_step``); the optimizer's step (``step``, e.g. Lightning's optimizer
    wrapper, which also counts the step; default ``optimizer.step``) — at ``step_scale`` × each group's lr when
    ``step_scale`` is given (an adaptive optimizer's lr policy, :func:`psbench.lr.steps.scales_step`; the weight
    decay is then left to that lr); the lr schedules' steps; p.grad = None. p.grad has p's strides, as autograd
    gives them (a copy where g's differ, e.g. a vmapped row of a channels_last weight): CUDA's fused SGD and Adam
    refuse a gradient laid out otherwise than its weight. Where the step writes into p.grad (``clip`` scales it,
    ``foreach`` Nesterov SGD adds the momentum into it) p.grad is a copy, so that ``grads`` stay as given (an update
    applied again after a rollback applies the same aggregate).

    ``gradless``: the positions in ``params`` that no gradient of the update reached (a parameter the loss does not
    use, :meth:`psbench.strategy.user_steps.UserLookahead.gradless`): their p.grad is None during the step, as
    autograd leaves it, so that torch's optimizers skip them (no weight decay, no moment update); their ``grads``
    (zeros) are only checked.
    """
    scale_weight_decay(optimizer, lr_scale if step_scale is None else 1.0)
    writes = bool(clip) or any(g.get("nesterov") and not g.get("fused") for g in optimizer.param_groups)
    for j, (p, g) in enumerate(zip(params, grads, strict=True)):
        if j in gradless:
            p.grad = None
            continue
        if g.stride() != p.stride():
            g = torch.empty_like(p).copy_(g)
        elif writes:
            g = g.clone()
        p.grad = g
    restore = None
    if clip and step is None:
        torch.nn.utils.clip_grad_norm_(params, float(clip))
    elif clip:  # after the hooks of Lightning's step, as Lightning clips: on_before_optimizer_step sees g unclipped
        restore = _clip_in_step(optimizer, params, float(clip))
    try:
        if step_scale is None:
            (step or optimizer.step)()
        else:
            lrs = [group["lr"] for group in optimizer.param_groups]
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr * step_scale
            try:
                (step or optimizer.step)()
            finally:
                for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                    group["lr"] = lr
    finally:
        if restore is not None:
            restore()
    for s in schedulers:
        s.step()
    for p in params:
        p.grad = None


def _clip_in_step(optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], clip: float) -> Callable[[], None]:
    """``optimizer.step``, until the returned function restores it: its closure first (where Lightning's optimizer
    wrapper runs the ``on_before_optimizer_step`` hooks), then the clipping by the global norm ``clip``, then the step
    as it was (an lr scheduler's wrapper of it included)."""
    was = optimizer.__dict__.get("step")
    own = optimizer.step

    def step(closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        torch.nn.utils.clip_grad_norm_(params, clip)
        own()
        return loss

    def restore() -> None:
        if was is None:
            optimizer.__dict__.pop("step", None)
        else:
            optimizer.step = was  # type: ignore[method-assign]

    optimizer.step = step  # type: ignore[method-assign]
    return restore


def apply_update(
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    loss: float,
    optimizer: torch.optim.Optimizer,
    *,
    lr_scale: float = 1.0,
    step_scale: float | None = None,
    clip: float | None = None,
    schedulers: Iterable = (),
    step: Callable[[], object] | None = None,
) -> bool:
    """Apply one PS update (:func:`step_update`) after checking it on the host; False (nothing changed) when it is
    not finite (:func:`~psbench.optimizer.build.finite_update`: diverged)."""
    if not finite_update(loss, params, grads):
        return False
    step_update(
        params,
        grads,
        optimizer,
        lr_scale=lr_scale,
        step_scale=step_scale,
        clip=clip,
        schedulers=schedulers,
        step=step,
    )
    return True
