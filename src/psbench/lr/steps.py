"""Where an lr policy acts: on the gradients (SGD) or on the optimizer's step (adaptive optimizers; issue 41 item 5).

A policy's weights w_l set the step size α = α0·w (Rudra Eq 6: α0/⟨σ⟩; Zhang Eq 3: α0/τ). With SGD, weighting
the gradients is that step: θ −= α0·Σ_l (w_l/c)·g_l (:mod:`psbench.lr.policies`). An adaptive optimizer divides
its step by a running scale of the gradients (Adam, AdamW, Adamax, NAdam, RAdam: √v̂; RMSprop: √v; Adagrad:
√Σg²; Adadelta: its ratio of running means), so a policy's weight on the gradients is (nearly) undone: Adam's
step is invariant to a constant gradient scale (Kingma & Ba 2015, §2.1). For those the policy's weights split in
two: their mean ⟨w⟩ scales the optimizer's lr for that update (α = α0·⟨w⟩, the step the policy asks for), and
the gradients keep only their relative weights w_l/⟨w⟩ (all 1 for the policies whose w is one per update:
``mean_staleness``, ``nominal_staleness``, ``sqrt_scaling``; Zhang's per-gradient α0/τ keeps its ratios between
the gradients of one update). Any other optimizer with a policy that is not ``constant`` is refused in one line:
what a gradient scale does to it is unknown here.
"""

from __future__ import annotations

import torch

from psbench.errors import require

#: torch's optimizers whose step a constant gradient scale leaves (nearly) unchanged: the policy scales their lr
ADAPTIVE: tuple[type[torch.optim.Optimizer], ...] = (
    torch.optim.Adam,
    torch.optim.AdamW,
    torch.optim.Adamax,
    torch.optim.NAdam,
    torch.optim.RAdam,
    torch.optim.RMSprop,
    torch.optim.Adagrad,
    torch.optim.Adadelta,
)


def scales_step(optimizer: torch.optim.Optimizer, policy: str) -> bool:
    """Does lr policy ``policy`` scale ``optimizer``'s lr per update (True) or weight the gradients (False)?
    A :class:`~psbench.errors.ConfigError` on ``lr_policy`` for an optimizer that is neither SGD nor adaptive."""
    if policy == "constant" or isinstance(optimizer, torch.optim.SGD):
        return False
    adaptive = ", ".join(c.__name__ for c in ADAPTIVE)
    require(
        isinstance(optimizer, ADAPTIVE),
        "lr_policy",
        policy,
        f"constant with {type(optimizer).__name__} (a policy weights SGD's gradients or scales the lr of {adaptive})",
    )
    return True


def relative(scales: list[float]) -> list[float]:
    """The gradients' share of a step-scaled policy: w_l/⟨w⟩ (exactly 1.0 where every w_l is equal)."""
    mean = sum(scales) / len(scales)
    return [v / mean for v in scales]
