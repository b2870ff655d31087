"""H local optimizer steps of k learners at once — the one implementation both executors run.

:class:`LearnerOptimizer` is torch's SGD (momentum, Nesterov) / AdaGrad / Adam as functions of tensors
stacked over learners [k, ...]; :func:`local_window` takes H of its steps on each learner's own model
(``torch.func.vmap(grad(functional_call))`` over the learner dimension). The simulator's Lightning path
(:mod:`psbench.strategy.local_steps`) calls it with k ≈ λ windows at once; an ``engine=dist`` learner
process with k = 1. Imports only torch, so learner processes start without Lightning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import torch
from torch.func import functional_call, grad, vmap

from psbench.errors import require

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Params = dict[str, torch.Tensor]


class LearnerOptimizer:
    """torch's SGD (momentum, Nesterov), AdaGrad and Adam as functions of stacked tensors [k, ...].

    :meth:`direction` returns d with θ_next = θ − η·d — the same arithmetic as ``torch.optim``
    up to the association of the final scaling (exact for SGD). Buffers start at zero, which
    reproduces torch's first step (momentum buffer = gradient).
    """

    BUFFERS: ClassVar[dict[str, tuple[str, ...]]] = {
        "sgd": ("momentum",),
        "adagrad": ("sum",),
        "adam": ("exp_avg", "exp_avg_sq"),
    }

    def __init__(self, cfg: Mapping) -> None:
        self.name = str(cfg.get("name", "sgd"))
        require(self.name in self.BUFFERS, "optimizer.name", self.name, f"one of {list(self.BUFFERS)}")
        self.wd = float(cfg.get("weight_decay", 0.0))
        self.momentum = float(cfg.get("momentum", 0.0)) if self.name == "sgd" else 0.0
        self.nesterov = bool(cfg.get("nesterov", False))
        self.betas = tuple(float(b) for b in cfg.get("betas", (0.9, 0.999)))
        self.eps = float(cfg.get("eps", 1e-8 if self.name == "adam" else 1e-10))

    def buffers(self) -> tuple[str, ...]:
        if self.name == "sgd" and self.momentum == 0:
            return ()
        return self.BUFFERS[self.name]

    def init_state(self, params: Params) -> dict[str, Params]:
        return {b: {k: torch.zeros_like(v) for k, v in params.items()} for b in self.buffers()}

    def direction(self, grads: Params, params: Params, state: dict[str, Params], step: torch.Tensor) -> Params:
        """Update ``state`` in place and return the directions; ``step`` [k] counts this step (1-based)."""
        out: Params = {}
        for k, g in grads.items():
            if self.wd:
                g = g.add(params[k], alpha=self.wd)
            if self.name == "sgd":
                if self.momentum:
                    buf = state["momentum"][k]
                    buf.mul_(self.momentum).add_(g)
                    g = g.add(buf, alpha=self.momentum) if self.nesterov else buf.clone()
                out[k] = g
            elif self.name == "adagrad":
                s = state["sum"][k]
                s.addcmul_(g, g, value=1.0)
                out[k] = g / (s.sqrt() + self.eps)
            else:
                b1, b2 = self.betas
                m, v = state["exp_avg"][k], state["exp_avg_sq"][k]
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                shape = (-1,) + (1,) * (g.dim() - 1)
                bc1 = (1 - b1 ** step.to(g.dtype)).view(shape)
                bc2 = (1 - b2 ** step.to(g.dtype)).sqrt().view(shape)
                out[k] = (m / bc1) / (v.sqrt() / bc2 + self.eps)
        return out


def local_window(
    net: torch.nn.Module,
    loss: LossFn,
    opt: LearnerOptimizer,
    theta: Params,
    state: dict[str, Params],
    steps: torch.Tensor,
    xs: torch.Tensor,
    ys: torch.Tensor,
    lr: float,
    accumulate: bool = True,
) -> tuple[Params, Params, torch.Tensor, torch.Tensor]:
    """H = ``len(xs)`` steps θ ← θ − η·d_h of k learners on mini-batches ``xs[h]`` [k, μ, ...].

    ``state`` (optimizer buffers) is updated in place; ``steps`` [k] counts each learner's steps so far.
    Returns (θ after H steps, D = Σ_h d_h if ``accumulate`` else {}, per-learner sums of the per-sample
    losses, per-learner counts of correct predictions) — AGN Algorithm 1's inner loop.
    """
    k, mu = ys.shape[1], ys.shape[2]
    w = torch.full((k, mu), 1.0 / mu, dtype=xs.dtype)

    def f(p, x, y, wt):
        logits = functional_call(net, p, (x,))
        per = loss(logits, y)
        out = logits.detach()
        hits = (
            torch.zeros_like(per.detach(), dtype=torch.int64).sum()
            if y.is_floating_point()
            else (out.argmax(-1) == y).sum()
        )
        return (per * wt).sum(), (per.detach().sum(), hits)  # correct predictions: class labels only

    step_grad = vmap(grad(f, has_aux=True), randomness="different")  # each learner its own dropout masks
    acc: Params = {}
    seen = torch.zeros(k, dtype=xs.dtype)
    right = torch.zeros(k, dtype=torch.int64)
    for h in range(len(xs)):
        grads, (sums, hits) = step_grad(theta, xs[h], ys[h], w)
        right += hits
        d = opt.direction(grads, theta, state, steps + (h + 1))
        for n in theta:
            theta[n] = theta[n].add(d[n], alpha=-lr)
            if accumulate:
                acc[n] = acc[n] + d[n] if n in acc else d[n]
        seen = seen + sums
    return theta, acc, seen, right


def elastic_commit(theta: Params, center: Params, rho: float, lr: float) -> tuple[Params, Params]:
    """AEASGD at a pull of θ̃: G = −ρ(θ_l − θ̃) is committed and e = −η·G moves the learner: θ_l ← θ_l + η·G."""
    commit = {n: (theta[n] - center[n]).mul_(-rho) for n in theta}
    return {n: theta[n].add(commit[n], alpha=lr) for n in theta}, commit
