"""Compressed pushes on real processes: one learner's gradient as the exact bytes its codecs put on the wire.

Both sides build the same :class:`~psbench.compression.pipeline.LearnerCompression` from the run's
``compression`` options, parameter shapes and seed, so learner l compresses with exactly the codec
instance (error-feedback memory) and ``torch.Generator`` stream the simulator gives it. Codec sizes are
data-independent (:mod:`.base`), so a push is a fixed-size ``uint8`` buffer: every compressed tensor's
payload fields in parameter order, the float32 last layer where ``float_last_layer`` is set. The PS
learns the field layout once, by compressing zeros, and decodes a buffer back into the flat float32
gradient that it then weights and aggregates as it does uncompressed ones.

Not executed on real processes: scaler sharing across the c > 1 learners of an update (the update's
contributors are known only when they have pushed) and parameter localization (pulls carry fp32
weights); the config check (:func:`psbench.distributed.options.check_dist`) refuses the first, the summary
records the second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from psbench.compression.base import Payload


class GradientWire:
    """Encode a learner's gradient into its push bytes, and decode them at the PS."""

    def __init__(self, options: Mapping[str, Any], shapes: Mapping[str, torch.Size], seed: int) -> None:
        from psbench.compression.pipeline import LearnerCompression

        opts = dict(options)
        opts["share_scalers"] = False  # c = 1: the max over one learner is its own scaler
        self.comp = LearnerCompression(opts, shapes, seed)
        self.shapes = {k: torch.Size(v) for k, v in shapes.items()}
        self.sizes = [s.numel() for s in self.shapes.values()]
        self.decoder = self.comp.codec(-1)  # no learner's: learns the layout from zeros, then only decodes
        self.layout: dict[str, list[tuple[str, torch.dtype, torch.Size]]] = {}
        for n, shape in self.shapes.items():
            if n in self.comp.floats:
                continue
            p = self.decoder.compress(torch.zeros(shape), n, torch.Generator().manual_seed(0))
            self.layout[n] = [(k, t.dtype, t.shape) for k, t in p.fields.items()]
        self.push_bytes = sum(
            (
                4 * s.numel()
                if n in self.comp.floats
                else sum(torch.empty(0, dtype=d).element_size() * sh.numel() for _, d, sh in self.layout[n])
            )
            for n, s in self.shapes.items()
        )

    def encode(self, learner: int, grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Learner ``learner``'s push: its codec and generator, every tensor in parameter order."""
        codec, gen = self.comp.codec(learner), self.comp.generators[learner]
        parts = []
        for n, g in grads.items():
            if n in self.comp.floats:
                parts.append(g.detach().to(torch.float32).contiguous().reshape(-1).view(torch.uint8))
                continue
            p = codec.compress(g.detach(), n, gen)
            parts += [t.contiguous().reshape(-1).view(torch.uint8) for t in p.fields.values()]
        out = torch.cat(parts)
        assert out.numel() == self.push_bytes, (out.numel(), self.push_bytes)  # data-independent sizes
        return out

    def decode(self, buf: torch.Tensor) -> torch.Tensor:
        """The flat float32 gradient a push decodes to (what the simulator's pipeline applies for it)."""
        out, o = [], 0
        for n, s in self.shapes.items():
            if n in self.comp.floats:
                nb = 4 * s.numel()
                out.append(buf[o : o + nb].clone().view(torch.float32))  # clone: an aligned copy
                o += nb
                continue
            fields = {}
            for k, d, sh in self.layout[n]:
                nb = torch.empty(0, dtype=d).element_size() * sh.numel()
                fields[k] = buf[o : o + nb].clone().view(d).view(sh)
                o += nb
            out.append(self.decoder.decompress(Payload(fields, s)).reshape(-1).to(torch.float32))
        return torch.cat(out)
