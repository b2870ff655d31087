"""The PS optimizer and its lr schedule, built in one place for both engines (torch only).

The simulator's Lightning module and the dist PS both call :func:`configure`: the ``optimizer``
config group (SGD with momentum, AdaGrad, Adam; lr = α0) and the per-update lr factor of its step
or polynomial decay. :func:`server_optimizer` is the PS side of a local-step protocol.
:func:`param_groups` gives a network's per-parameter lr and decay multipliers (Caffe's ``lr_mult`` /
``decay_mult``, e.g. ``cifar10_full``'s) to the optimizer as param groups; without multipliers it is the
plain parameter list, so such runs are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from psbench.errors import require
from psbench.optimizer.options import OPTIMIZERS


def param_groups(net: torch.nn.Module) -> list:
    """``net``'s parameters, grouped by their (lr_mult, decay_mult) when ``net.param_mult`` names any.

    ``param_mult`` maps parameter names (``named_parameters``) to (lr_mult, decay_mult), Caffe's
    per-blob ``param { lr_mult decay_mult }``; unnamed parameters are (1, 1). Without it the result is
    the plain parameter list (one group, as before multipliers existed). Groups come in the order of
    their first parameter, so the first parameter's group leads (its lr is the one reported as "the" lr).
    """
    mult = getattr(net, "param_mult", None) or {}
    names = {n for n, _ in net.named_parameters()}
    unknown = sorted(set(mult) - names)
    require(not unknown, "model.multipliers", unknown, f"names of the model's parameters ({sorted(names)})")
    if not mult:
        return list(net.parameters())
    groups: dict[tuple[float, float], list[torch.nn.Parameter]] = {}
    for n, p in net.named_parameters():
        lr_mult, decay_mult = mult.get(n, (1.0, 1.0))
        groups.setdefault((float(lr_mult), float(decay_mult)), []).append(p)
    return [{"params": ps, "lr_mult": lm, "decay_mult": dm} for (lm, dm), ps in groups.items()]


#: devices whose SGD and Adam steps run ``fused``: one kernel per param group and step where ``foreach`` launches
#: three or four multi-tensor kernels (issue 38: a PS update's kernel launches bound the GPU's speed). Not the CPU:
#: there the fused step's floats differ from the per-parameter loop's in the last bit, and the CPU keeps its weights
FUSED_DEVICES = ("cuda",)


def _fused(params: list) -> bool:
    """Do all of ``params`` (tensors, or param groups) live on a :data:`FUSED_DEVICES` device, in floating point?"""
    tensors = [t for p in params for t in (p["params"] if isinstance(p, dict) else [p])]
    return bool(tensors) and all(t.device.type in FUSED_DEVICES and t.is_floating_point() for t in tensors)


def build_optimizer(params, cfg: Mapping) -> torch.optim.Optimizer:
    """SGD with momentum, AdaGrad or Adam from an ``optimizer`` config group (lr = α0).

    ``params``: parameters, or param groups with ``lr_mult`` / ``decay_mult`` (:func:`param_groups`):
    such a group gets lr = α0·lr_mult and weight_decay = weight_decay·decay_mult (Caffe's rule).
    """
    name = cfg.get("name", "sgd")
    require(name in OPTIMIZERS, "optimizer.name", name, f"one of {list(OPTIMIZERS)}")
    lr, wd = float(cfg.get("lr", 0.1)), float(cfg.get("weight_decay", 0.0))
    require(lr > 0, "optimizer.lr", lr, "> 0")
    params = list(params)
    fused = _fused(params)  # Lightning moves the module to its device before configure_optimizers
    if params and isinstance(params[0], dict):
        params = [
            {**g, "lr": lr * g.get("lr_mult", 1.0), "weight_decay": wd * g.get("decay_mult", 1.0)} for g in params
        ]
    if name == "sgd":
        m = float(cfg.get("momentum", 0.0))
        require(0 <= m < 1, "optimizer.momentum", m, "in [0, 1)")
        # foreach: on the CPU its ops run tensor by tensor, the same float operations as the per-parameter loop (the
        # same weights, bit for bit); on a GPU fused (FUSED_DEVICES)
        nesterov = bool(cfg.get("nesterov", False))
        return torch.optim.SGD(
            params, lr=lr, momentum=m, weight_decay=wd, nesterov=nesterov, foreach=None if fused else True, fused=fused
        )
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=wd)
    betas = tuple(cfg.get("betas", (0.9, 0.999)))
    return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=wd, fused=fused or None)


#: param-group keys that choose how a step runs, not what it computes: a resumed run keeps its own device's choice
STEP_IMPLEMENTATION = ("foreach", "fused", "capturable")


def load_optimizer_state(opt: torch.optim.Optimizer, state: Mapping[str, Any]) -> None:
    """``opt.load_state_dict(state)``, keeping ``opt``'s own :data:`STEP_IMPLEMENTATION` per group.

    torch takes every group key from the saved state, so a checkpoint written on a GPU (fused) would step fused on
    the CPU (other floats) and one written on the CPU would stay ``foreach`` on a GPU. Adam's saved ``step`` goes
    to the weights' device as float32 when this optimizer steps fused (or capturable), else stays where it was
    loaded (the CPU, for :func:`psbench.checkpoint.load`). A state with another number of groups is refused by
    torch's own check.
    """
    if len(state["param_groups"]) != len(opt.param_groups):
        return opt.load_state_dict(dict(state))  # torch's ValueError: a different number of parameter groups
    groups = [
        {**saved, **{k: g[k] for k in STEP_IMPLEMENTATION if k in g}}
        for saved, g in zip(state["param_groups"], opt.param_groups, strict=True)
    ]
    opt.load_state_dict({**state, "param_groups": groups})


def update_terms(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The part of an update's divergence check that must see its weights before its step: Σ|θ·g| of each tensor,
    as 0-d tensors on the weights' device (no host synchronisation, no value of ``params`` or ``grads`` changed).

    Two fused kernels on a GPU (``torch._foreach_mul``, ``torch._foreach_norm``); on the CPU, whose 1-norm is the
    slow part (264 of 330 µs for the 89,578 weights of the CIFAR CNN, one thread), |θ·g| in place and a sum per
    tensor: 0.55× the time. :func:`finite_flags` finishes the check, for many updates at once.
    """
    with torch.no_grad():
        products = torch._foreach_mul(list(params), list(grads))
        if products and products[0].device.type == "cpu":
            torch._foreach_abs_(products)
            return [t.sum() for t in products]
        return list(torch._foreach_norm(products, 1))


def finite_flags(losses: torch.Tensor, terms: Sequence[Sequence[torch.Tensor]]) -> torch.Tensor:
    """May the PS apply each of these updates? A bool tensor, one per update (``losses[j]`` and ``terms[j]``, its
    :func:`update_terms`), on their device: a handful of kernels for any number of updates.

    True when loss + Σ|θ·g| is finite: NaN or ±inf anywhere in the loss, the weights or the aggregate — or a
    product θ·g past the float range, where the surrogate Σ⟨θ, g⟩ (whose gradient is g) would overflow — makes it
    False (so would a finite loss and sum whose own sum passes the float range, ~3.4e38 in float32). The check is
    t − t = 0, false for ±inf and NaN: two ops where ``torch.isfinite`` dispatches four.
    """
    with torch.no_grad():
        total, width = losses, len(terms[0]) if len(terms) else 0
        if width:  # every update's terms in one stack: a row each
            total = total + torch.stack([t for ts in terms for t in ts]).view(len(terms), width).sum(1)
        return (total - total) == 0


def finite_flag(loss: torch.Tensor, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """May the PS apply this update, as a 0-d bool tensor on the weights' device (:func:`finite_flags` of one)?"""
    return finite_flags(loss.reshape(1), [update_terms(params, grads)])[0]


def finite_update(loss: float, params: Iterable[torch.Tensor], grads: Iterable[torch.Tensor]) -> bool:
    """:func:`finite_flag` read back to the host now (the dist PS's check, once per update). False: diverged."""
    params, grads = list(params), list(grads)
    if not math.isfinite(loss) or not params:
        return math.isfinite(loss)
    return bool(finite_flag(torch.tensor(0.0, dtype=torch.float64, device=params[0].device), params, grads))


def scale_weight_decay(opt: torch.optim.Optimizer, factor: float) -> None:
    """Set this update's weight decay: each group's configured decay × ``factor``.

    ``factor`` is the mean lr-policy scale w of the update's gradients (1 for ``constant``). A policy
    sets the step size α = α0·w (Rudra Eq 6: α0/⟨σ⟩, Zhang Eq 3: α0/τ); in Caffe's solver, which
    ``cifar10_full`` is trained with, the step size multiplies the regularized gradient g + wd·θ, so
    the decay scales with it — else an n-softsync run, with n× the PS updates of hardsync per epoch,
    would decay n× harder per epoch. A no-op for groups without decay (bit-identical runs). The configured decay is
    the group's ``weight_decay`` at the first update, or as a user's code set it since the last update (a callback
    that schedules the decay through ``param_groups``): ``decay_set`` remembers what this function set.
    """
    for g in opt.param_groups:
        if "decay_base" not in g or g.get("decay_set", g["weight_decay"]) != g["weight_decay"]:
            g["decay_base"] = g["weight_decay"]
        if g["decay_base"]:
            g["weight_decay"] = g["decay_base"] * factor
        g["decay_set"] = g["weight_decay"]


def step_decay(milestones: Sequence[float], gamma: float, updates_per_epoch: float):
    """lr factor after ``step`` updates: γ^(number of milestone epochs passed) — Rudra §4.2 (÷10 at 120, 130)."""
    bounds = sorted(m * updates_per_epoch for m in milestones)
    return lambda step: gamma ** sum(step >= b for b in bounds)


def poly_decay(power: float, total_updates: float):
    """lr factor after ``step`` updates: (1 − step/T)^p, zero from T on — TernGrad §4 (p = 0.5, "to zero")."""
    return lambda step: max(0.0, 1.0 - step / total_updates) ** power


def lr_schedule(cfg: Mapping, updates_per_epoch: float):
    """The lr factor per update of an ``optimizer`` config, or None for a constant α0.

    ``milestones``/``gamma``: step decay (:func:`step_decay`); ``poly_power`` (null = off) with
    ``poly_epochs`` (where the lr reaches zero; the presets set it to ``epochs``): polynomial decay
    (:func:`poly_decay`). Both together multiply.
    """
    factors = []
    milestones = list(cfg.get("milestones") or [])
    if milestones:
        factors.append(step_decay(milestones, float(cfg.get("gamma", 0.1)), updates_per_epoch))
    power = cfg.get("poly_power")
    if power is not None:
        require(_positive(power), "optimizer.poly_power", power, "null (no polynomial decay) or a number > 0")
        epochs = cfg.get("poly_epochs")
        require(
            _positive(epochs),
            "optimizer.poly_epochs",
            epochs,
            "a number of epochs > 0 (where the polynomial decay reaches zero)",
        )
        assert epochs is not None
        factors.append(poly_decay(float(power), float(epochs) * updates_per_epoch))
    if not factors:
        return None
    if len(factors) == 1:
        return factors[0]
    return lambda step: math.prod(f(step) for f in factors)


def _positive(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def server_optimizer(learner_cfg: Mapping) -> dict[str, Any]:
    """The PS optimizer of a local-step protocol: SGD at the learners' η, no momentum (θ̃ ← θ̃ + Δ, AGN Eq 2).

    ``milestones``/``gamma`` and the polynomial decay are kept, so an lr schedule scales the server and (through
    :meth:`LocalLearners.update_direction`, which reads the current lr) the learners alike.
    """
    cfg = dict(learner_cfg)
    return {
        "name": "sgd",
        "lr": float(cfg.get("lr", 0.1)),
        "momentum": 0.0,
        "weight_decay": 0.0,
        "milestones": list(cfg.get("milestones") or []),
        "gamma": float(cfg.get("gamma", 0.1)),
        "poly_power": cfg.get("poly_power"),
        "poly_epochs": cfg.get("poly_epochs"),
    }


def configure(
    params: Iterable[torch.nn.Parameter], cfg: Mapping, updates_per_epoch: float
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR | None]:
    """(optimizer, per-update lr scheduler or None) of an ``optimizer`` config."""
    opt = build_optimizer(params, cfg)
    factor = lr_schedule(cfg, updates_per_epoch)
    return opt, None if factor is None else torch.optim.lr_scheduler.LambdaLR(opt, factor)
