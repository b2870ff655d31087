"""The ``compression`` config group: one option per gradient codec, with its keys.

Every codec but ``none`` takes ``error_feedback``; :data:`PIPELINE_KEYS` are read by the
per-learner pipeline (TernGrad §3.1/§4.2), the other keys are the codec's constructor arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import ConfigError
from psbench.schema import MAX_COUNT, Group, Keys, boolean, integer, number, one_of

_K = number(0, 1, lo_open=True)  # the fraction of elements kept
#: QSGD's levels scale float32 magnitudes: integers are exact in float32 up to 2**24
MAX_QSGD_LEVELS = 2**24
CODEC_KEYS: dict[str, Keys] = {
    "none": {},
    "fp16": {},
    "qsgd": {
        "levels": integer(1, MAX_QSGD_LEVELS, words=f"in [1, 2**24 = {MAX_QSGD_LEVELS}] (exact in float32)"),
        "bucket": integer(1, MAX_COUNT),
    },
    "topk": {"k": _K},
    "randomk": {"k": _K},
    "signsgd": {"scale": one_of("l1", "seide")},
    "terngrad": {
        "clip": number(0, lo_open=True, null="no clipping", unit="c of c·std", float32=True),
        "wire": one_of("2bit", "base3"),
    },
}
PIPELINE_KEYS: dict[str, Keys] = {
    "terngrad": {"share_scalers": boolean(), "float_last_layer": boolean(), "localize": boolean()},
}
COMPRESSIONS = tuple(CODEC_KEYS)


def _keys(name: str) -> Keys:
    if name == "none":
        return {}
    return {"error_feedback": boolean(), **CODEC_KEYS[name], **PIPELINE_KEYS.get(name, {})}


def _check(cfg: Mapping[str, Any]) -> None:
    from psbench.ps.local import LOCAL_PROTOCOLS

    name = cfg["compression"]["name"]
    if name != "none" and cfg["protocol"]["name"] in LOCAL_PROTOCOLS:
        raise ConfigError(
            "compression.name", name, "none with the local-step protocols (" + ", ".join(LOCAL_PROTOCOLS) + ")"
        )


COMPRESSION = Group({name: _keys(name) for name in COMPRESSIONS}, check=_check)


def compression_options(cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """The resolved ``compression`` group as plain data, or None for ``none`` (fp32 gradients)."""
    c = cfg.get("compression")
    if c is None or (c.get("name") or "none") == "none":
        return None
    return dict(c)
