"""The event schedule: who contributes to every PS update, on which weights, with which samples.

A schedule is plain data — numpy arrays, one row per *gradient* grouped by *update* —
so it is saved as a run artifact (``.npz``), hashed, compared and replayed. Row ``g``
of update ``i`` (rows ``offsets[i]:offsets[i+1]``) says: learner ``learner[g]`` computed
the gradient on the weights of timestamp ``ts[g]`` (its σ is ``i − ts[g]``), it was that
learner's ``clock[g]``-th push, it used samples ``sample_start[g] : sample_start[g] + μ·H``
of the global sample stream (position ``p`` is sample ``perm_e[p mod N]`` of epoch
``e = p // N``), computing started at virtual time ``t_start[g]`` and the PS received it at
``t_push[g]``; the update was applied at ``update_time[i]``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


class Contribution(NamedTuple):
    learner: int
    ts: int
    clock: int
    sample_start: int
    t_start: float
    t_push: float


class Update(NamedTuple):
    index: int  # type: ignore[assignment]  # the update's index i (shadows tuple.index, which no caller uses)
    time: float
    contributions: list[Contribution]


_COLUMNS = {
    "learner": np.int32,
    "ts": np.int64,
    "clock": np.int64,
    "sample_start": np.int64,
    "t_start": np.float64,
    "t_push": np.float64,
}


#: peak bytes per gradient while :meth:`Schedule.collect` builds a schedule (measured: ~400 at λ = 30, μ = 4)
ROW_BYTES = 400
#: the rows of one schedule are indexed with int32 learner ids and int64 offsets; 2**31 − 1 rows at most
MAX_ROWS = 2**31 - 1


def max_gradients(memory_bytes: int | None = None) -> int:
    """The most gradients one schedule may hold here: half of this machine's memory at :data:`ROW_BYTES` each,
    and at most :data:`MAX_ROWS` (``memory_bytes``: None = the physical memory, :mod:`psbench.machine`)."""
    from psbench.machine import physical_memory

    memory = physical_memory() if memory_bytes is None else memory_bytes
    return MAX_ROWS if memory is None else min(MAX_ROWS, memory // 2 // ROW_BYTES)


def updates_per_epoch(updates: int, gradients: int, samples_per_gradient: int, num_train: int) -> float:
    """PS updates per epoch of N samples: where the lr schedule's epoch milestones and evaluations fall."""
    return updates * num_train / max(1, gradients * samples_per_gradient)


@dataclass
class Schedule:
    update_time: np.ndarray
    offsets: np.ndarray
    learner: np.ndarray
    ts: np.ndarray
    clock: np.ndarray
    sample_start: np.ndarray
    t_start: np.ndarray
    t_push: np.ndarray
    meta: dict = field(default_factory=dict)

    @classmethod
    def collect(cls, updates: Iterable[Update], meta: dict | None = None) -> Schedule:
        """Materialize a (streamed) sequence of updates."""
        times: list[float] = []
        counts: list[int] = []
        rows: list[Contribution] = []
        for u in updates:
            times.append(u.time)
            counts.append(len(u.contributions))
            rows.extend(u.contributions)
        cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in _COLUMNS]
        arrays = {k: np.asarray(c, dtype=dt) for (k, dt), c in zip(_COLUMNS.items(), cols, strict=True)}
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(np.asarray(times, dtype=np.float64), offsets, meta=dict(meta or {}), **arrays)

    @property
    def num_updates(self) -> int:
        return len(self.update_time)

    @property
    def num_gradients(self) -> int:
        return len(self.learner)

    @property
    def update_index(self) -> np.ndarray:
        """For every gradient row, the index of the update that applied it."""
        return np.repeat(np.arange(self.num_updates, dtype=np.int64), np.diff(self.offsets))

    @property
    def staleness(self) -> np.ndarray:
        """σ of every gradient (Rudra §3.1)."""
        return self.update_index - self.ts

    def rows(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def __iter__(self) -> Iterator[Update]:
        for i in range(self.num_updates):
            s = self.rows(i)
            contribs = [
                Contribution(*r)
                for r in zip(
                    self.learner[s].tolist(),
                    self.ts[s].tolist(),
                    self.clock[s].tolist(),
                    self.sample_start[s].tolist(),
                    self.t_start[s].tolist(),
                    self.t_push[s].tolist(),
                    strict=True,
                )
            ]
            yield Update(i, float(self.update_time[i]), contribs)

    def _arrays(self) -> dict[str, Any]:  # np.ndarray values (Any: numpy's savez stubs take **kwds as its flags)
        return {"update_time": self.update_time, "offsets": self.offsets, **{k: getattr(self, k) for k in _COLUMNS}}

    def sha256(self) -> str:
        """Hash of the arrays (canonical dtypes, little endian) and the metadata."""
        h = hashlib.sha256()
        for k, a in self._arrays().items():
            h.update(k.encode())
            h.update(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes())
        h.update(json.dumps(self.meta, sort_keys=True, default=str).encode())
        return h.hexdigest()

    def save(self, path: str | Path) -> Path:
        from psbench.files import write_atomic

        meta = np.asarray(json.dumps(self.meta, sort_keys=True, default=str))
        return write_atomic(path, lambda fh: np.savez_compressed(fh, meta=meta, **self._arrays()))

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return cls(meta=meta, **{k: z[k] for k in ("update_time", "offsets", *_COLUMNS)})
