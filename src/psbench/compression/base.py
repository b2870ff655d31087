"""The codec interface: what one learner puts on the wire for one gradient tensor (TernGrad §3.3).

A codec turns one tensor (one layer's weights or biases — TernGrad §3.3 ternarizes them separately)
into a :class:`Payload` whose tensors *are* the serialized message: packed ``uint8`` codes, ``float32``
scalers, ``int32`` indices. :meth:`Codec.nbytes` is therefore exact, and :meth:`Codec.expected_bytes`
(an analytic formula of the element count) is held equal to it by the tests. Every codec in
psbench has data-independent sizes, which is what lets the simulator schedule before training.

Randomness comes only from the ``torch.Generator`` passed in (one per learner, seeded from the
run seed — :func:`learner_generator`), never from the global RNG.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

FP32 = 4


@dataclass
class Payload:
    """One compressed tensor: wire fields plus the shape both sides agreed on at start-up (not sent)."""

    fields: dict[str, torch.Tensor]
    shape: torch.Size
    meta: dict = field(default_factory=dict)  # sender-side facts for tests/aggregation; never on the wire

    @property
    def numel(self) -> int:
        return self.shape.numel()

    def to_bytes(self) -> bytes:
        """The serialized message: the fields' raw bytes in insertion order."""
        return b"".join(t.contiguous().view(torch.uint8).numpy().tobytes() for t in self.fields.values())


class Codec:
    """Base class: ``compress(g, key, generator) → payload``, ``decompress(payload) → tensor``.

    ``key`` names the tensor (a parameter name) for stateful codecs; ``unbiased`` says
    E[decompress(compress(g))] = g; ``summable`` says payloads of different learners can be
    added in the compressed domain (the PS can aggregate without decoding).
    """

    name = "codec"
    unbiased = False
    summable = False

    def compress(self, g: torch.Tensor, key: str = "", generator: torch.Generator | None = None, **kwargs) -> Payload:
        raise NotImplementedError

    def decompress(self, payload: Payload) -> torch.Tensor:
        raise NotImplementedError

    def nbytes(self, payload: Payload) -> int:
        """Exact size of the serialized payload."""
        return sum(t.numel() * t.element_size() for t in payload.fields.values())

    def expected_bytes(self, numel: int, learners: int = 1) -> int:
        """Push payload bytes for a tensor of ``numel`` elements (``learners``: contributors of the update)."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def learner_generator(seed: int, learner: int) -> torch.Generator:
    """The codec RNG of one learner: independent streams per learner, a pure function of the run seed."""
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + 7919 * (learner + 1)) % (2**63 - 1))
