"""Look-ahead execution: the gradients of upcoming updates computed together, before their updates.

Schedule row r reads the weights of timestamp ts_r and is applied at update u_r ≥ ts_r. At the boundary of
update i (master weights θ_i) every row with ts_r ≤ i can be computed: its snapshot exists. When update i
needs a row that is not computed yet, :class:`Lookahead` computes *every* uncomputed row with ts_r ≤ i of the
updates i, i+1, … in one batched call — for 30-softsync at λ = 30 that is ~λ rows of the next ~λ updates, each
on its own snapshot — keeps what each update needs, drops the snapshots nobody reads any more, and the
strategy applies the updates in order, as before. With ``epochs`` (a user's Trainer) it stops at the end of update
i's epoch: a row of the next epoch's updates is computed after that epoch's start hooks ran, whatever it reads.

Kept per pending update: the partial sum Σ_l (w_l/c)·∇L_l(θ_{ts_l}) of its computed rows; or, per row, the
row's gradient (``loop``, summed in :func:`~psbench.ps.aggregate.contribution_order` at the update — bit for
bit the per-update loop — and codecs, which compress each learner's gradient at its update).

An update's aggregate is Σ_l (w_l/c)·∇L_l(θ_{ts_l}) (Zhang Eq 2, Rudra Eqs 3–5). Rows are computed three ways that
tests hold equal to float tolerance (``loop`` is the reference: the dist engine's float operations, in the same
order, :mod:`psbench.ps.aggregate`): ``grouped`` — one forward/backward per (update, snapshot) with
per-sample losses weighted (in chunks of at most ``max_samples``); ``vmap`` — every row on its own snapshot,
vmapped over stacked snapshots; ``loop`` — one row at a time; ``auto`` — grouped when a batch has at most
``vmap_threshold`` (update, snapshot) pairs or the model has convolutions and runs on the CPU (vmap makes them grouped
convolutions, slower there than one small forward/backward per snapshot), else vmap.

Memory: snapshots + pending results + a batch's stacked snapshots and gradients stay within ``budget_bytes``:
the look-ahead takes rows in update order while their results fit (update i's always: :meth:`minimum_bytes` is
what that needs at worst, checked before training) and vmaps in chunks that fit. ``peak_bytes`` is the most
held at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from lightning_fabric.utilities.apply_func import move_data_to_device
from torch.func import functional_call, grad, vmap

from psbench.ps import Schedule
from psbench.ps.aggregate import contribution_order, learner_gradient
from psbench.ps.snapshots import SnapshotStore, nbytes
from psbench.strategy.batches import UpdateBatches
from psbench.strategy.batchnorm import BatchStats, Stats, has_batchnorm
from psbench.strategy.device import upload
from psbench.strategy.module import prefers_channels_last

#: most samples per grouped forward/backward of a conv net on the CPU: the CIFAR CNN's activations at 128
#: samples (16 MB after conv1) stay in cache; one thread, channels_last, measured 2,430 samples/s at 128,
#: 2,077 at 256, 1,978 at 512 and 1,353 at 1,024 (Rudra Fig 5's 4-softsync groups ~7 rows of μ = 128)
CPU_CONV_SAMPLES = 128
#: most samples of consecutive look-ahead units gathered at once (a larger unit is gathered alone, as it is computed)
GATHER_SAMPLES = 128
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Params = dict[str, torch.Tensor]


def minimum_bytes(schedule: Schedule, param_bytes: int, by_row: bool = False) -> int:
    """Bytes that executing ``schedule`` update by update needs at worst: the snapshots held at once, the
    update's results (``by_row``: each of its c gradients) and one row's working copies."""
    c_max = int(np.diff(schedule.offsets).max(initial=1))
    return (SnapshotStore.peak_count(schedule) + (c_max if by_row else 1) + 2) * param_bytes


def memory_budget(schedule: Schedule, param_bytes: int, by_row: bool, mb: float | None, key: str) -> int:
    """The look-ahead's budget in bytes, for both doors (``trainer.memory_budget_mb``, ``memory_budget_mb``):
    ``mb`` MiB, or (None) :data:`~psbench.strategy.options.DEFAULT_MEMORY_BUDGET_MB` grown to what update-by-update
    execution needs (:func:`minimum_bytes`), so the default never refuses; a configured budget below that need is
    refused up front, a :class:`~psbench.errors.ConfigError` naming ``key``."""
    from psbench.errors import require
    from psbench.strategy.options import DEFAULT_MEMORY_BUDGET_MB

    need = minimum_bytes(schedule, param_bytes, by_row)
    budget = int(float(mb if mb is not None else DEFAULT_MEMORY_BUDGET_MB) * 2**20)
    if mb is None:
        return max(budget, need)
    require(
        need <= budget,
        key,
        mb,
        f"at least {need / 2**20:.1f} MiB for this schedule: it holds up to {SnapshotStore.peak_count(schedule)} "
        f"weight snapshots of {param_bytes / 2**20:.2f} MiB at once (σ_max = {int(schedule.staleness.max(initial=0))})",
    )
    return budget


class Lookahead:
    """Per-update gradients of a schedule, computed ahead in batches (see the module docstring).

    Args:
        schedule: the run's schedule.
        data: the update batches (samples of a row, weights w_l/c of an update).
        net, loss: the model (called functionally on snapshots) and the per-sample loss.
        mode: ``auto`` | ``grouped`` | ``vmap`` | ``loop``.
        per_learner: keep each row's unweighted gradient (codecs) instead of weighted per-update sums.
        budget_bytes: bound on snapshots + pending results + a batch's working copies (None: unbounded).
        max_rows: most rows in one vmapped call.
        max_samples: most samples in one grouped forward/backward; a larger (update, snapshot) unit is computed
            in chunks of it and their gradients summed. ``"auto"``: :data:`CPU_CONV_SAMPLES` for conv nets on the
            CPU, else None (the whole unit at once).
        ahead: compute rows of at most this many updates after the current one (None: all that can be;
            0: update by update, the execution without look-ahead).
        epochs: the first update of each epoch, b_0 = 0 ≤ b_1 ≤ … ≤ b_E = U (a user's Trainer's epochs:
            :func:`~psbench.strategy.simulated.epoch_bounds`): no row of an update past the current one's epoch is
            computed ahead, so that every gradient of epoch e's updates sees what epoch e's ``on_train_epoch_start``
            hooks set (a layer in eval mode, a frozen weight), as in plain Lightning; None: one epoch.
    """

    def __init__(
        self,
        schedule: Schedule,
        data: UpdateBatches,
        net: torch.nn.Module,
        loss: LossFn,
        mode: str = "auto",
        vmap_threshold: int = 4,
        per_learner: bool = False,
        budget_bytes: int | None = None,
        max_rows: int = 64,
        ahead: int | None = None,
        max_samples: int | str | None = "auto",
        epochs: Sequence[int] | None = None,
    ) -> None:
        self.s, self.data, self.net, self.loss = schedule, data, net, loss
        self.epochs = None if epochs is None else np.asarray(epochs, dtype=np.int64)
        self.mode, self.vmap_threshold, self.per_learner = mode, vmap_threshold, per_learner
        self.by_row = per_learner or mode == "loop"  # results per row, else per update
        self.budget, self.max_rows = budget_bytes, max(1, max_rows)
        self.upd, self.ts = schedule.update_index, schedule.ts
        self.horizon = int(schedule.staleness.max(initial=0)) + 1  # rows with ts ≤ i lie in updates < i + horizon
        self.ahead = self.horizon if ahead is None else min(self.horizon, ahead + 1)
        self.computed = np.zeros(schedule.num_gradients, dtype=bool)
        self.results: dict[int, list] = {}  # update (or row) -> [grads, loss sum, samples]
        self.result_bytes = 0
        # results that are views of one flush's vmapped gradients (a row each): [bytes, results held]; its bytes
        # count until the last of them is popped
        self._blocks: dict[int, list[int]] = {}
        self.peak_bytes = 0
        self.batch_rows: list[int] = []  # rows computed by each batched call (a statistic; tests read it)
        self._wlist: dict[int, list[float]] = {}  # w_l/c of the updates in reach
        #: called before each flush computes, with the bytes its memory budget leaves beside what the flush plans to
        #: hold (None: no budget): the strategy reads back the updates applied so far where it must
        self.before_flush: Callable[[int | None], None] | None = None
        #: bytes of gradients held for this look-ahead's updates outside it (aggregates applied and kept for a
        #: read-back: :class:`~psbench.strategy.pending.Pending`): counted in its peak, never in its plans (a plan, and
        #: so the batching and the floats, must not depend on when the strategy reads back)
        self.held_outside: Callable[[], int] = lambda: 0
        self.p_bytes = nbytes(dict(net.named_parameters()))  # one copy of the weights (or of a gradient)
        # functional_call's search for tied weights costs ~3 % of a 4-sample CIFAR CNN gradient (1.32 against
        # 1.28 ms, medians of 20 interleaved rounds); only a net sharing a parameter under two names needs it
        self.tied = sum(1 for _ in net.named_parameters(remove_duplicate=False)) > len(dict(net.named_parameters()))
        # vmap turns convolutions over stacked weights into grouped convolutions, slower on the CPU than
        # one small forward/backward per snapshot; for linear layers it is a batched matmul and wins
        convs = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in net.modules())
        self.vmap_pays = not (convs and data.x.device.type == "cpu")
        # 2-d conv nets on the CPU: ``grouped`` feeds the samples in channels_last (NHWC), where the CPU's
        # convolutions and pooling run 1.5–2× faster than on NCHW (max pooling over 30× at 4 samples); the
        # float results differ from ``loop``'s (NCHW, the dist engine's) within float tolerance
        self.channels_last = prefers_channels_last(net, data.x)
        # … and ``grouped`` reads snapshots whose conv weights are in that layout too: 8 % less per 4-sample CIFAR
        # CNN gradient (1.54 against 1.44 ms, medians of 20 interleaved rounds), the same gradients to float
        # tolerance; ``loop`` and the codecs' vmapped rows keep the NCHW weights of the dist engine
        self.snapshots = SnapshotStore(
            schedule, channels_last=self.channels_last and mode in ("auto", "grouped") and not self.by_row
        )
        if max_samples == "auto":
            max_samples = CPU_CONV_SAMPLES if convs and not self.vmap_pays else None
        self.max_samples = None if max_samples is None else max(1, int(max_samples))
        # BatchNorm (psbench.strategy.batchnorm): rows one learner at a time (or vmapped, each on its own fresh
        # buffers), never concatenated; each row's batch statistics kept until the PS applies its update
        self.bn = BatchStats(net) if has_batchnorm(net) else None
        self.row_stats: dict[int, Stats] = {}
        self._weights: Params | None = None

    def weights(self) -> Params:
        """The weights whose gradients this source computes, by name: ``net``'s parameters (the live θ_i).

        Looked up once: the optimizer steps these very tensors in place (a device move or a checkpoint's load keeps
        them), and walking the module tree cost ~150 Python calls per PS update."""
        if self._weights is None:
            self._weights = dict(self.net.named_parameters())
        return dict(self._weights)

    # -- sizes ---------------------------------------------------------------------------------
    def minimum_bytes(self, param_bytes: int) -> int:
        """What executing update by update needs at worst (:func:`minimum_bytes`)."""
        return minimum_bytes(self.s, param_bytes, self.by_row)

    def _held(self) -> int:
        """Bytes the look-ahead needs now: its snapshots and pending results (free snapshot slots can be released)."""
        return self.snapshots.bytes + self.result_bytes

    def _track(self, extra: int = 0) -> None:
        held = self._held() + self.snapshots.free_bytes + self.held_outside() + extra
        self.peak_bytes = max(self.peak_bytes, held)

    # -- the update ----------------------------------------------------------------------------
    def update_gradient(self, i: int, params: Params) -> tuple[Params, torch.Tensor]:
        """(Σ_l (w_l/c)·∇L_l(θ_{ts_l}) of update i, mean per-sample loss); ``params`` are θ_i."""
        self._prepare(i, params)
        if not self.by_row:
            grads, seen, n = self._pop(i)
            return grads, seen / n
        order = self._order(i)
        parts = [self._pop(r) for r in order]
        names = list(params)
        out = {k: parts[0][0][k] for k in names}
        for g, _, _ in parts[1:]:
            out = {k: out[k] + g[k] for k in names}
        _, seen, n = parts[0]
        for _, per_sum, m in parts[1:]:
            seen, n = seen + per_sum, n + m
        return out, seen / n

    def learner_gradients(self, i: int, params: Params) -> tuple[list[int], torch.Tensor, Params, torch.Tensor]:
        """(learners, weights w_l/c, {name: [c, ...] unweighted gradients}, mean loss) of update i, newest first."""
        self._prepare(i, params)
        order = self._order(i)
        parts = [self._pop(r) for r in order]
        each = {k: torch.stack([g[k] for g, _, _ in parts]) for k in params}
        _, seen, n = parts[0]
        for _, per_sum, m in parts[1:]:
            seen, n = seen + per_sum, n + m
        return [int(self.s.learner[r]) for r in order], self._row_weights(np.array(order)), each, seen / n

    def _order(self, i: int) -> list[int]:
        first = int(self.s.offsets[i])
        return [first + j for j in contribution_order(self.ts[self.s.rows(i)].tolist())]

    def gradless(self, i: int) -> frozenset[str]:
        """The weights no gradient of update i reached: none here (the built-in losses use every parameter);
        :meth:`psbench.strategy.user_steps.UserLookahead.gradless` for a user's ``training_step``."""
        return frozenset()

    def running_stats(self, i: int) -> list[Stats]:
        """The batch statistics of update i's gradients, in the order the PS sums them (BatchNorm nets; popped)."""
        return [self.row_stats.pop(r) for r in self._order(i) if r in self.row_stats]

    def _prepare(self, i: int, params: Params) -> None:
        if not self.computed[self.s.rows(i)].all():
            self._flush(i, params)
        self.snapshots.advance(i, params)  # θ_i, if a row not computed yet reads it
        self._track()

    def _pop(self, key: int) -> list:
        entry = self.results.pop(key)
        self._free_result(key)
        return entry

    def _free_result(self, key: int) -> None:
        block = self._blocks.pop(key, None)
        if block is None:
            self.result_bytes -= self.p_bytes
            return
        block[1] -= 1
        if block[1] == 0:
            self.result_bytes -= block[0]

    def _row_weights(self, rows: np.ndarray) -> torch.Tensor:
        """w_l/c of each of ``rows``, in the data's dtype, on its device."""
        upd = self.upd[rows]
        if not len(upd):
            return torch.empty(0, dtype=self.data.x.dtype, device=self.data.x.device)
        lo, hi = int(upd.min()), int(upd.max())
        flat = [w for u in range(lo, hi + 1) for w in self._weight_list(u)]  # rows offsets[lo] … offsets[hi + 1]
        vals = torch.from_numpy(np.asarray(flat)[rows - self.s.offsets[lo]])
        return upload(vals.to(self.data.x.dtype), self.data.x.device)

    def _weight_list(self, u: int) -> list[float]:
        w = self._wlist.get(u)
        if w is None:
            w = self._wlist[u] = self.data.weights(u)
            for old in [k for k in self._wlist if k < u - self.horizon]:
                del self._wlist[old]
        return w

    # -- computing rows ahead ------------------------------------------------------------------
    def _flush(self, i: int, params: Params) -> None:
        """Compute every uncomputed row with ts ≤ i of updates i, i+1, … of update i's epoch that fits the budget."""
        stop = min(self.s.num_updates, i + self.ahead)
        if self.epochs is not None:  # the next epoch's first update
            stop = min(stop, int(self.epochs[np.searchsorted(self.epochs, i, side="right")]))
        a, b = int(self.s.offsets[i]), int(self.s.offsets[stop])
        rows = np.flatnonzero((self.ts[a:b] <= i) & ~self.computed[a:b]) + a
        p_bytes = self.p_bytes
        chunk, room = self.max_rows, None
        if self.budget is not None:
            own = rows[self.upd[rows] == i]  # update i's rows: always computed now
            later = rows[self.upd[rows] != i]
            if self.by_row:
                cost = np.arange(1, len(later) + 1)
            else:
                cost = np.cumsum(np.r_[True, np.diff(self.upd[later]) != 0]) if len(later) else later
            free = self.budget - self._held() - (len(own) if self.by_row else 1) * p_bytes
            fit = int(np.searchsorted(cost * p_bytes, free - 2 * p_bytes * min(self.max_rows, 8), side="right"))
            rows = np.concatenate([own, later[:fit]])
            held = self._held() + (len(own) if self.by_row else 1) * p_bytes + fit * p_bytes
            chunk = max(1, min(self.max_rows, (self.budget - held) // (2 * p_bytes)))
            # free snapshot slots only in the room left: the snapshots this flush releases become free slots, so
            # what is held stays what this plan counts
            self.snapshots.trim(self.budget - held - 2 * chunk * p_bytes)
            room = self.budget - held - 2 * min(chunk, len(rows)) * p_bytes - self.snapshots.free_bytes
        if self.before_flush is not None:
            self.before_flush(room)
        at = lambda t: params if t == i else self.snapshots[t]  # noqa: E731
        for k in range(0, len(rows), chunk):
            part = rows[k : k + chunk]
            self._compute(part, at)
            self.computed[part] = True
            self.snapshots.release(int(self.ts[r]) for r in part if self.upd[r] > self.ts[r])
            self.batch_rows.append(len(part))

    def _compute(self, rows: np.ndarray, at: Callable[[int], Params]) -> None:
        mode = self.mode
        if self.bn is not None and not (mode == "vmap" or (mode == "auto" and self.vmap_pays and len(rows) > 1)):
            return self._bn_rows(rows, at)
        if mode == "loop":
            return self._loop(rows, at)
        rows = rows[np.lexsort((self.ts[rows], self.upd[rows]))]  # by (update, snapshot); a unit's rows ascending
        upd, ts = self.upd[rows], self.ts[rows]
        cuts = np.flatnonzero((np.diff(upd) != 0) | (np.diff(ts) != 0)) + 1
        if (
            self.bn is not None
            or self.per_learner
            or mode == "vmap"
            or (mode == "auto" and self.vmap_pays and len(cuts) + 1 > self.vmap_threshold)
        ):
            return self._vmapped(rows, at)
        # consecutive units' samples and weights made at once, up to GATHER_SAMPLES (a unit's are then views): per
        # unit, the gather, the layout copy and the weights cost ~95 µs of a 4-sample CIFAR CNN unit's ~1.4 ms
        s = self.data.spg
        w = self._row_weights(rows).repeat_interleave(s) / s
        starts, ends = np.r_[0, cuts], np.r_[cuts, len(rows)]
        j = 0
        while j < len(starts):
            k = j + 1  # units j…k−1 share one gather
            while k < len(starts) and (ends[k] - starts[j]) * s <= GATHER_SAMPLES:
                k += 1
            lo, hi = starts[j], ends[k - 1]
            x, y = self.data.samples(rows[lo:hi])
            if self.channels_last and k - j > 1:  # (a unit alone is copied chunk by chunk, as it is computed)
                x = x.contiguous(memory_format=torch.channels_last)
            for a, b in zip(starts[j:k], ends[j:k], strict=True):
                self._grouped(
                    int(upd[a]),
                    int(ts[a]),
                    at,
                    x[(a - lo) * s : (b - lo) * s],
                    y[(a - lo) * s : (b - lo) * s],
                    w[a * s : b * s],
                )
            j = k

    def _add(self, u: int, grads: Params, per_sum: torch.Tensor, n: int, block: list[int] | None = None) -> None:
        """Keep ``grads`` (views of ``block``'s tensor, if given) as key ``u``'s result, or add them to it."""
        entry = self.results.get(u)
        if entry is None:
            self.results[u] = [grads, per_sum, n]
            if block is None:
                self.result_bytes += self.p_bytes
                return
            if block[1] == 0:
                self.result_bytes += block[0]
            block[1] += 1
            self._blocks[u] = block
        else:
            entry[0] = {k: entry[0][k] + v for k, v in grads.items()}
            entry[1], entry[2] = entry[1] + per_sum, entry[2] + n
            self._free_result(u)  # its old tensors; the sum is a tensor of its own
            self.result_bytes += self.p_bytes

    def _loop(self, rows: np.ndarray, at: Callable[[int], Params]) -> None:
        w = (
            torch.ones(len(rows), dtype=self.data.x.dtype, device=self.data.x.device)
            if self.per_learner
            else self._row_weights(rows)
        )
        for j, r in enumerate(rows.tolist()):
            x, y = self.data.samples([r])
            params = at(int(self.ts[r]))
            gr, per = learner_gradient(self.net, self.loss, params, x, y, w[j])
            self._add(r, dict(zip(params, gr, strict=True)), per.sum(), len(per))
            self._track()

    def _bn_rows(self, rows: np.ndarray, at: Callable[[int], Params]) -> None:
        """BatchNorm nets: one forward/backward per row (each learner normalised over its own mini-batch) on fresh
        buffers, capturing the row's batch statistics (:class:`~psbench.strategy.batchnorm.BatchStats`)."""
        assert self.bn is not None
        bn, dev = self.bn, self.data.x.device
        w = torch.ones(len(rows), dtype=self.data.x.dtype, device=dev) if self.per_learner else self._row_weights(rows)
        with bn.capturing():
            for j, r in enumerate(rows.tolist()):
                x, y = self.data.samples([r])
                if self.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                params = {k: v.detach().requires_grad_() for k, v in at(int(self.ts[r])).items()}
                buffers = bn.fresh()
                out = functional_call(self.net, (params, buffers), (x,), tie_weights=self.tied)
                per = self.loss(out, y)
                g = torch.autograd.grad(per.mean() * w[j], list(params.values()))
                self.row_stats[r] = bn.batch_stats(buffers)
                self._add(
                    r if self.by_row else int(self.upd[r]),
                    dict(zip(params, (v.contiguous() for v in g), strict=True)),
                    per.detach().sum(),
                    len(per),
                )
                self._track(self.p_bytes)

    def _grouped(
        self, u: int, t: int, at: Callable[[int], Params], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor
    ) -> None:
        """One (update u, snapshot t) unit: its samples ``x``, ``y`` and per-sample weights ``w`` = (w_l/c)/s."""
        params = {k: v.detach().requires_grad_() for k, v in at(t).items()}
        step = self.max_samples or len(y)
        gr, per_sum = None, None
        for a in range(0, len(y), step):  # chunks of at most max_samples, their gradients summed in order
            xa = x[a : a + step]
            if self.channels_last:
                xa = xa.contiguous(memory_format=torch.channels_last)
            per = self.loss(functional_call(self.net, params, (xa,), tie_weights=self.tied), y[a : a + step])
            g = torch.autograd.grad((per * w[a : a + step]).sum(), list(params.values()))
            gr = list(g) if gr is None else [p + q for p, q in zip(gr, g, strict=True)]
            per_sum = per.detach().sum() if per_sum is None else per_sum + per.detach().sum()
        assert gr is not None and per_sum is not None, "a learner's mini-batch is never empty"
        if self.channels_last:  # weight gradients come out NHWC-strided: the PS and codecs read them flat
            gr = [g.contiguous() for g in gr]
        self._add(u, dict(zip(params, gr, strict=True)), per_sum, len(y))
        self._track(self.p_bytes)

    def _vmapped(self, rows: np.ndarray, at: Callable[[int], Params]) -> None:
        def f(params, buffers, x, y, w):
            per = self.loss(functional_call(self.net, (params, buffers), (x,), tie_weights=self.tied), y)
            return (per * w).sum(), (per.detach().sum(), buffers)

        s, R = self.data.spg, len(rows)
        snaps = [at(int(self.ts[r])) for r in rows]
        stacked = {k: torch.stack([p[k].detach() for p in snaps]) for k in snaps[0]}
        x, y = self.data.samples(rows)
        w = torch.ones(R, dtype=x.dtype, device=x.device) if self.per_learner else self._row_weights(rows)
        ws = (w / s).unsqueeze(1).expand(R, s)
        # BatchNorm: each learner's own fresh buffers, stacked (psbench.strategy.batchnorm); none without
        buffers = self.bn.fresh(R) if self.bn is not None else {}
        with self.bn.capturing() if self.bn is not None else contextlib.nullcontext():
            # randomness: each row draws its own dropout masks, as each learner would (vmap's default refuses any
            # random op, and a user's net with dropout failed here)
            grads, (sums, filled) = vmap(grad(f, has_aux=True), randomness="different")(
                stacked, buffers, x.view(R, s, *x.shape[1:]), y.view(R, s, *y.shape[1:]), ws
            )
        if self.bn is not None:
            for j, r in enumerate(rows.tolist()):
                self.row_stats[r] = self.bn.batch_stats(filled, j)
        self._track(2 * R * self.p_bytes)
        upd = self.upd[rows]
        assert self.by_row or (np.diff(upd) >= 0).all(), "the vmapped rows come sorted by update"
        if self.by_row or (np.diff(upd) > 0).all():  # a result per row (one row per update: async, λ-softsync)
            # is that row, a view of the vmapped gradients: no sum
            each, losses, block = {n: v.unbind(0) for n, v in grads.items()}, sums.unbind(0), [R * self.p_bytes, 0]
            for j, key in enumerate((rows if self.by_row else upd).tolist()):
                self._add(key, {n: g[j] for n, g in each.items()}, losses[j], s, block)
            return
        # by update: each update's rows are one slice of the vmapped rows, summed on the device (no index tensor to
        # upload per update: on a GPU each upload would wait for the stream)
        first = np.r_[0, np.flatnonzero(np.diff(upd)) + 1]
        sizes = np.diff(np.r_[first, len(upd)]).tolist()
        parts = {n: v.split(sizes) for n, v in grads.items()}
        for j, (u, m, loss) in enumerate(zip(upd[first].tolist(), sizes, sums.split(sizes), strict=True)):
            self._add(u, {n: p[j].sum(0) for n, p in parts.items()}, loss.sum(), s * m)

    # -- checkpoints ---------------------------------------------------------------------------
    def resume_update_by_update(self, i: int, snapshots: dict[int, Params]) -> None:
        """Continue at update i from a checkpoint written without look-ahead (its snapshots, nothing ahead)."""
        applied = self.upd < i
        self.computed[applied] = True
        stale = applied & (self.upd > self.ts)
        readers = self.snapshots.readers - np.bincount(self.ts[stale], minlength=len(self.snapshots.readers))
        self.snapshots.load_state_dict(move_data_to_device(snapshots, self.data.x.device), readers)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps; results and BatchNorm statistics that are views of a vmapped flush's tensors
        are copied out, so that a checkpoint holds each once, not the whole flush's tensor per view."""
        return {
            "snapshots": self.snapshots.state_dict(),
            "readers": self.snapshots.readers.copy(),
            "computed": self.computed.copy(),
            "results": {k: [_owned(g), _owned(loss), n] for k, (g, loss, n) in self.results.items()},
            "peak_bytes": self.peak_bytes,
            "row_stats": {k: _owned(v) for k, v in self.row_stats.items()},
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """A checkpoint's state (loaded onto the CPU), its tensors moved to where the run's data lives, each in its
        memory format: a run on a GPU resumed from it computes its stale gradients there."""
        dev = self.data.x.device
        self.snapshots.load_state_dict(move_data_to_device(sd["snapshots"], dev), sd["readers"])
        self.computed = np.array(sd["computed"], dtype=bool)
        self.results = {int(k): move_data_to_device(list(v), dev) for k, v in sd["results"].items()}
        self.result_bytes = len(self.results) * self.p_bytes
        self._blocks = {}
        self.peak_bytes = int(sd["peak_bytes"])
        self.row_stats = {int(k): move_data_to_device(v, dev) for k, v in sd.get("row_stats", {}).items()}


def _owned(t: Any) -> Any:
    """``t`` (a tensor, or a dict of them) with every view of a larger tensor copied into a tensor of its own."""
    if isinstance(t, dict):
        return {k: _owned(v) for k, v in t.items()}
    return t.clone() if t.untyped_storage().nbytes() > t.nbytes else t
