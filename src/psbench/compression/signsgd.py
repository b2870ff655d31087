"""``signsgd``: one bit per element (Seide et al. 2014 "1-bit SGD"; Karimireddy et al. 2019 EF-signSGD).

``scale: l1`` reconstructs sign(g)·‖g‖₁/n (one float32 scaler); ``scale: seide`` reconstructs each bit
as the mean of the elements that map to it (two float32 scalers, 1-bit SGD's reconstruction,
here per tensor instead of per column). Used with error feedback (its config turns it on).
"""

from __future__ import annotations

import torch

from psbench.compression import packing
from psbench.compression.base import FP32, Codec, Payload
from psbench.errors import require

SCALES = ("l1", "seide")


class SignSGD(Codec):
    name = "signsgd"
    unbiased = False
    summable = False

    def __init__(self, scale: str = "l1") -> None:
        require(scale in SCALES, "compression.scale", scale, "one of " + ", ".join(SCALES))
        self.scale = scale

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        v = g.detach().reshape(-1).to(torch.float32)
        neg = v < 0
        if self.scale == "l1":
            scalers = v.abs().mean().reshape(1)
        else:
            n_neg = neg.sum()
            pos_mean = torch.where(neg, 0.0, v).sum() / (v.numel() - n_neg).clamp(min=1)
            neg_mean = torch.where(neg, v, 0.0).sum() / n_neg.clamp(min=1)
            scalers = torch.stack([pos_mean, neg_mean])
        return Payload({"signs": packing.pack_signs(neg), "scalers": scalers}, g.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        neg = packing.unpack_signs(payload.fields["signs"], payload.numel)
        s = payload.fields["scalers"]
        out = torch.where(neg, -s[0], s[0]) if self.scale == "l1" else torch.where(neg, s[1], s[0])
        return out.view(payload.shape)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return packing.packed_bytes(numel, 1) + FP32 * (1 if self.scale == "l1" else 2)
