"""Bit-level wire formats: the payload tensors *are* the serialized bytes (``uint8``), so their size is exact.

* 2-bit codes, 4 per byte (TernGrad §3.1, "using 2 bits ... 16×");
* base-3 trits, 5 per byte (3⁵ = 243 ≤ 256: 1.6 bits per trit, 20×; the bound is 32/log2 3 = 20.19×);
* fixed-width ``b``-bit fields, packed little-endian bit by bit (QSGD levels, sign bits, pulled integer sums).

Bytes are little-endian (the int32 word tricks of :func:`pack2` assume it, as on x86 and ARM).
Every function pads the last byte with zeros; the element count is agreed out of band (both sides know
the parameter shapes), so no length header goes on the wire.
"""

from __future__ import annotations

import math

import torch

_POW3 = torch.tensor([1, 3, 9, 27, 81], dtype=torch.uint8)
_TRITS = torch.stack([(torch.arange(256) // 3**k) % 3 for k in range(5)], 1).to(torch.uint8)  # byte -> 5 trits
_BITS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def _pad(codes: torch.Tensor, k: int) -> torch.Tensor:
    r = (-codes.numel()) % k
    return torch.cat([codes, codes.new_zeros(r)]) if r else codes


def pack2(codes: torch.Tensor) -> torch.Tensor:
    """Codes in {0, 1, 2, 3} (uint8) → ⌈n/4⌉ bytes; element 4i+k in bits 2k…2k+1 of byte i.

    Works on 4 codes at a time as one little-endian int32 word (byte k at bits 8k): ``w | w>>6 |
    w>>12 | w>>18`` gathers the four 2-bit fields into the low byte.
    """
    w = _pad(codes.reshape(-1).to(torch.uint8), 4).view(torch.int32)
    return ((w | (w >> 6) | (w >> 12) | (w >> 18)) & 0xFF).to(torch.uint8)


def unpack2(packed: torch.Tensor, n: int) -> torch.Tensor:
    w = packed.to(torch.int32)
    return ((w | (w << 6) | (w << 12) | (w << 18)) & 0x03030303).view(torch.uint8)[:n]


def pack3(codes: torch.Tensor) -> torch.Tensor:
    """Trits in {0, 1, 2} (uint8) → ⌈n/5⌉ bytes, c0 + 3c1 + 9c2 + 27c3 + 81c4 ≤ 242."""
    c = _pad(codes.reshape(-1), 5).view(-1, 5)
    return (c[:, 0] + c[:, 1] * 3 + c[:, 2] * 9 + c[:, 3] * 27 + c[:, 4] * 81).contiguous()


def unpack3(packed: torch.Tensor, n: int) -> torch.Tensor:
    return _TRITS[packed.long()].reshape(-1)[:n]


def bits_for(levels: int) -> int:
    """Bits of a fixed-width field that holds ``levels`` distinct values."""
    return max(1, math.ceil(math.log2(levels)))


def packed_bytes(n: int, bits: int) -> int:
    return (n * bits + 7) // 8


def pack_bits(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Non-negative integers < 2**bits → ⌈n·bits/8⌉ bytes (field i occupies bits i·b … i·b+b−1)."""
    if bits == 8:
        return values.reshape(-1).to(torch.uint8)
    if bits == 2:
        return pack2(values.reshape(-1).to(torch.uint8))
    if bits < 8:
        v = values.reshape(-1).to(torch.uint8)
        planes = ((v.unsqueeze(1) >> torch.arange(bits, dtype=torch.uint8)) & 1).reshape(-1)  # LSB first
    else:
        v = values.reshape(-1).to(torch.int64)
        planes = ((v.unsqueeze(1) >> torch.arange(bits)) & 1).to(torch.uint8).reshape(-1)
    return (_pad(planes, 8).view(-1, 8) * _BITS).sum(1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, n: int, bits: int) -> torch.Tensor:
    """Inverse of :func:`pack_bits`, as int64."""
    if bits == 8:
        return packed[:n].to(torch.int64)
    if bits == 2:
        return unpack2(packed, n).to(torch.int64)
    planes = ((packed.unsqueeze(1) & _BITS) != 0).reshape(-1)[: n * bits].view(n, bits)
    if bits < 8:
        return (planes.to(torch.uint8) << torch.arange(bits, dtype=torch.uint8)).sum(1, dtype=torch.uint8).long()
    return (planes.to(torch.int64) << torch.arange(bits)).sum(1)


def pack_signs(negative: torch.Tensor) -> torch.Tensor:
    """One bit per element (1 = negative), 8 per byte."""
    return (_pad(negative.reshape(-1).to(torch.uint8), 8).view(-1, 8) * _BITS).sum(1, dtype=torch.uint8)


def unpack_signs(packed: torch.Tensor, n: int) -> torch.Tensor:
    return ((packed.unsqueeze(1) & _BITS) != 0).reshape(-1)[:n]
