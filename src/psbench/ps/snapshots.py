"""Weight snapshots that a pending learner still needs (its gradient is computed on θ_ts, Rudra §3.1).

A gradient of update j computed on timestamp ts < j needs the weights as they were at ts.
From the schedule we know, for every timestamp, the last update that reads it; a snapshot is
taken when the master weights reach that timestamp and dropped after its last reader, so the
store holds at most σ_max + 1 copies (none for hardsync).
"""

from __future__ import annotations

import numpy as np
import torch

from psbench.ps import Schedule


class SnapshotStore:
    def __init__(self, schedule: Schedule) -> None:
        upd = schedule.update_index
        stale = upd > schedule.ts
        last = np.full(schedule.num_updates + 1, -1, dtype=np.int64)
        np.maximum.at(last, schedule.ts[stale], upd[stale])
        self.last_reader = last
        self._snaps: dict[int, dict[str, torch.Tensor]] = {}

    def advance(self, ts: int, params: dict[str, torch.Tensor]) -> None:
        """Called with the master weights at timestamp ``ts``, before update ``ts`` is computed."""
        for old in [t for t in self._snaps if self.last_reader[t] < ts]:
            del self._snaps[old]
        if ts < len(self.last_reader) and self.last_reader[ts] > ts:
            self._snaps[ts] = {k: v.detach().clone() for k, v in params.items()}

    def state_dict(self) -> dict[int, dict[str, torch.Tensor]]:
        return self._snaps

    def load_state_dict(self, snaps: dict[int, dict[str, torch.Tensor]]) -> None:
        self._snaps = {int(t): dict(p) for t, p in snaps.items()}

    def __getitem__(self, ts: int) -> dict[str, torch.Tensor]:
        return self._snaps[ts]

    def __len__(self) -> int:
        return len(self._snaps)
