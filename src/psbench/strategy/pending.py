"""PS updates applied on the device and read back once per look-ahead flush (issue 38 item 2).

A host synchronisation (``float(loss)``, ``bool(finite)``) stops a GPU's host until every queued kernel has run;
one per PS update made asynchronous schedules run at one small step per update whatever the look-ahead batches.
So the strategy applies each update without reading anything back: its loss and the part of its divergence
check that must see the weights before the step (:func:`~psbench.optimizer.build.update_terms`) stay 0-d tensors
on the device, kept here with what the update needs to be applied again (its aggregate, its lr schedulers).
:meth:`Pending.read` finishes every kept check at once (:func:`~psbench.optimizer.build.finite_flags`) and reads
the losses and checks back in one device-to-host copy — before the look-ahead's next flush where :meth:`Pending.due`
says so, before an evaluation or a checkpoint, at an epoch's and the fit's end — and the strategy then logs and
counts those updates as if each had been checked before its step.

Hardsync's updates are a flush each: read back before every flush, a GPU's host waits for each update's kernels
before it launches the next update's, where a plain training loop runs ahead of the GPU. Where no code but
psbench's sees the weights between two read-backs (:attr:`Pending.defer`, set by the strategy: the psbench
command's Trainer, an optimizer step without hooks, no codec, no local learners), kept updates outlive a flush up
to :attr:`Pending.MAX_UPDATES` (or :attr:`Pending.MAX_BYTES` of aggregates, within the look-ahead's memory
budget); the gradients computed meanwhile on weights not yet checked are dropped with their updates if a rollback
comes, and a checkpoint due meanwhile reads them back first (:mod:`psbench.checkpoint`).

A divergence is rare and its handling may be slow: if the kept updates must end at position j (update j was not
finite, or update j − 1 tripped the loss rule of :mod:`psbench.ps.divergence`), :meth:`Pending.rollback` restores
the weights, BatchNorm's running statistics, the optimizer's state and hyperparameters and the lr schedulers as
they were before the first kept update (:class:`Saved`, copied into one preallocated set of device buffers when a
segment starts: fused copies on a GPU) and applies the updates before j again from their kept aggregates, with
the same float operations: the weights are those after update j − 1, bit for bit what checking every update on the
host as it was applied gave (``tests/test_updates_per_step.py``, ``tests/test_train.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from psbench.optimizer.build import finite_flags


@dataclass
class Applied:
    """One update applied but not read back yet."""

    batch: Any  #: its UpdateBatch (index, samples, time, staleness_mean, lr_scale)
    loss: torch.Tensor  #: 0-d, on the device
    terms: list[torch.Tensor]  #: 0-d, on the device: :func:`~psbench.optimizer.build.update_terms`
    grads: list[torch.Tensor]  #: the aggregate it applied, in the parameters' order (kept to apply it again)
    schedulers: list  #: the lr schedulers it stepped
    extra: dict[str, float] = field(default_factory=dict)  #: host metrics of its own (learners' accuracy)
    bn_stats: list | None = None  #: the BatchNorm statistics it folds in (psbench.strategy.batchnorm), if any
    pushed: int = 0  #: the bytes its learners pushed through a gradient codec (psbench.compression), if any
    gradless: frozenset[int] = frozenset()  #: positions of the weights no gradient reached (p.grad None at its step)


class Saved:
    """The PS state at a segment's start: weights, optimizer state and hyperparameters, lr schedulers; its device
    buffers are allocated once and refilled by ``torch._foreach_copy_`` (a new set only when the optimizer's state
    changes shape, e.g. at its first step)."""

    def __init__(self) -> None:
        self.params: list[torch.Tensor] = []
        self.state: list[tuple[int, str, torch.Tensor]] = []  # (parameter position, key, copy)
        self.plain: list[tuple[int, str, Any]] = []  # non-tensor state values
        self.groups: list[dict[str, Any]] = []
        self.schedulers: list[dict[str, Any]] = []

    def take(self, params: Sequence[torch.Tensor], opt: torch.optim.Optimizer, schedulers: Sequence) -> None:
        with torch.no_grad():
            _refill(self.params, list(params))
            live = [(j, k, v) for j, p in enumerate(params) for k, v in opt.state.get(p, {}).items()]
            tensors = [(j, k, v) for j, k, v in live if isinstance(v, torch.Tensor)]
            if [(j, k, v.shape, v.dtype, v.device) for j, k, v in tensors] != [
                (j, k, c.shape, c.dtype, c.device) for j, k, c in self.state
            ]:
                self.state = [(j, k, v.detach().clone()) for j, k, v in tensors]
            elif tensors:
                torch._foreach_copy_([c for _, _, c in self.state], [v for _, _, v in tensors])
            self.plain = [(j, k, v) for j, k, v in live if not isinstance(v, torch.Tensor)]
        self.groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        self.schedulers = [s.state_dict() for s in schedulers]

    def restore(self, params: Sequence[torch.Tensor], opt: torch.optim.Optimizer, schedulers: Sequence) -> None:
        with torch.no_grad():
            torch._foreach_copy_(list(params), self.params)
            for p in params:
                opt.state.pop(p, None)  # state made after the segment's start is dropped
            for j, k, c in self.state:
                opt.state[params[j]][k] = c.clone()
            for j, k, v in self.plain:
                opt.state[params[j]][k] = v
        for g, saved in zip(opt.param_groups, self.groups, strict=True):
            g.update(saved)
        for s, sd in zip(schedulers, self.schedulers, strict=True):
            s.load_state_dict(sd)


def _refill(copies: list[torch.Tensor], live: list[torch.Tensor]) -> None:
    same = len(copies) == len(live) and all(
        c.shape == v.shape and c.dtype == v.dtype and c.device == v.device and c.stride() == v.stride()
        for c, v in zip(copies, live, strict=True)
    )
    if same:
        torch._foreach_copy_(copies, live)
    else:
        copies[:] = [v.detach().clone() for v in live]


class Pending:
    """The updates applied since the last read-back, and the state before the first of them."""

    #: the most updates kept between two read-backs where they may outlive a flush (a rollback applies at most
    #: this many again) …
    MAX_UPDATES = 64
    #: … and the most bytes their aggregates may hold
    MAX_BYTES = 64 << 20

    def __init__(self) -> None:
        self.updates: list[Applied] = []
        self.saved = Saved()
        self._schedulers: list = []  # every lr scheduler stepped per update (restored on a rollback)
        #: may kept updates outlive a look-ahead flush (see the module docstring)? Set by the strategy.
        self.defer = False
        self._views = 0  # kept updates whose aggregate is a view into a larger tensor (a vmapped flush's)
        self.bytes = 0  #: bytes of the kept aggregates that are tensors of their own (in the look-ahead's budget)
        self._last = 0  # … of the last one

    def __len__(self) -> int:
        return len(self.updates)

    def begin(self, params: Sequence[torch.Tensor], opt: torch.optim.Optimizer, schedulers: Sequence) -> None:
        """Before an update is applied: a new segment saves the state it starts from."""
        if not self.updates:
            self._schedulers = list(schedulers)
            self.saved.take(params, opt, self._schedulers)

    def add(self, applied: Applied) -> None:
        self.updates.append(applied)
        first = applied.grads[0] if applied.grads else None
        if first is not None and first.untyped_storage().nbytes() > first.nbytes:
            self._views += 1  # a row of a vmapped flush's tensor (its gradients are views of one block each)
        else:
            self._last = sum(g.nbytes for g in applied.grads)
            self.bytes += self._last

    def due(self, room: int | None = None) -> bool:
        """Must the kept updates be read back before the look-ahead's next flush? Yes unless :attr:`defer`; and where
        one of them holds a view of a flush's vmapped tensor (kept past the flush it would keep that flush's whole
        tensor: async and λ-softsync, whose flushes hold many updates each), or they reach :attr:`MAX_UPDATES`, or
        another update's aggregate would pass :attr:`MAX_BYTES` or the ``room`` the memory budget leaves beside the
        flush (None: no budget)."""
        limit = self.MAX_BYTES if room is None else min(self.MAX_BYTES, room)
        return (
            not self.defer
            or bool(self._views)
            or len(self.updates) >= self.MAX_UPDATES
            or self.bytes + self._last > limit
        )

    def read(self) -> tuple[list[float], int | None]:
        """(the kept updates' losses, the position of the first that was not finite or None): one device-to-host
        read for all of them. The kept updates stay until :meth:`clear` or :meth:`rollback`."""
        if not self.updates:
            return [], None
        losses = torch.stack([a.loss for a in self.updates])
        oks = finite_flags(losses, [a.terms for a in self.updates])
        # the one read-back, in the losses' own float type: exact as Python floats, and MPS has no float64
        dtype = losses.dtype if losses.is_floating_point() else torch.float32
        values = torch.cat([losses.to(dtype), oks.to(dtype)]).tolist()
        n = len(self.updates)
        bad = next((j for j, ok in enumerate(values[n:]) if not ok), None)
        return values[:n], bad

    def clear(self) -> None:
        self.updates, self._views, self.bytes = [], 0, 0

    def rollback(
        self,
        bad: int,
        params: Sequence[torch.Tensor],
        opt: torch.optim.Optimizer,
        apply: Callable[[Applied], None],
    ) -> None:
        """Restore the segment's start and apply its updates before position ``bad`` again (``apply``)."""
        self.saved.restore(params, opt, self._schedulers)
        for a in self.updates[:bad]:
            apply(a)
        self.clear()
