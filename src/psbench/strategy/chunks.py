"""Several PS updates per Trainer step: consecutive updates as one training batch.

A Trainer step costs Lightning's per-batch bookkeeping (hooks, progress, logging: a fixed cost of a few
ms); for asynchronous schedules at small μ an update is a handful of samples, so that cost would rival
the update's own. :class:`UpdateChunks` hands the Trainer runs of K consecutive updates instead; the
strategy applies them one by one, in order, with the same float operations (so the weights are the same
for every K, bit for bit). What happens at update boundaries keeps its meaning: per-update metrics are
logged at the update's step, a checkpoint or a stop (``trainer.checkpoint_every``, a signal) happens at the
exact update (the strategy calls the callbacks' ``on_ps_update_start`` between the updates of a chunk),
divergence stops at the diverged update, and a chunk never crosses an evaluation boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from psbench.ps import Schedule

#: samples a Trainer step should carry at least (``trainer.updates_per_step`` null): about one batch-128 step
TARGET_SAMPLES = 128
#: most updates in one Trainer step (auto)
MAX_UPDATES = 64


def auto_updates_per_step(schedule: Schedule, samples_per_gradient: int) -> int:
    """K = the updates of ~:data:`TARGET_SAMPLES` samples (mean over the schedule), 1 ≤ K ≤ :data:`MAX_UPDATES`."""
    if schedule.num_updates == 0:
        return 1
    per_update = schedule.num_gradients * samples_per_gradient / schedule.num_updates
    return int(max(1, min(MAX_UPDATES, TARGET_SAMPLES // max(per_update, 1))))


def bounds(start: int, stop: int, k: int, period: int) -> list[int]:
    """Chunk boundaries start = b_0 < b_1 < … = stop: runs of ≤ k updates that never cross a multiple of ``period``
    (the evaluation boundaries)."""
    out, i = [start], start
    while i < stop:
        i = min(stop, i + max(1, k), (i // period + 1) * period)
        out.append(i)
    return out


@dataclass
class UpdateChunk:
    """Updates ``index``, ``index`` + 1, … applied in one Trainer step."""

    index: int  # the first update (where a checkpoint taken before this step stands)
    updates: list[Any]  # UpdateBatch (or a local-step protocol's window batch) per update


class UpdateChunks(torch.utils.data.Dataset):
    """Map-style dataset of :class:`UpdateChunk` over ``updates`` (per-update batches, item i = update i)."""

    def __init__(self, updates: torch.utils.data.Dataset, start: int, stop: int, k: int, period: int) -> None:
        self.updates, self.b = updates, bounds(start, stop, k, period)

    def __len__(self) -> int:
        return len(self.b) - 1

    def __getitem__(self, j: int) -> UpdateChunk:
        a, b = self.b[j], self.b[j + 1]
        return UpdateChunk(a, [self.updates[i] for i in range(a, b)])
