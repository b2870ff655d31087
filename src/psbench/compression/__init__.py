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
from psbench.compression.qsgd import QSGD
from psbench.compression.signsgd import SignSGD
from psbench.compression.sparsify import RandomK, TopK
from psbench.compression.terngrad import TernGrad
from psbench.errors import ConfigError, require

CODECS: dict[str, type[Codec]] = {
    "none": NoCompression, "fp16": FP16, "qsgd": QSGD, "topk": TopK, "randomk": RandomK,
    "signsgd": SignSGD, "terngrad": TernGrad,
}
#: codec -> its constructor keys (``compression.<key>``)
CODEC_KEYS: dict[str, tuple[str, ...]] = {
    "none": (), "fp16": (), "qsgd": ("levels", "bucket"), "topk": ("k",), "randomk": ("k",),
    "signsgd": ("scale",), "terngrad": ("clip", "wire"),
}
#: keys the pipeline reads (``error_feedback`` for every codec, the rest TernGrad §3.1/§4.2 only)
PIPELINE_KEYS: dict[str, tuple[str, ...]] = {"terngrad": ("share_scalers", "float_last_layer", "localize")}
COMPRESSIONS = tuple(CODECS)


def allowed_keys(name: str) -> tuple[str, ...]:
    if name == "none":
        return ("name",)
    return ("name", "error_feedback", *CODEC_KEYS.get(name, ()), *PIPELINE_KEYS.get(name, ()))


def build_codec(name: str, options: Mapping[str, Any] | None = None) -> Codec:
    """A codec from its config-group options; ``error_feedback: true`` wraps it in :class:`ErrorFeedback`."""
    require(name in CODECS, "compression.name", name, "one of " + ", ".join(COMPRESSIONS))
    opts = dict(options or {})
    opts.pop("name", None)
    for k in opts:
        if k not in allowed_keys(name):
            keys = ", ".join(allowed_keys(name))
            raise ConfigError(f"compression.{k}", opts[k], f"a key of compression={name}: {keys}")
    ef = opts.get("error_feedback", False)
    require(isinstance(ef, bool), "compression.error_feedback", ef, "true or false")
    codec = CODECS[name](**{k: opts[k] for k in CODEC_KEYS[name] if k in opts})
    return ErrorFeedback(codec) if ef else codec


__all__ = ["CODECS", "COMPRESSIONS", "FP16", "QSGD", "Codec", "ErrorFeedback", "NoCompression", "Payload",
           "RandomK", "SignSGD", "TernGrad", "TopK", "allowed_keys", "build_codec", "learner_generator"]
