"""Error feedback around any codec (Seide et al. 2014; Karimireddy et al. 2019).

The learner compresses p = g + m (its gradient plus the memory of what it failed to send so far)
and keeps m ← p − decode(compress(p)), one memory per tensor ``key``; the wrapper lives with the
learner (psbench keeps one per learner in the strategy). The memory is held in float64: then
g + m_before = decoded + m_after holds bit-exactly in float64 as long as the values involved span
less than 2⁵³ of the finest float32 grid in play (|g_k| > 2⁻³⁰·max|p|, i.e. every case but
denormal-scale elements) — a test checks the identity with ``torch.equal``.
"""

from __future__ import annotations

import torch

from psbench.compression.base import Codec, Payload


class ErrorFeedback(Codec):
    unbiased = False

    def __init__(self, inner: Codec, dtype: torch.dtype = torch.float64) -> None:
        self.inner, self.dtype = inner, dtype
        self.name = f"{inner.name}+ef"
        self.summable = inner.summable
        self.memory: dict[str, torch.Tensor] = {}

    def corrected(self, g: torch.Tensor, key: str = "") -> torch.Tensor:
        """p = g + m in the memory's precision (what will be compressed)."""
        p = g.detach().to(self.dtype)
        m = self.memory.get(key)
        return p if m is None else p + m

    def compress(self, g, key="", generator=None, **kwargs) -> Payload:
        p = self.corrected(g, key)
        payload = self.inner.compress(p.to(g.dtype), key, generator, **kwargs)
        decoded = self.inner.decompress(payload)
        self.memory[key] = p - decoded.to(self.dtype)
        payload.meta["decoded"] = decoded  # sender-side cache: the receiver runs decompress() itself
        return payload

    def decompress(self, payload: Payload) -> torch.Tensor:
        d = payload.meta.get("decoded")
        return d if d is not None else self.inner.decompress(payload)

    def nbytes(self, payload: Payload) -> int:
        return self.inner.nbytes(payload)

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        return self.inner.expected_bytes(numel, learners)

    def __getattr__(self, name: str):  # scaler(), expected_pull_bytes(), ... of the inner codec
        if name in ("inner", "memory", "dtype"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def state_dict(self) -> dict:
        return {"memory": {k: v.clone() for k, v in self.memory.items()}, "inner": self.inner.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.memory = {k: v.clone() for k, v in state.get("memory", {}).items()}
        self.inner.load_state_dict(state.get("inner", {}))
