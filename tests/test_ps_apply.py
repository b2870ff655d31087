"""One PS update step for both engines (psbench.ps.apply): the same pushes in the same order give the same weights.

The simulator's strategy and the dist PS both call :func:`apply_update`. A dist replay of a simulated schedule
(real learner processes over gloo) must end with the simulator's ``weights_sha256`` for every option of the
update step: clipping (``gradient_clip_val=0`` is no clipping in both — it used to zero every gradient on the
dist PS), weight decay, momentum, Adam, AdaGrad, step and polynomial lr schedules.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from psbench.ps.apply import apply_update, step_update

BASE = (
    "learners=3",
    "batch_size=8",
    "epochs=2",
    "trainer.max_updates=16",
    "trainer.num_threads=1",
    "logger=none",
    "trainer.progress=none",
    "lr_policy=dynsgd",
    "protocol=softsync",
    "protocol.n=3",
)


def _params_and_grads(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(5, 4, generator=g, requires_grad=True), torch.randn(4, generator=g, requires_grad=True)]
    grads = [torch.randn(5, 4, generator=g) * 10, torch.randn(4, generator=g) * 10]
    return params, grads


@pytest.mark.parametrize("clip", [0, 0.0])
def test_zero_clip_is_no_clip(clip):
    params, grads = _params_and_grads()
    ref, _ = _params_and_grads()
    assert apply_update(ref, grads, 1.0, torch.optim.SGD(ref, lr=0.1), clip=None)
    assert apply_update(params, grads, 1.0, torch.optim.SGD(params, lr=0.1), clip=clip)
    for p, r in zip(params, ref, strict=True):
        assert torch.equal(p.detach(), r.detach())  # bit for bit
        assert p.grad is None
    start, _ = _params_and_grads()
    for p, s0, g in zip(params, start, grads, strict=True):
        torch.testing.assert_close(p.detach(), (s0 - 0.1 * g).detach())  # a plain step: nothing was zeroed


def test_clip_scales_the_aggregate_to_the_global_norm_then_steps_and_schedules():
    params, grads = _params_and_grads()
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    want = [(p - 0.1 * g * (0.5 / (norm + 1e-6))).detach() for p, g in zip(params, grads, strict=True)]
    opt = torch.optim.SGD(params, lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5**step)
    assert apply_update(params, grads, 1.0, opt, clip=0.5, schedulers=[sched])
    for p, w in zip(params, want, strict=True):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-6)
    assert opt.param_groups[0]["lr"] == 0.05  # the schedule stepped once


@pytest.mark.parametrize("writes", ["clip", "nesterov"])
def test_an_update_applied_again_after_a_rollback_gives_the_same_weights(writes):
    """Clipping scales p.grad in place, and ``foreach`` Nesterov SGD adds the momentum into it; the update's aggregate
    (kept to apply it again after a rollback, strategy/pending.py) stays as given, so the replay from the restored
    state gives the same weights bit for bit."""
    params, grads = _params_and_grads()
    before = [g.clone() for g in grads]
    start = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=writes == "nesterov", foreach=True)
    clip = 0.5 if writes == "clip" else None
    saved = copy.deepcopy(opt.state_dict())
    step_update(params, grads, opt, clip=clip)
    first = [p.detach().clone() for p in params]
    assert all(torch.equal(g, b) for g, b in zip(grads, before, strict=True))
    with torch.no_grad():
        for p, s0 in zip(params, start, strict=True):
            p.copy_(s0)
    opt.load_state_dict(saved)
    step_update(params, grads, opt, clip=clip)
    assert all(torch.equal(p.detach(), f) for p, f in zip(params, first, strict=True))


def test_a_non_finite_update_changes_nothing():
    params, grads = _params_and_grads()
    grads[1][0] = float("nan")
    before = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    assert not apply_update(params, grads, 1.0, opt)
    assert all(torch.equal(p.detach(), b) for p, b in zip(params, before, strict=True))
    assert not opt.state  # no momentum buffer was made


def test_a_gradless_weight_has_no_grad_at_the_step_so_the_optimizer_skips_it():
    """``gradless`` positions (weights no gradient reached, their aggregate 0) have p.grad None during the step, as
    autograd leaves an unused weight: AdamW neither decays them nor keeps moments for them, as a torch step would."""
    params, grads = _params_and_grads()
    grads[1] = torch.zeros_like(grads[1])
    ref = [p.detach().clone().requires_grad_() for p in params]
    ref[0].grad = grads[0].clone()
    want = torch.optim.AdamW(ref, lr=0.05, weight_decay=1.0)
    want.step()
    opt = torch.optim.AdamW(params, lr=0.05, weight_decay=1.0)
    before = params[1].detach().clone()
    step_update(params, grads, opt, gradless={1})
    assert torch.equal(params[0].detach(), ref[0].detach())
    assert torch.equal(params[1].detach(), before) and params[1] not in opt.state
    assert all(p.grad is None for p in params)


def _laid_out(device: str):
    """A channels_last conv weight and a bias, and gradients laid out otherwise (a vmapped row is contiguous)."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, 5, 5, generator=g).to(device, memory_format=torch.channels_last)
    params = [w.requires_grad_(), torch.randn(8, generator=g).to(device).requires_grad_()]
    grads = [torch.randn(8, 3, 5, 5, generator=g).to(device), torch.randn(16, generator=g).to(device)[::2]]
    assert all(p.stride() != q.stride() for p, q in zip(params, grads, strict=True))
    return params, grads


def test_the_step_sees_each_gradient_in_its_weights_layout():
    """p.grad has p's strides, as autograd gives them (CUDA's fused SGD and Adam refuse others), the same values, and
    the aggregate itself is left as it was."""
    params, grads = _laid_out("cpu")
    before = [g.clone() for g in grads]
    seen = []
    opt = torch.optim.SGD(params, lr=0.1)
    want = [(p - 0.1 * g).detach() for p, g in zip(params, grads, strict=True)]

    def step():
        seen.extend((p.grad.stride() == p.stride(), torch.equal(p.grad, g)) for p, g in zip(params, grads, strict=True))
        opt.step()

    step_update(params, grads, opt, step=step)
    assert seen == [(True, True)] * 2
    for p, w in zip(params, want, strict=True):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-6)
    assert all(torch.equal(g, b) and g.stride() != p.stride() for g, b, p in zip(grads, before, params, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: no fused CUDA step to run")
@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_cuda_fused_steps_take_gradients_laid_out_otherwise_than_their_weights(name):
    from psbench.optimizer.build import build_optimizer

    params, grads = _laid_out("cuda")
    opt = build_optimizer(params, {"name": name, "lr": 0.1, "momentum": 0.9})
    assert opt.param_groups[0]["fused"] is True
    for _ in range(2):  # Adam's first step makes its state in the weights' layout; the second reads it
        step_update(params, grads, opt)
    assert all(torch.isfinite(p).all() for p in params)


def test_lr_scale_scales_this_updates_weight_decay_only():
    params, grads = _params_and_grads()
    opt = torch.optim.SGD(params, lr=0.1, weight_decay=0.01)
    want = [(p - 0.1 * (g + 0.005 * p)).detach() for p, g in zip(params, grads, strict=True)]
    assert apply_update(params, grads, 1.0, opt, lr_scale=0.5)
    for p, w in zip(params, want, strict=True):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-6)


UPDATE_OPTIONS = {
    "clip_zero": ("trainer.gradient_clip_val=0",),
    "clip_momentum_decay_steps": (
        "trainer.gradient_clip_val=0.05",
        "optimizer.momentum=0.9",
        "optimizer.weight_decay=0.01",
        "optimizer.milestones=[1]",
    ),
    "adam_decay_poly": (
        "optimizer=adam",
        "optimizer.lr=0.01",
        "optimizer.weight_decay=0.001",
        "optimizer.poly_power=0.5",
    ),
    "adagrad_clip": ("optimizer=adagrad", "optimizer.lr=0.05", "trainer.gradient_clip_val=1.0"),
}


@pytest.mark.parametrize(
    "case", ["clip_zero", *(pytest.param(c, marks=pytest.mark.slow) for c in UPDATE_OPTIONS if c != "clip_zero")]
)
def test_a_dist_replay_reaches_the_simulators_weights_for_every_update_option(compose_cfg, run_psbench, tmp_path, case):
    from psbench.train import train

    args = (*BASE, *UPDATE_OPTIONS[case])
    (tmp_path / "run").mkdir()
    sim = train(compose_cfg(*args), tmp_path / "run")
    root = tmp_path / "d"
    root.mkdir()
    out = root / "run"
    r = run_psbench("engine=dist", "engine.mode=replay", f"hydra.run.dir={out}", *args, root=root, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    dist = json.loads((out / "summary.json").read_text())
    assert dist["schedule_sha256"] == sim["schedule_sha256"]
    assert dist["pushes_applied"] == sim["gradients"] and dist["updates_done"] == sim["updates_done"] == 16
    assert dist["weights_sha256"] == sim["weights_sha256"]
    if case == "clip_zero":  # the run learned: a zero clip is no clip, not zeroed gradients (chance is 0.9)
        assert dist["test_error"] < 0.8
