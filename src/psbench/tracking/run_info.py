"""What a psbench run is called and described by in MLflow: name, params, tags.

Pure functions of the resolved config (a plain ``dict``), so they are easy to test and the
same run always gets the same name and params.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# config groups whose chosen option becomes a tag (``protocol: softsync``)
TAGGED_GROUPS = (
    "model",
    "dataset",
    "protocol",
    "lr_policy",
    "optimizer",
    "compression",
    "topology",
    "hardware",
    "engine",
)


def leaves(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"protocol": {"n": 4}}`` -> ``{"protocol.n": 4}``: every leaf by its dotted path, values as they are
    (an empty mapping is a leaf, so its key still shows up)."""
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(leaves(value, path + "."))
        else:
            out[path] = value
    return out


def flatten(cfg: Mapping[str, Any]) -> dict[str, str]:
    """``{"protocol": {"n": 4}}`` -> ``{"protocol.n": "4"}``; lists, None and ``{}`` as JSON.

    Every leaf becomes one string-valued entry keyed by its dotted path, which is how
    MLflow params are searched (``params.`protocol.n` = '4'``).
    """
    return {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in leaves(cfg).items()}


# the groups a run name mentions when their option differs from the default, in this order
NAMED_GROUPS = ("model", "dataset", "compression", "optimizer", "lr_policy", "topology", "hardware", "engine")
NAMED_KEYS = {"learners": "λ", "batch_size": "μ", "seed": "seed"}


def config_defaults(config_file: str | Path) -> dict[str, Any]:
    """The default option of each group and the top-level λ, μ, seed of the primary config (``conf/config.yaml``)."""
    from omegaconf import OmegaConf

    primary = OmegaConf.to_container(OmegaConf.load(config_file))
    assert isinstance(primary, dict)
    out: dict[str, Any] = {k: primary.get(k) for k in NAMED_KEYS}
    for entry in primary.get("defaults") or []:
        if isinstance(entry, Mapping):
            out.update({str(g): o for g, o in entry.items() if g in NAMED_GROUPS})
    return out


def protocol_label(proto: Mapping[str, Any]) -> str:
    """The protocol's one label (:func:`psbench.ps.protocols.label`: ``4-softsync``, ``ssp-s2``, ``agn-H10``), as
    summary.json and the schedule name it."""
    from psbench.ps.protocols import label

    return label(str(proto["name"]), proto)


def _choice(node: Any) -> str | None:
    """A group's option as runs name it: its ``name``; a user's ``_target_`` node's name or target (its last part)."""
    if not isinstance(node, Mapping):
        return None
    if "_target_" in node:
        from psbench.target import label

        return label(node)
    return None if node.get("name") is None else str(node["name"])


def run_name(cfg: Mapping[str, Any], defaults: Mapping[str, Any] | None = None, swept: Iterable[str] = ()) -> str:
    """``logger.run_name`` if set, else the protocol and what differs from ``defaults`` or is ``swept``.

    E.g. ``4-softsync-λ30-μ4-cifar_cnn-cifar10_subset-terngrad-dist``: the protocol with its
    parameter (:func:`protocol_label`), then λ, μ and the option of each of
    :data:`NAMED_GROUPS` whose value differs from ``defaults`` (:func:`config_defaults`),
    then the seed if it differs. A key a sweep varies (``swept``: :func:`psbench.tracking.sweep.swept_keys`) is
    named even at its default — ``learners=4,8`` names λ4 too — and a swept key named nowhere else is appended as
    its last part and value (``optimizer.lr=0.1,0.01`` → ``lr0.01``). Deterministic: the same config and sweep
    always get the same name.
    """
    explicit = (cfg.get("logger") or {}).get("run_name")
    if explicit:
        return str(explicit)
    defaults = defaults or {}
    swept = [k.lstrip("+~") for k in swept]
    parts = [protocol_label(cfg["protocol"])]
    for key in ("learners", "batch_size"):
        if cfg.get(key) != defaults.get(key) or key in swept:
            parts.append(f"{NAMED_KEYS[key]}{cfg.get(key)}")
    for group in NAMED_GROUPS:
        node = cfg.get(group)
        choice = _choice(node)
        if choice is not None and (choice != defaults.get(group) or group in swept):
            parts.append(str(choice))
    if cfg.get("seed") != defaults.get("seed") or "seed" in swept:
        parts.append(f"seed{cfg.get('seed')}")
    named = {*NAMED_KEYS, *NAMED_GROUPS, "protocol"}
    for key in swept:  # the other axes: their last part and value (protocol.n is in the protocol's label)
        head = key.split(".")[0]
        if key in named or head == "protocol" or (head in NAMED_GROUPS and key.endswith(".name")):
            continue
        parts.append(f"{key.rsplit('.', 1)[-1]}{_value(cfg, key)}")
    return "-".join(parts)


def _value(cfg: Mapping[str, Any], key: str) -> str:
    """``cfg``'s value at the dotted ``key`` as a name shows it (``None`` where it has none)."""
    node: Any = cfg
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "null" if node is None else str(node).replace(" ", "")


def run_tags(cfg: Mapping[str, Any], choices: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Tags to search and group runs by.

    The chosen option of each group (``protocol: softsync``), λ and μ under their config
    names, ``experiment`` when a preset was used (from Hydra's runtime choices), and
    ``cfg.tags`` (``paper``, ``table``, ``figure``, …) last so a preset can say what it
    reproduces. ``data_note`` is ``dataset.data_note`` (``cifar10_jpeg_q75``), joined by ``; `` with a
    ``tags.data_note`` (a sweep's scale), so neither hides the other.
    """
    tags: dict[str, str] = {}
    for group in TAGGED_GROUPS:
        choice = _choice(cfg.get(group))
        if choice is not None:
            tags[group] = choice
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
    note = (cfg.get("dataset") or {}).get("data_note")
    if note:
        tags["data_note"] = "; ".join(dict.fromkeys(n for n in (str(note), tags.get("data_note")) if n))
    return tags
