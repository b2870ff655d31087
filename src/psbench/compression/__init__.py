"""Gradient codecs with exact bytes on the wire (DESIGN §4; TernGrad; the usual baselines).

One module per codec (:mod:`none`, :mod:`fp16`, :mod:`qsgd`, :mod:`sparsify` — topk/randomk —,
:mod:`signsgd`, :mod:`terngrad`), :mod:`error_feedback` as a wrapper around any of them,
:mod:`pipeline` applying them per learner and per tensor inside the strategy, and
:mod:`perf_model`, TernGrad's Appendix B performance model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.compression.base import Codec, Payload, learner_generator
from psbench.compression.error_feedback import ErrorFeedback
from psbench.compression.fp16 import FP16
from psbench.compression.none import NoCompression
from psbench.compression.options import CODEC_KEYS, COMPRESSION, COMPRESSIONS, PIPELINE_KEYS
from psbench.compression.qsgd import QSGD
from psbench.compression.signsgd import SignSGD
from psbench.compression.sparsify import RandomK, TopK
from psbench.compression.terngrad import TernGrad
from psbench.errors import require
from psbench.schema import check_keys

CODECS: dict[str, type[Codec]] = {
    "none": NoCompression, "fp16": FP16, "qsgd": QSGD, "topk": TopK, "randomk": RandomK,
    "signsgd": SignSGD, "terngrad": TernGrad,
}


def allowed_keys(name: str) -> tuple[str, ...]:
    """The keys of ``compression=<name>`` (:data:`psbench.compression.options.COMPRESSION`)."""
    return COMPRESSION.keys(name)


def build_codec(name: str, options: Mapping[str, Any] | None = None) -> Codec:
    """A codec from its config-group options; ``error_feedback: true`` wraps it in :class:`ErrorFeedback`."""
    require(name in CODECS, "compression.name", name, "one of " + ", ".join(COMPRESSIONS))
    opts = dict(options or {})
    opts.pop("name", None)
    check_keys("compression", opts, COMPRESSION.options[name], f"compression={name}", partial=True)
    ef = opts.get("error_feedback", False)
    codec = CODECS[name](**{k: opts[k] for k in CODEC_KEYS[name] if k in opts})
    return ErrorFeedback(codec) if ef else codec


__all__ = [
    "CODECS",
    "CODEC_KEYS",
    "COMPRESSIONS",
    "FP16",
    "PIPELINE_KEYS",
    "QSGD",
    "Codec",
    "ErrorFeedback",
    "NoCompression",
    "Payload",
    "RandomK",
    "SignSGD",
    "TernGrad",
    "TopK",
    "allowed_keys",
    "build_codec",
    "learner_generator",
]
