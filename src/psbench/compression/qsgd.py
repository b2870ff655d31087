"""``qsgd``: stochastic quantization to ``levels`` levels per bucket (Alistarh/Tomioka et al., TernGrad §2).

Each bucket v of ``bucket`` elements is sent as its norm ‖v‖₂ (float32) and, per element, the signed
level ℓ ∈ {−s … s} with |v_k|/‖v‖·s rounded up with probability equal to its fractional part, so
E[ℓ·‖v‖/s] = v_k (unbiased). Levels use a fixed-width field of ⌈log2(2s+1)⌉ bits (not QSGD's Elias
code), so the message size is data-independent, as the simulator needs.
"""

from __future__ import annotations

import math

import torch

from psbench.compression import packing
from psbench.compression.base import FP32, Codec, Payload
from psbench.errors import require


class QSGD(Codec):
    name = "qsgd"
    unbiased = True
    summable = False

    def __init__(self, levels: int = 4, bucket: int = 512) -> None:
        require(
            isinstance(levels, int) and not isinstance(levels, bool) and levels >= 1,
            "compression.levels",
            levels,
            "an integer >= 1",
        )
        require(
            isinstance(bucket, int) and not isinstance(bucket, bool) and bucket >= 1,
            "compression.bucket",
            bucket,
            "an integer >= 1",
        )
        self.levels, self.bucket = levels, bucket
        self.bits = packing.bits_for(2 * levels + 1)

    def _buckets(self, g: torch.Tensor) -> torch.Tensor:
        v = g.detach().reshape(-1).to(torch.float32)
        r = (-v.numel()) % self.bucket
        return (torch.cat([v, v.new_zeros(r)]) if r else v).view(-1, self.bucket)

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        v = self._buckets(g)
        norms = torch.linalg.vector_norm(v, dim=1, keepdim=True)
        x = v.abs() / torch.where(norms > 0, norms, 1.0) * self.levels
        low = x.floor()
        lvl = low + (torch.rand(x.shape, generator=generator) < (x - low))
        signed = torch.where(v < 0, -lvl, lvl).to(torch.int64).reshape(-1)[: g.numel()] + self.levels
        return Payload({"levels": packing.pack_bits(signed, self.bits), "norms": norms.reshape(-1)}, g.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        n = payload.numel
        lvl = packing.unpack_bits(payload.fields["levels"], n, self.bits) - self.levels
        scale = (payload.fields["norms"] / self.levels).repeat_interleave(self.bucket)[:n]
        return (lvl.to(torch.float32) * scale).view(payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return packing.packed_bytes(numel, self.bits) + FP32 * math.ceil(numel / self.bucket)

    def variance(self, g: torch.Tensor) -> torch.Tensor:
        """Per-element variance of one draw, (‖v‖/s)²·f(1−f) with f the fractional level."""
        v = self._buckets(g)
        norms = torch.linalg.vector_norm(v, dim=1, keepdim=True)
        x = v.abs() / torch.where(norms > 0, norms, 1.0) * self.levels
        f = x - x.floor()
        return ((norms / self.levels) ** 2 * f * (1 - f)).reshape(-1)[: g.numel()].view(g.shape)
