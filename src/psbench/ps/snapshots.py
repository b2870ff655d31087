"""Weight snapshots that a pending learner still needs (its gradient is computed on θ_ts, Rudra §3.1).

A gradient of update j computed on timestamp ts < j needs the weights as they were at ts.
From the schedule we know, for every timestamp, the stale gradients that read it; a snapshot is
taken when the master weights reach that timestamp and dropped after its last reader, so the
store holds at most σ_max + 1 copies (none for hardsync). A reader computed ahead of its update
(look-ahead, :mod:`psbench.strategy.lookahead`) is :meth:`released <SnapshotStore.release>` at
once: a snapshot whose stale readers are all computed is dropped (or never taken).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from psbench.ps import Schedule


def nbytes(params: dict[str, torch.Tensor]) -> int:
    return sum(v.numel() * v.element_size() for v in params.values())


class SnapshotStore:
    """``channels_last``: copy 4-d weights in that layout, the one the CPU's convolutions on channels_last samples
    read (each call would otherwise reorder the weights first); the same values, so the same results to float
    tolerance (oneDNN may pick another kernel for another weight layout)."""

    def __init__(self, schedule: Schedule, channels_last: bool = False) -> None:
        self.channels_last = channels_last
        upd = schedule.update_index
        stale = upd > schedule.ts
        last = np.full(schedule.num_updates + 1, -1, dtype=np.int64)
        np.maximum.at(last, schedule.ts[stale], upd[stale])
        self.last_reader = last
        self.readers = np.bincount(schedule.ts[stale], minlength=schedule.num_updates + 1)  # not yet computed
        self._snaps: dict[int, dict[str, torch.Tensor]] = {}
        self._free: list[dict[str, torch.Tensor]] = []  # dropped snapshots' buffers: the next ones are copied there
        self.bytes = 0  # of the snapshots held (``free_bytes``: of the free slots)
        self._size = 0  # bytes of one snapshot

    @staticmethod
    def peak_count(schedule: Schedule) -> int:
        """Most snapshots held at once when every gradient is computed at its own update (no look-ahead)."""
        upd = schedule.update_index
        stale = upd > schedule.ts
        last = np.full(schedule.num_updates + 1, -1, dtype=np.int64)
        np.maximum.at(last, schedule.ts[stale], upd[stale])
        held = np.zeros(schedule.num_updates + 2, dtype=np.int64)
        ts = np.flatnonzero(last >= 0)
        np.add.at(held, ts, 1)  # taken at update ts, held through its last reader's update
        np.add.at(held, last[ts] + 1, -1)
        return int(np.cumsum(held).max(initial=0))

    def advance(self, ts: int, params: dict[str, torch.Tensor]) -> None:
        """Called with the master weights at timestamp ``ts``, before update ``ts`` is computed."""
        for old in [t for t in self._snaps if self.last_reader[t] < ts]:
            self._drop(old)
        if ts < len(self.last_reader) and self.last_reader[ts] > ts and self.readers[ts] > 0 and ts not in self._snaps:
            self._snaps[ts] = self._take(params)
            self._size = self._size or nbytes(params)
            self.bytes += self._size

    def _take(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A copy of ``params``: into a dropped snapshot's buffers, by one ``torch._foreach_copy_`` (one dispatch,
        a fused kernel on a GPU, no allocation), else into new ones. Every dropped snapshot's buffers are kept for
        the next, so without a binding memory budget a schedule allocates only while it holds more snapshots than
        ever before (:meth:`trim` releases the slots a budget has no room for; later snapshots allocate again)."""
        with torch.no_grad():
            slot = self._free.pop() if self._free else None
            if slot is None or list(slot) != list(params):
                return {k: self._copy(v) for k, v in params.items()}
            torch._foreach_copy_(list(slot.values()), list(params.values()))
            return slot

    def _copy(self, v: torch.Tensor) -> torch.Tensor:
        """A new buffer holding ``v`` (called under ``no_grad``: no autograd history, nothing to detach)."""
        if self.channels_last and v.dim() == 4:
            return v.clone(memory_format=torch.channels_last)
        return v.clone()

    def release(self, ts: Iterable[int]) -> None:
        """Stale readers of these timestamps (one entry per reader) were computed: drop unread snapshots."""
        for t in ts:
            self.readers[t] -= 1
            if self.readers[t] == 0 and t in self._snaps:
                self._drop(t)

    def _drop(self, t: int) -> None:
        self.bytes -= self._size or nbytes(self._snaps[t])
        self._free.append(self._snaps.pop(t))  # its buffers hold a later snapshot

    @property
    def free_bytes(self) -> int:
        """Bytes of the free slots (dropped snapshots' buffers kept for the next)."""
        return len(self._free) * self._size

    def trim(self, free_bytes: int) -> None:
        """Keep at most ``free_bytes`` of free slots (a memory budget's room): the others are released."""
        keep = max(0, free_bytes) // self._size if self._size else 0
        del self._free[keep:]

    def state_dict(self) -> dict[int, dict[str, torch.Tensor]]:
        return self._snaps

    def load_state_dict(self, snaps: dict[int, dict[str, torch.Tensor]], readers: np.ndarray | None = None) -> None:
        self._snaps = {int(t): dict(p) for t, p in snaps.items()}
        self._size = nbytes(next(iter(self._snaps.values()))) if self._snaps else self._size
        self.bytes = len(self._snaps) * self._size
        if readers is not None:
            self.readers = np.array(readers)

    def __getitem__(self, ts: int) -> dict[str, torch.Tensor]:
        return self._snaps[ts]

    def __len__(self) -> int:
        return len(self._snaps)
