"""``none``: float32 on the wire, 4 bytes per element (the uncompressed baseline)."""

from __future__ import annotations

import torch

from psbench.compression.base import FP32, Codec, Payload


class NoCompression(Codec):
    name = "none"
    unbiased = True
    summable = True

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        return Payload({"values": g.detach().reshape(-1).to(torch.float32, copy=True)}, g.shape)  # the send buffer

    def decompress(self, payload: Payload) -> torch.Tensor:
        return payload.fields["values"].view(payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return FP32 * numel
