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

The kernels (:mod:`ternarize`) work on rows — one learner's gradient per row — so the pipeline
ternarizes all learners of an update at once (:meth:`TernGrad.encode`); P(b = 1) = |f(g)|/s is
drawn with 16-bit thresholds, i.e. quantized to multiples of 2⁻¹⁶ (bias ≤ 2⁻¹⁷·s per element,
none at g = 0 or |g| = s; see :mod:`ternarize`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from psbench.compression import packing, ternarize
from psbench.compression.base import FP32, Codec, Payload
from psbench.errors import require

WIRES = ("2bit", "base3")


class TernGrad(Codec):
    name = "terngrad"
    unbiased = True  # with respect to the clipped gradient f(g) of Eq (9); exactly so with clip=None
    summable = True  # with a shared scaler

    def __init__(self, clip: float | None = 2.5, wire: str = "2bit") -> None:
        ok = clip is None or (
            isinstance(clip, int | float) and not isinstance(clip, bool) and math.isfinite(clip) and clip > 0
        )
        require(ok, "compression.clip", clip, "null (no clipping) or a number c > 0 (clip to c·std)")
        require(wire in WIRES, "compression.wire", wire, "one of " + ", ".join(WIRES))
        self.clip, self.wire = (None if clip is None else float(clip)), wire

    def bound(self, g: torch.Tensor) -> float:
        """c·σ of Eq (9) (σ the population standard deviation of the tensor), ∞ without clipping."""
        return float(self.offers(ternarize.as_rows(g))[1][0])

    def clipped(self, g: torch.Tensor) -> torch.Tensor:
        """Eq (9): clamp each element to ±c·σ."""
        g = g.detach().reshape(-1).to(torch.float32)
        b = self.bound(g)
        return g if math.isinf(b) else g.clamp(-b, b)

    def offers(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``x`` (one learner's flat gradient each): (s = max|f(g)| = min(max|g|, c·σ), c·σ).

        One blocked pass (:func:`ternarize.moments`); s is the learner's offer in scaler sharing (§3.1).
        """
        n = x.shape[1]
        total, squares, lo, hi = ternarize.moments(x)
        if self.clip is None or n < 2:
            bound = np.full(x.shape[0], np.inf)
        else:
            mean = total / n
            bound = self.clip * np.sqrt(np.maximum(0.0, squares / n - mean * mean))
        return np.minimum(np.maximum(-lo, hi), bound), bound

    def scaler(self, g: torch.Tensor) -> float:
        """This learner's scaler s = max|f(g)| = min(max|g|, c·σ) — its offer in the scaler-sharing negotiation."""
        return float(self.offers(ternarize.as_rows(g))[0][0])

    def encode(
        self, x: np.ndarray, generators, scaler: float | None = None, share: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(packed codes, scalers) of the rows of ``x``, row j drawn from ``generators[j]``.

        Eq (1)–(2) with P(b = 1) = |f(g)|/s quantized to 2⁻¹⁶ (:mod:`ternarize`); s = ``scaler`` if
        given, else with ``share`` the max of the rows' offers (§3.1 scaler sharing among the rows),
        else each row's own max|f(g)|.
        """
        s, bound = self.offers(x)
        if scaler is not None or share:
            s = np.full_like(s, float(scaler) if scaler is not None else s.max())
        return ternarize.encode(x, s, bound, generators, self.wire), s

    def compress(self, g, key="", generator=None, scaler: float | None = None, **kwargs) -> Payload:
        packed, s = self.encode(ternarize.as_rows(g), [generator], scaler)
        return Payload({"codes": torch.from_numpy(packed[0]), "scaler": torch.tensor(s, dtype=torch.float32)}, g.shape)

    def ternary(self, payload: Payload) -> torch.Tensor:
        """The ternary vector sign(g)∘b ∈ {−1, 0, 1} (int8)."""
        t = ternarize.ternary(payload.fields["codes"].numpy()[None], payload.numel, self.wire)
        return torch.from_numpy(t).view(payload.shape)

    def decompress(self, payload: Payload) -> torch.Tensor:
        """s·sign(g)∘b through a 256-entry table of each byte's values times s."""
        f = payload.fields
        return ternarize.decode(f["codes"].numpy(), payload.numel, float(f["scaler"]), self.wire).view(payload.shape)

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
        return Payload(
            {"sum": packed, "scaler": torch.tensor([scaler], dtype=torch.float32)}, total.shape, {"learners": learners}
        )

    def decode_pull(self, payload: Payload) -> torch.Tensor:
        """Integer sum Σ_l t_l (int64) of a pull message."""
        n, N = payload.numel, payload.meta["learners"]
        f = payload.fields["sum"]
        t = (
            packing.unpack3(f, n).to(torch.int64)
            if N == 1 and self.wire == "base3"
            else packing.unpack_bits(f, n, self.pull_bits(N))
        )
        return (t - N).view(payload.shape)

    def expected_pull_bytes(self, numel: int, learners: int) -> int:
        if learners == 1:
            return self.expected_bytes(numel)
        return packing.packed_bytes(numel, self.pull_bits(learners)) + FP32
