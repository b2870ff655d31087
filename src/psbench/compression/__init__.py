"""Gradient codecs with exact bytes on the wire (TernGrad §3; the usual baselines).

One module per codec (:mod:`none`, :mod:`fp16`, :mod:`qsgd`, :mod:`sparsify` — topk/randomk —,
:mod:`signsgd`, :mod:`terngrad`), :mod:`error_feedback` as a wrapper around any of them,
:mod:`pipeline` applying them per learner and per tensor inside the strategy, and
:mod:`perf_model`, TernGrad's Appendix B performance model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from psbench.compression.options import CODEC_KEYS, COMPRESSION, COMPRESSIONS, PIPELINE_KEYS
from psbench.errors import require
from psbench.lazy import lazy
from psbench.schema import check_keys

if TYPE_CHECKING:
    from psbench.compression.base import Codec

# imported on first use (torch): the torch-free psbench.compression.options imports without it
_CLASSES = {
    "Codec": "psbench.compression.base",
    "Payload": "psbench.compression.base",
    "learner_generator": "psbench.compression.base",
    "ErrorFeedback": "psbench.compression.error_feedback",
    "FP16": "psbench.compression.fp16",
    "NoCompression": "psbench.compression.none",
    "QSGD": "psbench.compression.qsgd",
    "SignSGD": "psbench.compression.signsgd",
    "RandomK": "psbench.compression.sparsify",
    "TopK": "psbench.compression.sparsify",
    "TernGrad": "psbench.compression.terngrad",
}
_lazy = lazy(__name__, _CLASSES)
#: codec name -> its class name
_CODEC_CLASSES = {
    "none": "NoCompression",
    "fp16": "FP16",
    "qsgd": "QSGD",
    "topk": "TopK",
    "randomk": "RandomK",
    "signsgd": "SignSGD",
    "terngrad": "TernGrad",
}


def __getattr__(name: str) -> Any:
    if name == "CODECS":  # codec name -> class
        return {codec: _lazy(cls) for codec, cls in _CODEC_CLASSES.items()}
    return _lazy(name)


def allowed_keys(name: str) -> tuple[str, ...]:
    """The keys of ``compression=<name>`` (:data:`psbench.compression.options.COMPRESSION`)."""
    return COMPRESSION.keys(name)


def build_codec(name: str, options: Mapping[str, Any] | None = None) -> Codec:
    """A codec from its config-group options; ``error_feedback: true`` wraps it in :class:`ErrorFeedback`."""
    require(name in COMPRESSIONS, "compression.name", name, "one of " + ", ".join(COMPRESSIONS))
    opts = dict(options or {})
    opts.pop("name", None)
    check_keys("compression", opts, COMPRESSION.options[name], f"compression={name}", partial=True)
    ef = opts.get("error_feedback", False)
    codec = _lazy(_CODEC_CLASSES[name])(**{k: opts[k] for k in CODEC_KEYS[name] if k in opts})
    return _lazy("ErrorFeedback")(codec) if ef else codec


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
