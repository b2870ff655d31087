"""The global sample stream: which training samples a gradient reads (Rudra §3.2's data server, one seeded stream).

Position ``p`` of the stream is training sample ``perm_e[p mod N]`` of epoch ``e = p // N``, with
``perm_e`` a permutation seeded by (seed, e). A schedule row's ``sample_start`` addresses it, so the
Lightning strategy and the dist engine's learners read the same samples. Torch only (no Lightning).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


class SampleStream:
    """Maps global sample-stream positions to dataset indices, one seeded permutation per epoch."""

    def __init__(self, num_samples: int, seed: int) -> None:
        self.n, self.seed = num_samples, seed
        self._perms: dict[int, torch.Tensor] = {}

    def _perm(self, epoch: int) -> torch.Tensor:
        perm = self._perms.get(epoch)
        if perm is None:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            perm = self._perms[epoch] = torch.randperm(self.n, generator=g)
            self._perms.pop(epoch - 2, None)  # the stream only moves forward
        return perm

    def indices(self, start: int, count: int) -> torch.Tensor:
        e0, e1 = start // self.n, (start + count - 1) // self.n
        if e0 == e1:
            off = start - e0 * self.n
            return self._perm(e0)[off : off + count]
        return self.rows([start], count)

    def rows(self, starts: Sequence[int] | np.ndarray, count: int) -> torch.Tensor:
        """The ``count`` samples from each of ``starts``, row-major: ``indices`` of every start, concatenated, in a
        few tensor ops (one index of one epoch's permutation unless the rows cross an epoch's end)."""
        pos = torch.from_numpy(np.asarray(starts, dtype=np.int64)).unsqueeze(1) + torch.arange(count)
        pos = pos.reshape(-1)
        if not len(pos):
            return pos
        e0, e1 = int(min(starts)) // self.n, (int(max(starts)) + count - 1) // self.n
        if e0 == e1:
            return self._perm(e0)[pos - e0 * self.n]
        epoch, out = pos // self.n, torch.empty_like(pos)
        for e in range(e0, e1 + 1):
            here = epoch == e
            out[here] = self._perm(e)[pos[here] - e * self.n]
        return out
