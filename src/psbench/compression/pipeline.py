"""Per-learner compression inside the strategy: every arriving gradient is compressed on its own.

For one PS update with contributors l = 1…N (weights w_l/c of the learning-rate policy, Zhang Eq 2)
:meth:`LearnerCompression.aggregate` returns Σ_l (w_l/c)·decode(compress_l(g_l)) per parameter and
the exact push bytes. Each learner has its own codec instance (its error-feedback memory) and its own
``torch.Generator`` seeded from the run seed; both live here, keyed by learner, so they are part
of :meth:`state_dict`.

TernGrad options (§3.1, §4.2): ``share_scalers`` negotiates s = max_l s_l per tensor before
compressing (2N float32 per tensor: each learner's offer is counted in its push, the reply in its
pull); ``float_last_layer`` sends the last layer's weights and biases as float32;
``localize`` makes a pull carry the aggregated integer codes instead of fp32 weights.

Sizes are data-independent, so :meth:`push_bytes` / :meth:`pull_bytes` (analytic) feed the cost
model before training, and a test holds them equal to the measured payloads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from psbench.compression import build_codec, ternarize
from psbench.compression.base import FP32, Codec, learner_generator
from psbench.compression.error_feedback import ErrorFeedback
from psbench.compression.terngrad import TernGrad
from psbench.errors import require


def last_layer(names: list[str]) -> tuple[str, ...]:
    """Parameter names of the module that owns the last parameter (the classifier's weight and bias)."""
    prefix = names[-1].rpartition(".")[0]
    return tuple(n for n in names if n.rpartition(".")[0] == prefix)


class LearnerCompression:
    """Codec state per learner and the aggregation of one update's compressed gradients."""

    def __init__(self, options: Mapping[str, Any], shapes: Mapping[str, torch.Size], seed: int = 0) -> None:
        opts = dict(options)
        self.name = str(opts.get("name", "none"))
        for key in ("share_scalers", "float_last_layer", "localize"):
            v = opts.get(key, False)
            require(isinstance(v, bool), f"compression.{key}", v, "true or false")
        self.share = bool(opts.pop("share_scalers", False))
        self.float_last = bool(opts.pop("float_last_layer", False))
        self.localize = bool(opts.pop("localize", False))
        self.options, self.seed = opts, int(seed)
        self.shapes = {k: torch.Size(v) for k, v in shapes.items()}
        names = list(self.shapes)
        self.floats = set(last_layer(names)) if self.float_last and names else set()
        self.compressed = [n for n in names if n not in self.floats]
        self._proto = build_codec(self.name, opts)
        self.ternary = isinstance(getattr(self._proto, "inner", self._proto), TernGrad)
        self.share = self.share and self.ternary
        self.localize = self.localize and self.ternary
        self.codecs: dict[int, Codec] = {}
        self.generators: dict[int, torch.Generator] = {}
        self.bytes_pushed = 0

    def codec(self, learner: int) -> Codec:
        c = self.codecs.get(learner)
        if c is None:
            c = self.codecs[learner] = build_codec(self.name, self.options)
            self.generators[learner] = learner_generator(self.seed, learner)
        return c

    # -- sizes ---------------------------------------------------------------------------------
    def _numel(self, names) -> int:
        return sum(self.shapes[n].numel() for n in names)

    @property
    def model_bytes(self) -> int:
        return FP32 * self._numel(self.shapes)

    def push_bytes(self) -> int:
        """Bytes of one learner's push: payloads, float last layer, and its scaler offers when sharing."""
        b = sum(self._proto.expected_bytes(self.shapes[n].numel()) for n in self.compressed)
        return b + FP32 * self._numel(self.floats) + (FP32 * len(self.compressed) if self.share else 0)

    def pull_bytes(self, learners: int) -> int:
        """Bytes of one pull of one update's result with ``learners`` contributors.

        fp32 weights, or with ``localize`` the integer codes Σ t_l ∈ [−N, N] + shared scaler per tensor
        (+ the float last layer), plus the shared-scaler replies when sharing.
        """
        if not self.localize:
            return self.model_bytes
        tg = self._proto
        b = sum(tg.expected_pull_bytes(self.shapes[n].numel(), learners) for n in self.compressed)  # type: ignore[attr-defined]
        return b + FP32 * self._numel(self.floats) + (FP32 * len(self.compressed) if self.share else 0)

    # -- one update ------------------------------------------------------------------------------
    def aggregate(
        self, learners: list[int], weights: torch.Tensor, grads: Mapping[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], int]:
        """Σ_l w_l·decode(compress_l(g_l)) per parameter, and the push bytes of this update.

        ``grads[name]`` is stacked over the update's gradients, row j from ``learners[j]``.
        """
        codecs = [self.codec(l) for l in learners]
        gens = [self.generators[l] for l in learners]
        out: dict[str, torch.Tensor] = {}
        pushed = 0
        batched = self.ternary and not isinstance(self._proto, ErrorFeedback)
        for name, g in grads.items():
            if name in self.floats:
                out[name] = (weights.view(-1, *[1] * (g.dim() - 1)).to(g.dtype) * g).sum(0)
                pushed += FP32 * g[0].numel() * len(learners)
                continue
            if batched:
                out[name], b = self._ternary_sum(g, weights, gens)
                pushed += b
                continue
            scaler = None
            if self.share:  # §3.1: every learner offers its scaler, all use the max
                offers = [
                    c.scaler(c.corrected(g[j], name) if hasattr(c, "corrected") else g[j])  # type: ignore[attr-defined]
                    for j, c in enumerate(codecs)
                ]
                scaler = max(offers)
                pushed += FP32 * len(learners)
            acc = None
            for j, c in enumerate(codecs):
                kw = {"scaler": scaler} if scaler is not None else {}
                p = c.compress(g[j], name, gens[j], **kw)
                pushed += c.nbytes(p)
                d = c.decompress(p).to(g.dtype) * weights[j]
                acc = d if acc is None else acc + d
            out[name] = acc  # type: ignore[assignment]
        self.bytes_pushed += pushed
        return out, pushed

    def _ternary_sum(
        self, g: torch.Tensor, weights: torch.Tensor, gens: list[torch.Generator]
    ) -> tuple[torch.Tensor, int]:
        """TernGrad for all rows of ``g`` (one per learner) in one blocked pass: Σ_j w_j·s_j·t_j and push bytes.

        Row j draws from learner j's generator exactly as ``compress`` would, so the codes are those of
        the per-learner path. With equal coefficients w_j·s_j (shared scaler, equal weights) the sum is
        w·s·Σ_j t_j over the integers Σ_j t_j ∈ [−N, N] (what a localized pull carries): at most 2N + 1 levels.
        """
        tg: TernGrad = self._proto  # type: ignore[assignment]
        rows, n = g.shape[0], g[0].numel()
        packed, s = tg.encode(ternarize.as_rows(g, rows), gens, share=self.share)
        t = ternarize.ternary(packed, n, tg.wire)
        coef = s.astype(np.float32) * weights.detach().cpu().numpy().astype(np.float32)
        if (coef == coef[0]).all():
            total = torch.from_numpy(t.sum(axis=0, dtype=np.int32)).to(g.dtype) * float(coef[0])
        else:
            total = torch.from_numpy(coef) @ torch.from_numpy(t).to(torch.float32)
        pushed = rows * (packed.shape[1] + FP32 + (FP32 if self.share else 0))  # codes, scaler, the offer
        return total.to(g.dtype).view(g.shape[1:]), pushed

    def state_dict(self) -> dict:
        return {
            "codecs": {l: c.state_dict() for l, c in self.codecs.items()},
            "generators": {l: g.get_state() for l, g in self.generators.items()},
            "bytes_pushed": self.bytes_pushed,
        }

    def load_state_dict(self, state: dict) -> None:
        for l, s in state.get("codecs", {}).items():
            self.codec(int(l)).load_state_dict(s)
        for l, s in state.get("generators", {}).items():
            self.codec(int(l))
            self.generators[int(l)].set_state(s)
        self.bytes_pushed = int(state.get("bytes_pushed", 0))
