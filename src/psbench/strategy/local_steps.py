"""Learner-local models and the local-step update of ``downpour``, ``agn``, ``aeasgd``, ``dynsgd`` (AGN §3).

Every schedule row of a local-step protocol is one *window*: learner l pulls the center θ̃ at
timestamp ``ts``, takes H = ``protocol.local_steps`` optimizer steps on its own model with
the window's μ·H samples (H consecutive mini-batches of the sample stream), and commits. What
the commit holds is :mod:`psbench.ps.local`; this module computes it.

**Batched, exactly.** A window depends only on θ̃_ts, the learner's own state and its data —
not on the updates applied between ts and its commit. So windows are *captured* when the
master weights reach their ``ts`` (a copy of θ̃_ts per learner) and *computed lazily*: when an
update needs a commit that is not ready, every captured window is computed at once, the H
local steps of k ≈ λ learners stacked along a leading learner dimension and run with
``torch.func.vmap(grad(functional_call))`` — one vmapped call per local step instead of a
Python loop over learners. A learner's windows stay in its own order (a capture flushes the
learner's previous window first), so the result does not depend on how windows were batched.

**Units.** The learner optimizer (``optimizer`` group: SGD with momentum, AdaGrad, Adam, as in
AGN Algorithm 1) is a functional, stacked copy of torch's update rule that returns step
directions d_h with θ ← θ − η·d_h. A commit is kept in these units, G = s·w·Σ_h d_h (or
G = −ρ(θ_l − θ̃_ts) for the elastic commit), and the PS applies θ̃ ← θ̃ − η·G with plain SGD
(:func:`server_optimizer`: lr η, no momentum) — i.e. θ̃ + Δ (AGN Eq 2). With H = 1 and SGD
without momentum, G is the gradient itself and the update is bit-for-bit the async one.

All learner state (local models, optimizer buffers, step counts, captured and finished
windows) is in :meth:`LocalLearners.state_dict`, which :mod:`psbench.checkpoint` saves with the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from psbench.errors import require
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule
from psbench.ps.local import commit_scale, is_elastic, uses_local_steps
from psbench.ps.local_window import LearnerOptimizer, elastic_commit, local_window
from psbench.strategy.batches import SampleStream, SnapshotGroup, UpdateBatch

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Params = dict[str, torch.Tensor]


class LocalLearners:
    """Learner-local state and the local-step update of one local-step protocol run.

    Args:
        protocol: a local-step protocol (``downpour``, ``agn``, ``aeasgd``, ``dynsgd``).
        schedule: the run's schedule; row g is one window of μ·H samples.
        x, y: the training tensors the sample stream indexes.
        batch_size: μ.
        seed: the sample-stream seed (the same as :class:`~psbench.strategy.UpdateBatches`).
        optimizer: the learners' optimizer config (``optimizer`` group).
        policy: lr policy; its per-gradient weight w_l multiplies each commit.
    """

    def __init__(
        self,
        protocol: Protocol,
        schedule: Schedule,
        x: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        seed: int,
        optimizer: Mapping,
        policy: LRPolicy | None = None,
    ) -> None:
        require(uses_local_steps(protocol.name), "protocol.name", protocol.name, "a local-step protocol")
        self.protocol, self.schedule, self.x, self.y = protocol, schedule, x, y
        self.H, self.mu, self.lam = protocol.local_steps, batch_size, protocol.learners
        self.elastic = is_elastic(protocol.name)
        self.rho = float(protocol.rho or 0.0)
        self.policy = policy or LRPolicy()
        self.opt = LearnerOptimizer(optimizer)
        self.stream = SampleStream(len(x), seed)
        self.by_ts = np.argsort(schedule.ts, kind="stable")  # windows in pull order, learner order kept
        self._ts_sorted = schedule.ts[self.by_ts]
        self.local: Params = {}  # θ_l, stacked [λ, ...] (downpour/agn/dynsgd: the pulled center)
        self.pull: Params = {}  # aeasgd: θ̃_ts of each captured window
        self.state: dict[str, Params] = {}
        self.steps = torch.zeros(self.lam, dtype=torch.int64)
        self.pending: dict[int, int] = {}  # learner -> row of its captured, not yet computed window
        # row -> (direction-unit commit, mean loss and accuracy of the window's mini-batches)
        self.ready: dict[int, tuple[Params, float, float]] = {}
        self.last_accuracy = float("nan")
        self.captured_upto = 0  # index into by_ts of the next window to capture
        self.flushes = 0
        self.windows_computed = 0

    # -- state -------------------------------------------------------------------------------
    def _ensure(self, params: Params) -> None:
        if self.local:
            return
        self.local = {k: v.detach().unsqueeze(0).repeat(self.lam, *[1] * v.dim()) for k, v in params.items()}
        if self.elastic:
            self.pull = {k: torch.empty_like(v) for k, v in self.local.items()}
        self.state = self.opt.init_state(self.local)

    def state_dict(self) -> dict[str, Any]:
        return {
            "local": self.local,
            "pull": self.pull,
            "state": self.state,
            "steps": self.steps,
            "pending": dict(self.pending),
            "ready": dict(self.ready),
            "captured_upto": self.captured_upto,
        }

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        self.local, self.pull, self.state = dict(sd["local"]), dict(sd["pull"]), dict(sd["state"])
        self.steps = sd["steps"].clone()
        self.pending, self.ready = dict(sd["pending"]), dict(sd["ready"])
        self.captured_upto = int(sd["captured_upto"])

    # -- the update --------------------------------------------------------------------------
    def update_direction(
        self, net: torch.nn.Module, loss: LossFn, batch: UpdateBatch, params: Params, lr: float
    ) -> tuple[Params, torch.Tensor]:
        """G_i = Σ_{commits l of update i} w_l·s_l·C_l in direction units; the PS applies θ̃ ← θ̃ − η·G_i.

        ``params`` are the master weights at timestamp i = ``batch.index``; ``lr`` is η now.
        Returns (G_i per parameter name, mean per-sample loss of the committed windows).
        """
        i = batch.index
        self._ensure(params)
        self._capture(i, params, net, loss, lr)
        s = self.schedule
        rows = range(int(s.offsets[i]), int(s.offsets[i + 1]))
        sigma = [i - int(s.ts[r]) for r in rows]
        w = self.policy.scales(sigma, self.mu, self.lam)
        c = len(sigma)
        total: Params = {}
        losses, hits = 0.0, 0.0
        for r, sg, wl in zip(rows, sigma, w, strict=True):
            if r not in self.ready:
                self._flush(net, loss, lr)
            commit, window_loss, window_acc = self.ready.pop(r)
            f = wl / c * (1.0 if self.elastic else commit_scale(self.protocol.name, self.H, sg))
            for k, v in commit.items():
                term = v * f
                total[k] = total[k] + term if k in total else term
            losses += window_loss
            hits += window_acc
        self.last_accuracy = hits / c  # the learners' mini-batch accuracy (what dist-keras plots, AGN Figs 7-12)
        return total, torch.tensor(losses / c)

    def _capture(self, i: int, params: Params, net, loss, lr: float) -> None:
        """Windows that pull timestamp i copy θ̃_i (aeasgd: into ``pull``; otherwise it *is* the local model)."""
        order, ts = self.by_ts, self._ts_sorted
        j = self.captured_upto
        while j < len(order) and ts[j] <= i:
            row = int(order[j])
            learner = int(self.schedule.learner[row])
            if learner in self.pending:  # the learner's previous window first (adv* pushes in the background)
                self._flush(net, loss, lr)
            target = self.pull if self.elastic else self.local
            for k, v in params.items():
                target[k][learner].copy_(v.detach())
            self.pending[learner] = row
            j += 1
        self.captured_upto = j

    def _flush(self, net: torch.nn.Module, loss: LossFn, lr: float) -> None:
        """Compute every captured window: H local steps of k learners, vmapped over the learner dimension."""
        learners = sorted(self.pending)
        rows = [self.pending[learner] for learner in learners]
        self.pending.clear()
        k, H, mu = len(learners), self.H, self.mu
        idx = torch.tensor(learners, dtype=torch.int64)
        theta = {n: v.index_select(0, idx) for n, v in self.local.items()}
        state = {b: {n: v.index_select(0, idx) for n, v in bufs.items()} for b, bufs in self.state.items()}
        steps = self.steps.index_select(0, idx)
        commit: Params = {}
        if self.elastic:  # e = ηρ(θ_l − θ̃_ts) leaves the learner and joins the center: G = −ρ(θ_l − θ̃_ts)
            theta, commit = elastic_commit(
                theta, {n: v.index_select(0, idx) for n, v in self.pull.items()}, self.rho, lr
            )
        sample_idx = self.stream.rows(self.schedule.sample_start[np.asarray(rows)], mu * H)
        xs = self.x[sample_idx].view(k, H, mu, *self.x.shape[1:]).transpose(0, 1).contiguous()
        ys = self.y[sample_idx].view(k, H, mu, *self.y.shape[1:]).transpose(0, 1).contiguous()
        theta, acc, seen, right = local_window(
            net, loss, self.opt, theta, state, steps, xs, ys, lr, accumulate=not self.elastic
        )
        if not self.elastic:
            commit = acc
        for n, v in theta.items():
            self.local[n].index_copy_(0, idx, v)
        for b, bufs in state.items():
            for n, v in bufs.items():
                self.state[b][n].index_copy_(0, idx, v)
        self.steps.index_add_(0, idx, torch.full((k,), H, dtype=torch.int64))
        window_loss, window_acc = (seen / (H * mu)).tolist(), (right / (H * mu)).tolist()
        for j, r in enumerate(rows):
            self.ready[r] = ({n: v[j] for n, v in commit.items()}, window_loss[j], window_acc[j])
        self.flushes += 1
        self.windows_computed += k


class WindowBatches(torch.utils.data.Dataset):
    """The Trainer's data for a local-step protocol: update i's index, staleness and time, no samples.

    :class:`LocalLearners` reads the samples of whole batches of windows itself (it computes them
    ahead of their updates), so the per-update item carries only what the strategy logs.
    """

    def __init__(self, schedule: Schedule, samples_per_gradient: int) -> None:
        self.s, self.spg = schedule, samples_per_gradient
        self._empty = torch.empty(0)

    def __len__(self) -> int:
        return self.s.num_updates

    def __getitem__(self, i: int) -> UpdateBatch:
        rows = self.s.rows(i)
        ts, learners = self.s.ts[rows].tolist(), self.s.learner[rows].tolist()
        c = len(ts)
        groups = [
            SnapshotGroup(t, [learner], self._empty, self._empty, torch.ones(1) / c)
            for t, learner in zip(ts, learners, strict=True)
        ]
        return UpdateBatch(i, groups, sum(i - t for t in ts) / c, float(self.s.update_time[i]), c * self.spg)
