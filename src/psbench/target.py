"""A user's own code in a config: nodes with ``_target_`` (Hydra's ``instantiate``) and where their modules are found.

A ``model``, ``dataset`` or ``model.loss`` node with ``_target_`` names a callable (``my_net.ResNet20``) that
:func:`build` calls with the node's other keys, as :func:`hydra.utils.instantiate` does (nested ``_target_`` nodes
included; lists and mappings arrive as plain ``list``/``dict``). psbench's own keys of such a node (``name``,
``loss``, ``subset``, …) are not passed; what psbench knows of the run (``input_shape``, ``num_classes``,
``output_size``, ``seed``, ``data_dir``) is passed only to the parameters the target's signature names, and a key
the node sets itself wins. What fails — a target that does not import, a call that raises, a result of the wrong
kind — is one :class:`~psbench.errors.ConfigError` naming the node's ``_target_`` key.

Modules are found on ``sys.path``, as for a Hydra app started as a script from its project: the CLI adds the
directory it was started in and the parent of every ``--config-dir`` / ``hydra.searchpath`` folder — the project
that holds ``conf/`` (:func:`user_paths`) — *after* the environment's own packages (:func:`add_to_sys_path`), so a
``torch.py`` or ``PIL.py`` in the launch directory is never imported in place of the installed package;
``PYTHONPATH`` works as usual. Torch-free.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from psbench.errors import ConfigError

#: the keys Hydra's instantiate reads in a node besides ``_target_``
HYDRA_KEYS = ("_args_", "_recursive_", "_convert_", "_partial_")


def is_target(node: Any) -> bool:
    """A config node built by Hydra's ``instantiate`` (it has ``_target_``)."""
    return isinstance(node, Mapping) and "_target_" in node


def label(node: Mapping[str, Any]) -> str:
    """How runs name a node: its ``name``, else its ``_target_``'s last part (``my_net.ResNet20`` → ``ResNet20``)."""
    return str(node.get("name") or str(node.get("_target_", "")).rpartition(".")[2])


def user_paths(
    config_sources: Iterable[Mapping[str, Any]],
    own_conf: str | os.PathLike[str],
    cwd: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The folders a run's ``_target_`` modules are imported from: ``cwd`` and the parent of each file config
    source (``--config-dir``, ``hydra.searchpath``) other than psbench's own ``conf/`` (``own_conf``)."""
    out = [str(Path(cwd if cwd is not None else os.getcwd()).resolve())]
    own = Path(own_conf).resolve()
    for s in config_sources:
        if s.get("schema") != "file" or not s.get("path"):
            continue
        folder = Path(str(s["path"])).expanduser().resolve()
        if folder != own:
            out.append(str(folder.parent))
    return list(dict.fromkeys(out))


def add_to_sys_path(paths: Iterable[str]) -> list[str]:
    """Put ``paths`` last on ``sys.path`` (in order; once each), after the environment's own packages; return them.

    A user's modules are found there for ``_target_``, but a module of theirs named like an installed package
    (``torch.py``, ``PIL.py`` in the launch directory) never replaces it: the installed one is found first. An
    entry already on ``sys.path`` before the environment's packages (``python -m`` puts the working directory
    first) is moved behind them too."""
    paths = list(dict.fromkeys(paths))
    for p in paths:
        while p in sys.path:
            sys.path.remove(p)
        if p == os.getcwd():  # "" is the working directory too (python -c, the REPL)
            while "" in sys.path:
                sys.path.remove("")
    sys.path.extend(paths)
    return paths


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def locate(key: str, path: Any) -> Any:
    """The object a dotted ``path`` names (``pkg.module.Name``), imported; ConfigError for ``key`` if it cannot be."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(key, path, "a dotted path to a callable, e.g. my_net.ResNet20")
    from hydra.utils import get_object

    try:
        return get_object(path)
    except Exception as exc:  # ImportError, AttributeError, or the user's module failing as it imports
        cause = exc.__cause__ or exc
        raise ConfigError(
            key,
            path,
            "an importable callable: a module on sys.path (the launch directory, the "
            "folder above --config-dir, PYTHONPATH) and a name in it "
            f"({_one_line(cause)})",
        ) from exc


def accepted(fn: Callable[..., Any], offered: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``offered`` that ``fn``'s signature names as parameters (none where it has no signature)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in offered.items() if k in named}


def build(
    key: str,
    node: Mapping[str, Any],
    own: Iterable[str] = (),
    offered: Mapping[str, Any] | None = None,
    what: str = "a callable",
) -> Any:
    """Call the node's ``_target_`` with its keys (but ``own``, psbench's) and the ``offered`` values its signature
    accepts and the node does not set; ConfigError for ``key`` (the node's ``_target_``) if it fails."""
    from hydra.utils import instantiate

    fn = locate(key, node.get("_target_"))
    if not callable(fn):
        raise ConfigError(key, node["_target_"], f"{what} (it names a {type(fn).__name__})")
    own = set(own)
    cfg = {k: v for k, v in node.items() if k not in own}
    cfg.setdefault("_convert_", "all")
    extra = {k: v for k, v in accepted(fn, offered or {}).items() if k not in cfg}
    try:
        if cfg.get("_partial_"):  # the node asks for the callable itself (a loss function with its options)
            return instantiate(cfg, **extra)
        # a partial first: psbench's values reach the target as they are (a tuple stays a tuple)
        return instantiate({**cfg, "_partial_": True})(**extra)
    except Exception as exc:
        cause = exc.__cause__ or exc  # Hydra's InstantiationException wraps the target's own error
        raise ConfigError(
            key,
            node["_target_"],
            f"{what} that accepts the keys given "
            f"({', '.join(k for k in cfg if k not in ('_target_', *HYDRA_KEYS)) or 'none'}"
            f"{'; psbench passes ' + ', '.join(extra) if extra else ''}): calling it raised "
            f"{_one_line(cause)}",
        ) from exc
