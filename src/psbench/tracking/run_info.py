"""What a psbench run is called and described by in MLflow: name, params, tags.

Pure functions of the resolved config (a plain ``dict``), so they are easy to test and the
same run always gets the same name and params.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# config groups whose chosen option becomes a tag (``protocol: softsync``)
TAGGED_GROUPS = (
    "model", "dataset", "protocol", "lr_policy", "optimizer", "compression",
    "topology", "hardware", "engine",
)


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"protocol": {"n": 4}}`` -> ``{"protocol.n": "4"}``; lists and None as JSON.

    Every leaf becomes one string-valued entry keyed by its dotted path, which is how
    MLflow params are searched (``params.`protocol.n` = '4'``). An empty mapping is kept
    as ``"{}"`` so that the key still shows up.
    """
    out: dict[str, str] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        elif isinstance(value, str):
            out[path] = value
        else:
            out[path] = json.dumps(value, default=str)
    return out


def run_name(cfg: Mapping[str, Any]) -> str:
    """``logger.run_name`` if set, else e.g. ``softsync-n4_lam30_mu4_cifar_cnn_s0``.

    The protocol part carries its parameter: ``softsync-n4``, ``ssp-s2``; then λ, μ,
    the model and the seed.
    """
    explicit = (cfg.get("logger") or {}).get("run_name")
    if explicit:
        return str(explicit)
    proto = cfg["protocol"]
    label = proto["name"]
    if "n" in proto:
        label += f"-n{proto['n']}"
    if "staleness_bound" in proto:
        label += f"-s{proto['staleness_bound']}"
    return (
        f"{label}_lam{cfg['learners']}_mu{cfg['batch_size']}"
        f"_{cfg['model']['name']}_s{cfg['seed']}"
    )


def run_tags(
    cfg: Mapping[str, Any], choices: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Tags to search and group runs by.

    The chosen option of each group (``protocol: softsync``), λ and μ under their config
    names, ``experiment`` when a preset was used (from Hydra's runtime choices), and
    ``cfg.tags`` (``paper``, ``table``, ``figure``, …) last so a preset can say what it
    reproduces.
    """
    tags: dict[str, str] = {}
    for group in TAGGED_GROUPS:
        node = cfg.get(group)
        if isinstance(node, Mapping) and "name" in node:
            tags[group] = str(node["name"])
    tags["learners"] = str(cfg.get("learners"))
    tags["batch_size"] = str(cfg.get("batch_size"))
    if choices:
        for group in ("experiment", "hparams_search"):
            if choices.get(group):
                tags[group] = str(choices[group])
    for key, value in (cfg.get("tags") or {}).items():
        if value is None:  # a preset unsetting a tag it inherits
            tags.pop(str(key), None)
        else:
            tags[str(key)] = str(value)
    return tags
