"""``fp16``: IEEE half precision on the wire (2 bytes per element; Gupta et al. 2015, TernGrad §2)."""

from __future__ import annotations

import torch

from psbench.compression.base import Codec, Payload


class FP16(Codec):
    name = "fp16"
    unbiased = False  # round-to-nearest is deterministic
    summable = True

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        return Payload({"values": g.detach().reshape(-1).to(torch.float16)}, g.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        return payload.fields["values"].to(torch.float32).view(payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return 2 * numel
