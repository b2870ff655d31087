"""The aggregated gradient of one PS update, Σ_l (w_l/c)·∇L_l(θ_{ts_l}) (Zhang Eq 2, Rudra Eqs 3–5).

Three ways to compute the same sum (a test holds them equal to float tolerance):

* ``grouped`` — learners that share a snapshot are one forward/backward on their
  concatenated samples (per-sample losses weighted by w_l/(c·s)); one backward for all groups;
* ``vmap`` — every gradient on its own snapshot with ``torch.func.vmap(grad(functional_call))``
  over stacked parameters (when many distinct snapshots make the groups tiny);
* ``loop`` — one learner at a time (the reference; the same float operations, in the same order, as
  the dist engine's learners and PS: :mod:`psbench.ps.aggregate`).

``auto`` picks ``grouped`` when an update reads at most ``vmap_threshold`` snapshots.

The strategy computes rows ahead of their updates with the same three ways
(:mod:`psbench.strategy.lookahead`); this per-update form is the reference the tests hold it to.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.func import functional_call, grad, vmap

from psbench.ps.aggregate import learner_gradient
from psbench.strategy.batches import UpdateBatch
from psbench.strategy.options import BATCHING

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (logits, y) -> per-sample loss


def update_gradient(net: torch.nn.Module, loss: LossFn, batch: UpdateBatch,
                    params_at: Callable[[int], dict[str, torch.Tensor]], mode: str = "auto",
                    vmap_threshold: int = 4) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Return (aggregated gradient per parameter name, mean per-sample loss of the update)."""
    if mode == "auto":
        mode = "grouped" if len(batch.groups) <= vmap_threshold else "vmap"
    if mode == "grouped":
        return _grouped(net, loss, batch, params_at)
    if mode == "vmap":
        return _vmapped(net, loss, batch, params_at)
    if mode == "loop":
        return _loop(net, loss, batch, params_at)
    raise ValueError(f"batching={mode!r}: allowed one of {BATCHING}")


def _per_sample_weights(g, samples: int) -> torch.Tensor:
    return g.weights.repeat_interleave(samples) / samples


def _grouped(net, loss, batch, params_at):
    total, leaves, names, seen, n = 0.0, [], None, 0.0, 0
    for g in batch.groups:
        params = {k: v.detach().requires_grad_() for k, v in params_at(g.ts).items()}
        names = list(params)
        per = loss(functional_call(net, params, (g.x,)), g.y)
        s = len(g.y) // len(g.learners)
        total = total + (per * _per_sample_weights(g, s)).sum()
        seen = seen + per.detach().sum()
        n += len(per)
        leaves.append(list(params.values()))
    flat = torch.autograd.grad(total, [p for ps in leaves for p in ps])
    k = len(names)
    out = {name: sum(flat[j * k + i] for j in range(len(leaves))) for i, name in enumerate(names)}
    return out, seen / n


def _vmapped(net, loss, batch, params_at):
    def f(params, x, y, w):
        per = loss(functional_call(net, params, (x,)), y)
        return (per * w).sum(), per.detach().sum()

    xs, ys, ws, snaps = [], [], [], []
    for g in batch.groups:
        s = len(g.y) // len(g.learners)
        p = params_at(g.ts)
        for j in range(len(g.learners)):
            xs.append(g.x[j * s:(j + 1) * s])
            ys.append(g.y[j * s:(j + 1) * s])
            ws.append(torch.full((s,), float(g.weights[j]) / s, dtype=g.x.dtype))
            snaps.append(p)
    stacked = {k: torch.stack([p[k].detach() for p in snaps]) for k in snaps[0]}
    grads, sums = vmap(grad(f, has_aux=True))(stacked, torch.stack(xs), torch.stack(ys), torch.stack(ws))
    mean = sums.sum() / sum(len(y) for y in ys)
    return {k: v.sum(0) for k, v in grads.items()}, mean


def _loop(net, loss, batch, params_at):
    out: dict[str, torch.Tensor] = {}
    seen, n = 0.0, 0
    for g in batch.groups:
        s = len(g.y) // len(g.learners)
        for j in range(len(g.learners)):
            params = params_at(g.ts)
            gr, per = learner_gradient(net, loss, params, g.x[j * s:(j + 1) * s], g.y[j * s:(j + 1) * s],
                                       g.weights[j])
            for k, v in zip(params, gr, strict=True):
                out[k] = out[k] + v if k in out else v
            seen = seen + per.detach().sum()
            n += len(per)
    return out, seen / n
