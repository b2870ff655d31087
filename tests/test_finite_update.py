"""The PS's divergence check (psbench.optimizer.build.finite_update), which both engines call before every
update: NaN/inf in the loss, the weights or the aggregate stops the update, and the check changes no value."""

from __future__ import annotations

import math

import pytest
import torch

from psbench.optimizer.build import finite_flag, finite_flags, finite_update, update_terms


def _tensors():
    g = torch.Generator().manual_seed(0)
    shapes = [(32, 3, 5, 5), (32,), (10, 1024), (10,)]
    params = [torch.randn(s, generator=g) * 1e3 for s in shapes]
    grads = [torch.randn(s, generator=g) * 1e-3 for s in shapes]
    params[1][0] = -0.0  # signed zero and a subnormal: x·1 must leave them as they are
    grads[3][0] = 1e-42
    return params, grads


def test_a_finite_update_passes_and_no_value_changes():
    params, grads = _tensors()
    before = [t.clone() for t in params + grads]
    assert finite_update(0.5, params, grads)
    for a, b in zip(params + grads, before, strict=True):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))  # bit for bit, -0.0 and the subnormal too


@pytest.mark.parametrize("where", ["param", "grad"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_or_inf_anywhere_stops_the_update(where, bad):
    params, grads = _tensors()
    (params if where == "param" else grads)[2][7, 100] = bad
    assert not finite_update(0.5, params, grads)


@pytest.mark.parametrize("loss", [math.nan, math.inf, -math.inf])
def test_a_non_finite_loss_stops_the_update(loss):
    params, grads = _tensors()
    assert not finite_update(loss, params, grads)


@pytest.mark.parametrize(("loss", "ok"), [(math.nan, False), (math.inf, False), (-math.inf, False), (3e38, True)])
def test_the_device_flag_checks_the_loss_itself(loss, ok):
    """:func:`finite_flag` (the strategy's check, read back once per flush) on a loss tensor. ``finite_update``
    answers a non-finite float loss on the host before calling it, so only this reaches the loss in the flag."""
    params, grads = _tensors()
    flag = finite_flag(torch.tensor(loss), params, grads)
    assert flag.dtype == torch.bool and flag.dim() == 0 and bool(flag) is ok


def test_tensors_of_several_dtypes_are_all_checked():
    params, grads = _tensors()
    params.append(torch.ones(3, dtype=torch.float64))
    grads.append(torch.tensor([0.0, math.nan, 0.0], dtype=torch.float64))
    assert not finite_update(0.5, params, grads)
    grads[-1][1] = 1.0
    assert finite_update(0.5, params, grads)


def test_the_checks_of_many_updates_finished_at_once_flag_each_update_on_its_own():
    """The strategy keeps each update's :func:`update_terms` (taken before its step) and finishes the checks of a
    whole flush at its read-back: each flag is that update's alone, as :func:`finite_flag` gives it."""
    params, grads = _tensors()
    kept, losses = [], []
    for j in range(5):
        g = [t * (j + 1) for t in grads]
        if j == 1:
            g[0][0, 0, 0, 0] = math.nan
        if j == 3:
            g[2][0, 0] = 1e36  # finite, but θ·g past the float range
        kept.append(update_terms(params, g))
        losses.append(torch.tensor(math.inf if j == 4 else 0.5))
    flags = finite_flags(torch.stack(losses), kept)
    assert flags.tolist() == [True, False, True, False, False]
    for j, terms in enumerate(kept):
        assert bool(finite_flags(losses[j].reshape(1), [terms])[0]) is flags.tolist()[j]
    assert finite_flags(torch.tensor([0.5, math.nan]), [[], []]).tolist() == [True, False]  # no weights: the loss
