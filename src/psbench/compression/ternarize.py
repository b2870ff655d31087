"""The TernGrad kernels, blocked and batched over learners: moments, ternarization to wire bytes, table decode.

numpy/torch element-wise ops are not fused, so a naive ternarization makes a dozen passes over the
whole gradient through DRAM, each with a freshly page-faulted temporary. Here every pass runs over
one block of about :data:`BLOCK` elements whose temporaries (preallocated per thread) stay in L2;
only the gradient is read and the packed bytes written at memory speed. Every kernel takes a 2-D
array, one row per learner (the N gradients of one update and one tensor), so a PS update costs a
few calls per tensor rather than a few per learner; a single gradient is the one-row case, and a
row's result does not depend on the other rows. ``benchmarks/bench_codecs.py`` times it.

**The Bernoulli draw (TernGrad Eq 2).** b_k = 1 iff r_k + ½ < 2¹⁶·|f(g_k)|/s with r_k a uniform
16-bit integer: P(b_k = 1) = |f(g_k)|/s *rounded to the nearest multiple of 2⁻¹⁶* (ties down), so
|E[g̃_k] − f(g_k)| ≤ 2⁻¹⁷·s per element (≤ 2⁻¹⁷·c·σ with clipping, far below the ternary noise
√(|g|(s − |g|)) of Eq 7 except for |g| < 2⁻³²·s), exactly 0 at g_k = 0 and exactly ±s at |g_k| = s.
(Float32 uniforms quantize the probability too, to 2⁻²⁴, at twice the random bits.) The r_k are the
16-bit lanes, in element order, of the raw 64-bit words of a numpy SFC64 stream seeded by one draw
from the row's ``torch.Generator`` per call (SFC64 makes the bits twice as fast as torch's MT19937;
the torch generator stays the only state), so the draws depend neither on the block size nor on the
other rows.

**Wire formats** (those of :mod:`packing`): ``2bit`` byte i = Σ_k c_{4i+k}·4ᵏ with c = b + 2·(b ∧ g < 0)
∈ {0: 0, 1: +s, 3: −s}; ``base3`` byte i = Σ_k d_{5i+k}·3ᵏ with d = 1 + sign(g)·b ∈ {0, 1, 2}.
Decoding looks each byte up in a 256-entry table of its 4 (or 5) ternary values.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import torch

#: elements per block (all rows together): a multiple of 20, temporaries ~1 MB, within L2
BLOCK = 5 * 2**14
#: bits of the Bernoulli threshold r_k
PROB_BITS = 16
PER_BYTE = {"2bit": 4, "base3": 5}
_byte = np.arange(256)
#: byte → its 4 ternary values (2-bit codes, element k in bits 2k…2k+1; code 2 never occurs)
TABLE_2BIT = np.array([0, 1, 0, -1], dtype=np.int8)[(_byte[:, None] >> (2 * np.arange(4))) & 3]
#: byte → its 5 ternary values (base-3 digits minus 1; bytes > 242 never occur)
TABLE_BASE3 = ((_byte[:, None] // 3 ** np.arange(5)) % 3 - 1).astype(np.int8)
TABLES = {"2bit": TABLE_2BIT, "base3": TABLE_BASE3}


class _Scratch(threading.local):
    """Per-thread block temporaries (learners may compress in threads)."""

    def __init__(self) -> None:
        self.size = 0
        self.fit(BLOCK)

    def fit(self, size: int) -> None:
        """At least ``size`` elements each (more than :data:`BLOCK` only for thousands of rows)."""
        if size > self.size:
            self.size = size
            self.r = np.empty(size, np.uint16)  # the rows' random lanes
            self.a = np.empty(size, np.float32)
            self.b = np.empty(size, np.bool_)
            self.neg = np.empty(size, np.bool_)
            self.code = np.empty(size, np.uint8)


_scratch = _Scratch()


def as_rows(g: torch.Tensor, rows: int = 1) -> np.ndarray:
    """``g`` as a C-contiguous float32 CPU array of ``rows`` rows (a copy only where it is not one already)."""
    return g.detach().reshape(rows, -1).to(device="cpu", dtype=torch.float32).contiguous().numpy()


def moments(x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row: (Σx, Σx², min x, max x) in float64; each block of :data:`BLOCK` columns reduced in float32."""
    r = x.shape[0]
    s, ss = np.zeros(r), np.zeros(r)
    lo, hi = np.full(r, np.inf), np.full(r, -np.inf)
    for i in range(0, x.shape[1], BLOCK):
        c = x[:, i : i + BLOCK]
        s += c.sum(axis=1)
        ss += [np.dot(row, row) for row in c]
        np.minimum(lo, c.min(axis=1), out=lo)
        np.maximum(hi, c.max(axis=1), out=hi)
    return s, ss, lo, hi


def encode(
    x: np.ndarray, s: np.ndarray, bound: np.ndarray, generators: Sequence[torch.Generator | None], wire: str
) -> np.ndarray:
    """Eq (1)–(2) of each row straight to wire bytes: ternarize f(x) = clamp(x, ±bound) with scaler s ≥ 0.

    ``s``, ``bound``: per row; ``generators[j]`` draws row j. A row with s = 0 is all zeros.
    """
    per = PER_BYTE[wire]
    r, n = x.shape
    out = np.empty((r, -(-n // per)), np.uint8)
    s = np.asarray(s, np.float64)
    k = np.divide(2.0**PROB_BITS, s, out=np.zeros(r), where=s > 0)
    bound = np.broadcast_to(np.asarray(bound, np.float64), (r,))
    cut = bound < s  # Eq (9), only where it can change a draw (elsewhere an unclipped bound, inf · k = 0, was NaN)
    clip = np.full(r, np.inf)
    clip[cut] = bound[cut] * k[cut] - 0.5
    clips = bool(np.isfinite(clip).any())
    k, clip = k.astype(np.float32)[:, None], clip.astype(np.float32)[:, None]  # float32 ufunc loops
    streams = [np.random.SFC64(int(torch.randint(0, 2**63 - 1, (1,), generator=g))) for g in generators]
    step = max(20, BLOCK // r // 20 * 20)  # columns per block
    w = _scratch
    w.fit(r * step)
    views = None
    for i in range(0, n, step):
        c = x[:, i : i + step]
        m = c.shape[1]
        if views is None or m != views[0]:
            mw = -(-m // 4)  # 64-bit words = 4 uint16 lanes each
            mp = -(-m // 20) * 20
            views = (
                m,
                mw,
                w.r[: r * 4 * mw].reshape(r, -1),
                *(t[: r * m].reshape(r, m) for t in (w.a, w.b, w.neg)),
                w.code[: r * mp].reshape(r, mp),
                mp,
            )
        _, mw, u, a, b, neg, code, mp = views
        if r == 1:
            u = streams[0].random_raw(mw).view(np.uint16)[None]
        else:
            for j in range(r):
                u[j] = streams[j].random_raw(mw).view(np.uint16)
        u = u[:, :m]
        np.abs(c, out=a)
        a *= k
        a -= 0.5
        if clips:
            np.minimum(a, clip, out=a)
        np.less(u, a, out=b)  # b = 1 iff r + ½ < 2¹⁶·|f(x)|/s
        np.signbit(c, out=neg)
        neg &= b
        if m < mp:
            code[:, m:] = 0
        bc, nc = b.view(np.uint8), neg.view(np.uint8)
        if wire == "2bit":
            np.add(nc, nc, out=code[:, :m])
            code[:, :m] |= bc
            q = code.view(np.uint32)  # 4 codes per little-endian word, code j at bits 8j
            q = q | (q >> 6)
            q |= q >> 12
            e = -(-m // 4)
            out[:, i // 4 : i // 4 + e] = q[:, :e]  # the low byte: bits 2j…2j+1 hold code j
        else:
            np.add(bc, 1, out=code[:, :m])
            code[:, :m] -= nc
            code[:, :m] -= nc  # d = 1 + b − 2·(b ∧ g < 0)
            d = code.reshape(r, -1, 5)
            e = -(-m // 5)
            out[:, i // 5 : i // 5 + e] = (d[..., 0] + d[..., 1] * 3 + d[..., 2] * 9 + d[..., 3] * 27 + d[..., 4] * 81)[
                :, :e
            ]
    return out


def ternary(packed: np.ndarray, n: int, wire: str) -> np.ndarray:
    """The ternary values sign(g)∘b ∈ {−1, 0, 1} (int8) of each row of ``packed``, n per row."""
    table = TABLES[wire]
    r, nb = packed.shape
    out = np.empty((r, nb, table.shape[1]), np.int8)
    step = max(1, BLOCK // table.shape[1] // r)
    for i in range(0, nb, step):
        np.take(table, packed[:, i : i + step], axis=0, out=out[:, i : i + step])
    return out.reshape(r, -1)[:, :n]


def decode(packed: np.ndarray, n: int, s: float, wire: str) -> torch.Tensor:
    """s·sign(g)∘b of one row (float32): each byte looked up in the 256-entry table of its values times s."""
    table = TABLES[wire].astype(np.float32) * np.float32(s)
    per = table.shape[1]
    out = np.empty((packed.size, per), np.float32)
    step = BLOCK // per
    for i in range(0, packed.size, step):
        np.take(table, packed[i : i + step], axis=0, out=out[i : i + step])
    return torch.from_numpy(out.reshape(-1)[:n])
