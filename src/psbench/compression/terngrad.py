"""TernGrad (Wen et al. 2017): stochastic ternary gradients, exactly as published.

* Eq (1)–(2): g̃ = s·sign(g)∘b with P(b_k = 1) = |g_k|/s and s = max|g| — unbiased, E[g̃] = g (Eq 7).
* §3.3 layer-wise ternarizing: one scaler per tensor (the strategy hands weights and biases of each
  layer in separately); gradient clipping Eq (9) to c·σ (σ the population standard deviation of the
  tensor, c = 2.5; ``clip=None`` is "TernGrad-noclip" of Table 2), applied by each learner before
  ternarizing.
* §3.1 scaler sharing: every learner of an update computes its scaler ``scaler(g)``, the shared
  s = max over them is negotiated (2N float32 per tensor) and passed to ``compress(..., scaler=s)``;
  the sum of N ternary tensors then has at most 2N + 1 levels, and the PS can aggregate the codes
  directly (``summable``).
* §3.1 parameter localization: learners pull the aggregated integer codes Σ_l t_l ∈ [−N, N] and the
  shared scaler instead of fp32 weights (:meth:`encode_pull`), 32/log2(2N+1)× less than fp32.

Wire formats: ``2bit`` — codes {0: 0, 1: +s, 3: −s} (two's complement of the ternary value), 4 per
byte (16×); ``base3`` — trits t + 1 ∈ {0, 1, 2}, 5 per byte (1.6 bits, 20×; bound 32/log2 3 = 20.19×).
Each tensor's payload carries its float32 scaler.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from psbench.compression import packing
from psbench.compression.base import FP32, Codec, Payload
from psbench.errors import require

WIRES = ("2bit", "base3")


class TernGrad(Codec):
    name = "terngrad"
    unbiased = True  # with respect to the clipped gradient f(g) of Eq (9); exactly so with clip=None
    summable = True  # with a shared scaler

    def __init__(self, clip: float | None = 2.5, wire: str = "2bit") -> None:
        ok = clip is None or (isinstance(clip, int | float) and not isinstance(clip, bool)
                              and math.isfinite(clip) and clip > 0)
        require(ok, "compression.clip", clip, "null (no clipping) or a number c > 0 (clip to c·std)")
        require(wire in WIRES, "compression.wire", wire, "one of " + ", ".join(WIRES))
        self.clip, self.wire = (None if clip is None else float(clip)), wire

    def bound(self, g: torch.Tensor) -> float:
        """c·σ of Eq (9) (σ the population standard deviation of the tensor), ∞ without clipping."""
        n = g.numel()
        if self.clip is None or n < 2:
            return math.inf
        g = g.detach().reshape(-1).to(torch.float32)
        mean = float(g.sum()) / n
        var = max(0.0, float(torch.dot(g, g)) / n - mean * mean)  # one BLAS pass instead of torch.std's two
        return self.clip * math.sqrt(var)

    def clipped(self, g: torch.Tensor) -> torch.Tensor:
        """Eq (9): clamp each element to ±c·σ."""
        g = g.detach().reshape(-1).to(torch.float32)
        b = self.bound(g)
        return g if math.isinf(b) else g.clamp(-b, b)

    def scaler(self, g: torch.Tensor) -> float:
        """This learner's scaler s = max|f(g)| = min(max|g|, c·σ) — its offer in the scaler-sharing negotiation."""
        lo, hi = torch.aminmax(g.detach().reshape(-1).to(torch.float32))
        return min(max(-float(lo), float(hi)), self.bound(g))

    @staticmethod
    def uniform(n: int, generator: torch.Generator | None) -> torch.Tensor:
        """n float32 uniforms in [0, 1): one int64 drawn from ``generator`` seeds a numpy SFC64 stream.

        Deterministic in the torch generator's state; SFC64 is ~2.5× faster than torch's MT19937 here.
        """
        seed = int(torch.randint(0, 2**63 - 1, (1,), generator=generator))
        return torch.from_numpy(np.random.Generator(np.random.SFC64(seed)).random(n, dtype=np.float32))

    def codes(self, g: torch.Tensor, generator: torch.Generator | None = None,
              scaler: float | None = None) -> tuple[torch.Tensor, float]:
        """2-bit codes of Eq (1)–(2) (uint8: 0 → 0, 1 → +s, 3 → −s, i.e. the two's-complement of
        sign(g)∘b) and the scaler s used. b_k = 1 iff u_k·s < |f(g_k)|, u_k ~ U[0, 1)."""
        g = g.detach().reshape(-1).to(torch.float32)
        b = self.bound(g)
        if scaler is None:
            lo, hi = torch.aminmax(g)
            s = min(max(-float(lo), float(hi)), b)
        else:
            s = float(scaler)
        x = g.clamp(-b, b) if b < s else g  # with s = max|f(g)| ≤ c·σ, clipping cannot change a draw
        r = self.uniform(g.numel(), generator).mul_(s)
        up = x > r
        down = x < r.neg_()
        return (up | down).view(torch.uint8) | (down.view(torch.uint8) << 1), s

    def compress(self, g, key="", generator=None, scaler: float | None = None, **kwargs) -> Payload:
        c, s = self.codes(g, generator, scaler)
        if self.wire == "2bit":
            packed = packing.pack2(c)
        else:  # trits t + 1 ∈ {0, 1, 2}
            packed = packing.pack3(((c << 6).view(torch.int8) >> 6).add_(1).view(torch.uint8))
        return Payload({"codes": packed, "scaler": torch.tensor([s], dtype=torch.float32)}, g.shape)

    def ternary(self, payload: Payload) -> torch.Tensor:
        """The ternary vector sign(g)∘b ∈ {−1, 0, 1} (int8)."""
        f, n = payload.fields["codes"], payload.numel
        if self.wire == "2bit":  # sign-extend the 2-bit field
            t = (packing.unpack2(f, n) << 6).view(torch.int8) >> 6
        else:
            t = packing.unpack3(f, n).view(torch.int8) - 1
        return t.view(payload.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        return self.ternary(payload).to(torch.float32).mul_(payload.fields["scaler"])

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        per = 4 if self.wire == "2bit" else 5
        return math.ceil(numel / per) + FP32

    # -- parameter localization: the pull of the aggregated integer codes ---------------------------
    def pull_bits(self, learners: int) -> int:
        return packing.bits_for(2 * learners + 1)

    def encode_pull(self, total: torch.Tensor, scaler: float, learners: int) -> Payload:
        """Σ_l t_l ∈ [−N, N] (integers) and the shared scaler → the pull message of §3.1."""
        t = total.reshape(-1).to(torch.int64) + learners
        if learners == 1 and self.wire == "base3":
            packed = packing.pack3(t.to(torch.uint8))
        else:
            packed = packing.pack_bits(t, self.pull_bits(learners))
        return Payload({"sum": packed, "scaler": torch.tensor([scaler], dtype=torch.float32)}, total.shape,
                       {"learners": learners})

    def decode_pull(self, payload: Payload) -> torch.Tensor:
        """Integer sum Σ_l t_l (int64) of a pull message."""
        n, N = payload.numel, payload.meta["learners"]
        f = payload.fields["sum"]
        t = packing.unpack3(f, n).to(torch.int64) if N == 1 and self.wire == "base3" else \
            packing.unpack_bits(f, n, self.pull_bits(N))
        return (t - N).view(payload.shape)

    def expected_pull_bytes(self, numel: int, learners: int) -> int:
        if learners == 1:
            return self.expected_bytes(numel)
        return packing.packed_bytes(numel, self.pull_bits(learners)) + FP32
