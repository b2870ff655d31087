"""One PS update as a training batch: the arriving gradients' samples, grouped by weight snapshot.

:class:`UpdateBatches` turns a :class:`~psbench.ps.Schedule` into the Trainer's data: item ``i``
is update ``i`` — for each distinct weight timestamp among its c gradients, the samples of
those gradients and the per-gradient weights w_l/c of the learning-rate policy (Zhang Eq 2).
Samples are addressed on a global stream: position ``p`` is training sample
``perm_e[p mod N]`` with ``e = p // N`` and ``perm_e`` a permutation seeded by (seed, e), so
any schedule — and a single large-batch learner — reads the same sample order. ``x`` is a tensor or a
streamed source (:class:`psbench.data.imagenet.StreamedImages`): :func:`gather` reads either.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

import torch

from psbench.lr import LRPolicy
from psbench.lr.steps import relative
from psbench.ps import Schedule
from psbench.ps.aggregate import contribution_order, update_weights
from psbench.ps.samples import SampleStream
from psbench.strategy.device import upload


def gather(x, y: torch.Tensor, idx: torch.Tensor, starts: list[int], spg: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x[idx], y[idx]) of the samples at stream positions ``starts[j]`` … ``starts[j] + spg − 1``; a streamed
    ``x`` decodes them with ``take(idx, positions)`` (its augmentation is seeded by the positions)."""
    if isinstance(x, torch.Tensor):
        idx = upload(idx, x.device)
        return x[idx], y[idx]
    positions = (torch.tensor(starts, dtype=torch.int64).unsqueeze(1) + torch.arange(spg)).reshape(-1)
    return x.take(idx, positions), y[upload(idx, y.device)]


@dataclass
class SnapshotGroup:
    """Gradients of one update computed on the weights of timestamp ``ts``."""

    ts: int
    learners: list[int]
    x: torch.Tensor  # [k·s, *input_shape] — k gradients of s samples each, learner-major
    y: torch.Tensor  # [k·s]
    weights: torch.Tensor  # [k] — w_l / c for each of the k gradients


@dataclass
class UpdateBatch:
    index: int
    groups: list[SnapshotGroup]
    staleness_mean: float
    time: float
    samples: int
    lr_scale: float = 1.0  # mean lr-policy scale ⟨w⟩ of the update's gradients (the weight decay's, or the lr's)

    def to(self, device, **_: object) -> UpdateBatch:  # Lightning moves batches with .to()
        for g in self.groups:
            g.x, g.y, g.weights = g.x.to(device), g.y.to(device), g.weights.to(device)
        return self


class UpdateBatches(torch.utils.data.Dataset):
    """Map-style dataset over the updates of a schedule (use with ``DataLoader(batch_size=None)``)."""

    def __init__(
        self,
        schedule: Schedule,
        x: torch.Tensor,
        y: torch.Tensor,
        samples_per_gradient: int,
        policy: LRPolicy,
        batch_size: int,
        learners: int,
        seed: int,
        with_samples: bool = True,
    ) -> None:
        self.s, self.x, self.y, self.spg = schedule, x, y, samples_per_gradient
        self.with_samples = with_samples  # False: items carry no groups (the strategy reads samples itself)
        self.policy, self.mu, self.lam = policy, batch_size, learners
        self.stream = SampleStream(len(x), seed)
        #: the policy scales the optimizer's lr (an adaptive optimizer: :mod:`psbench.lr.steps`); the gradients
        #: keep only their relative weights w_l/⟨w⟩ (the strategy sets it before the first update)
        self.step_scaled = False

    def __len__(self) -> int:
        return self.s.num_updates

    def weights(self, i: int) -> list[float]:
        """w_l/c of update ``i``'s gradients, in schedule row order (the learning-rate policy's scales)."""
        sigma = [i - t for t in self.s.ts[self.s.rows(i)].tolist()]
        scales = self.policy.scales(sigma, self.mu, self.lam)
        if self.step_scaled:
            scales = relative(scales)
        return [v / len(scales) for v in scales]  # update_weights' float64 values, without a tensor

    def samples(self, rows) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) of the given schedule rows' samples, row-major: [len(rows)·s, ...]."""
        starts = self.s.sample_start[rows]
        return gather(self.x, self.y, self.stream.rows(starts, self.spg), starts.tolist(), self.spg)

    def __getitem__(self, i: int) -> UpdateBatch:
        s, rows = self.s, self.s.rows(i)
        ts = s.ts[rows].tolist()
        learners = s.learner[rows].tolist()
        starts = s.sample_start[rows].tolist()
        sigma = [i - t for t in ts]
        c = len(ts)
        scales = self.policy.scales(sigma, self.mu, self.lam)
        if not self.with_samples:
            return UpdateBatch(i, [], sum(sigma) / c, float(s.update_time[i]), c * self.spg, fmean(scales))
        w = update_weights(relative(scales) if self.step_scaled else scales, torch.float64).tolist()
        order = contribution_order(ts)  # newest weights first: the live model
        groups: list[SnapshotGroup] = []
        group_starts: list[list[int]] = []  # each group's rows' stream positions
        for j in order:
            if groups and groups[-1].ts == ts[j]:
                g = groups[-1]
            else:
                g = SnapshotGroup(ts[j], [], [], [], [])  # type: ignore[arg-type]
                groups.append(g)
                group_starts.append([])
            group_starts[-1].append(starts[j])
            g.learners.append(learners[j])
            g.x.append(self.stream.indices(starts[j], self.spg))  # type: ignore[attr-defined]
            g.weights.append(w[j])  # type: ignore[attr-defined]
        for g, g_starts in zip(groups, group_starts, strict=True):
            idx = torch.cat(g.x)  # type: ignore[arg-type]
            g.x, g.y = gather(self.x, self.y, idx, g_starts, self.spg)
            g.weights = torch.tensor(g.weights, dtype=self.x.dtype)
        return UpdateBatch(i, groups, sum(sigma) / c, float(s.update_time[i]), c * self.spg, fmean(scales))
