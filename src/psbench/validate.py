"""Check a composed psbench config before any work is done.

Each package declares its config group (:class:`psbench.schema.Group`: options, keys, types,
ranges, and the rules that span keys) next to the code that reads it; this module only
assembles them. :func:`validate` raises :class:`~psbench.errors.ConfigError` naming the first
offending key, its value and what is allowed — an unknown key (``+optimizer.momentun=0.9``),
a wrong type or an out-of-range value in any group or at the top level — and the CLI prints
that as one line. ``tests/test_validate.py`` holds the declarations and ``conf/`` equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from psbench.cluster.options import HARDWARE, TOPOLOGY
from psbench.compression.options import COMPRESSION
from psbench.data.options import DATASET
from psbench.distributed.options import ENGINE
from psbench.errors import ConfigError, require
from psbench.launchers import RESOURCES
from psbench.lr.options import LR_POLICY
from psbench.models.options import MODEL
from psbench.optimizer.options import OPTIMIZER
from psbench.ps.options import PROTOCOL
from psbench.schema import (
    MAX_COUNT,
    MAX_LEARNERS,
    Group,
    Key,
    boolean,
    check_group,
    check_keys,
    check_writable_dir,
    integer,
    mapping,
    number,
    text,
    unknown_key,
)
from psbench.strategy.options import TRAINER
from psbench.tracking.options import LOGGER

#: numpy's seed range (``np.random.seed``); every seed psbench derives from it stays within torch's 64 bits
SEED_MAX = 2**32 - 1


def _resume(v: Any) -> bool:
    return v is None or v == "auto" or (isinstance(v, str) and v.strip() != "" and Path(v).is_dir())


#: the keys at the top of ``conf/config.yaml`` (the λ, μ of the papers)
TOP: dict[str, Key] = {
    "learners": integer(
        1, MAX_LEARNERS, words=f">= 1 and <= {MAX_LEARNERS} (the simulator's bound; engine=dist: engine.max_learners)"
    ),  # λ
    "batch_size": integer(1, MAX_COUNT, words=">= 1 and at most the training set's N (checked once N is known)"),  # μ
    "epochs": number(0, lo_open=True),
    "seed": integer(0, SEED_MAX, words=f"in [0, 2**32-1 = {SEED_MAX}] (numpy's seed range)"),
    "schedule_only": boolean(),
    "tags": mapping(what="a mapping of free-form MLflow tags, e.g. +tags.note=baseline"),
    "resume": Key(_resume, "null, auto, or an existing run directory to resume").optional(),
    "overwrite": boolean(),
}
PATHS = Group(
    {
        "default": {
            "root_dir": text(what="a directory"),
            "data_dir": text(what="a directory"),
            "output_dir": text(what="a writable directory"),
        }
    },
    named=False,
)
#: every config group, in the order of ``conf/config.yaml``'s defaults list
GROUPS: dict[str, Group] = {
    "model": MODEL,
    "dataset": DATASET,
    "protocol": PROTOCOL,
    "lr_policy": LR_POLICY,
    "optimizer": OPTIMIZER,
    "compression": COMPRESSION,
    "topology": TOPOLOGY,
    "hardware": HARDWARE,
    "engine": ENGINE,
    "trainer": TRAINER,
    "logger": LOGGER,
    "paths": PATHS,
    "resources": RESOURCES,
}


def top_level_keys() -> tuple[str, ...]:
    return (*TOP, *GROUPS)


def compose_groups(groups: Mapping[str, str | Mapping[str, Any] | None], top: Mapping[str, Any]) -> dict[str, Any]:
    """Some groups composed as the CLI composes them and checked as :func:`validate` checks them: each an option's
    name or a mapping of its keys (``{"name": "softsync", "n": 4}``; no name: the option of ``conf/config.yaml``),
    the option's file in ``psbench/conf/<group>/`` with the given keys merged in; ``top``: top-level keys
    (``learners``, ``seed``) the groups' rules read. The resolved config of ``top`` and the groups."""
    from psbench.conf import CONF_DIR

    check_keys("", dict(top), {k: TOP[k] for k in top}, "the top level")
    import yaml

    defaults = yaml.safe_load((CONF_DIR / "config.yaml").read_text())["defaults"]
    chosen = {k: v for d in defaults if isinstance(d, dict) for k, v in d.items()}
    cfg: dict[str, Any] = dict(top)
    for group, value in groups.items():
        node: dict[str, Any] = {"name": value} if isinstance(value, str) or value is None else dict(value)
        name = node.get("name") or chosen[group]
        options = GROUPS[group].options
        require(isinstance(name, str) and name in options, f"{group}.name", name, "one of " + ", ".join(options))
        node["name"] = name
        merged = OmegaConf.merge(OmegaConf.load(CONF_DIR / group / f"{name}.yaml"), node)
        cfg[group] = OmegaConf.to_container(merged, resolve=True)
        check_group(group, cfg[group], GROUPS[group])
    for group in groups:
        rule = GROUPS[group].check
        if rule is not None:
            rule(cfg)
    return cfg


def unknown_override(path: str, value: Any) -> ConfigError:
    """The error for ``path=value`` on a key the composed config lacks (Hydra: "not in struct").

    A key some other option of the group declares (``protocol.n`` under ``protocol=hardsync``)
    names those options; any other key is refused naming the keys there could be.
    """
    import yaml

    try:
        value = yaml.safe_load(str(value))
    except yaml.YAMLError:
        pass
    group, _, rest = path.partition(".")
    if not rest or group not in GROUPS:
        return unknown_key(path, value, top_level_keys(), "the top level")
    if rest == "_target_" and GROUPS[group].target is not None:  # a user's callable is a node of its own
        return ConfigError(
            path,
            value,
            f"a {group} of your own as an option of the {group} group: a yaml whose node "
            f"holds _target_ and its arguments, e.g. ./conf/{group}/mine.yaml, chosen with "
            f"--config-dir ./conf {group}=mine",
        )
    spec, *parents, last = [GROUPS[group], *rest.split(".")]
    users, known, optional = [], {}, True
    for option, keys in spec.options.items():
        node: Any = {"name": None, **keys} if spec.named else keys
        for part in parents:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            known.update(dict.fromkeys(node))
            if last in node:
                users.append(option)
                optional = optional and isinstance(node[last], Key) and not node[last].required
    where = ".".join([group, *parents])
    if not known and parents:  # the parent is the unknown key: name what is allowed at its level
        return ConfigError(path, value, unknown_override(where, value).allowed)
    add = f"+{path}={value} (an optional key, not in the option's file: add it with +)"
    if users and spec.named and optional and len(users) == len(spec.options):
        return ConfigError(path, value, add)
    if users and spec.named:
        return ConfigError(
            path,
            value,
            f"only with {group}=" + "|".join(users) + " (choose the option first: "
            f"{group}={users[0]} {'+' if optional else ''}{path}={value})",
        )
    return unknown_key(path, value, known, f"the {where} group" if not parents else where)


def validate_keys(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """Check every key on its own against its declaration (unknown keys, types, ranges), group by group, and
    return the resolved config. Nothing here looks at the machine, the files or the store (``docs/`` commands
    are checked with it); :func:`validate` does that next."""
    container = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    require(isinstance(container, Mapping), "config", container, "a mapping")
    assert isinstance(container, Mapping)
    resolved: dict[str, Any] = {str(k): v for k, v in container.items()}
    for k, v in resolved.items():
        if k not in TOP and k not in GROUPS:
            raise unknown_key(str(k), v, top_level_keys(), "the top level")
    check_keys("", {k: v for k, v in resolved.items() if k in TOP}, TOP, "the top level")
    for group, spec in GROUPS.items():
        if group not in resolved:
            raise ConfigError(group, None, "a config group (the group is missing from the config)")
        check_group(group, resolved[group], spec)
    return resolved


def validate(cfg: DictConfig | Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first invalid key or value in a composed config.

    First every key on its own (unknown keys, types, ranges), group by group; then each group's
    rules that span keys or groups (``protocol.n`` <= λ, …); then the output and artifact
    directories are created if missing and probed for writability. No data file is decoded: the data
    sets read from one file (``image_folder``, ``arrays``, ``cifar10_jpeg``) are checked without decoding
    (md5, the zip's directory, the layout, the npz's headers) and raise :class:`~psbench.errors.DataError`;
    the others' files are read by the data modules.
    """
    resolved = validate_keys(cfg)
    for spec in GROUPS.values():
        if spec.check is not None:
            spec.check(resolved)
    check_writable_dir("paths.output_dir", resolved["paths"]["output_dir"])
