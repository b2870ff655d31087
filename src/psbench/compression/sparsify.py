"""``topk`` and ``randomk`` sparsification (Aji & Heafield 2017, TernGrad §2; Stich et al. 2018).

Both keep k = ⌈ratio·n⌉ elements (at least one) and are meant to run inside
:class:`~psbench.compression.error_feedback.ErrorFeedback` (their config files turn it on).
``topk`` sends int32 indices + float32 values; ``randomk`` sends an int64 seed + float32 values,
the receiver regenerating the same random index set from the seed.
"""

from __future__ import annotations

import math

import torch

from psbench.compression.base import FP32, Codec, Payload
from psbench.errors import require


def _check_ratio(k: float) -> float:
    ok = isinstance(k, int | float) and not isinstance(k, bool) and math.isfinite(k) and 0 < k <= 1
    require(ok, "compression.k", k, "a fraction in (0, 1]")
    return float(k)


class _Sparse(Codec):
    unbiased = False
    summable = False

    def __init__(self, k: float = 0.01) -> None:
        self.k = _check_ratio(k)

    def count(self, numel: int) -> int:
        return max(1, min(numel, math.ceil(self.k * numel)))

    def _scatter(self, idx: torch.Tensor, values: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        out = torch.zeros(shape.numel(), dtype=torch.float32)
        out[idx.long()] = values
        return out.view(shape)


class TopK(_Sparse):
    name = "topk"

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        v = g.detach().reshape(-1).to(torch.float32)
        idx = v.abs().topk(self.count(v.numel()), sorted=False).indices
        return Payload({"indices": idx.to(torch.int32), "values": v[idx]}, g.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        return self._scatter(payload.fields["indices"], payload.fields["values"], payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return (4 + FP32) * self.count(numel)


class RandomK(_Sparse):
    name = "randomk"

    @staticmethod
    def _indices(seed: int, numel: int, k: int) -> torch.Tensor:
        return torch.randperm(numel, generator=torch.Generator().manual_seed(seed))[:k]

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        v = g.detach().reshape(-1).to(torch.float32)
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        idx = self._indices(seed, v.numel(), self.count(v.numel()))
        return Payload({"seed": torch.tensor([seed], dtype=torch.int64), "values": v[idx]}, g.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        n = payload.numel
        idx = self._indices(int(payload.fields["seed"]), n, self.count(n))
        return self._scatter(idx, payload.fields["values"], payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return 8 + FP32 * self.count(numel)
