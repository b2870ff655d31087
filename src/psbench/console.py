"""What the user sees on the terminal: the config as a tree, and bad input as one line (``psbench: error: …``).

:func:`report` prints a :class:`~psbench.errors.ConfigError`, :class:`~psbench.errors.DataError` or a Hydra/OmegaConf
error as one line and exits 2 (:func:`hydra_error_line` turns Hydra's several-line reports into the same
``key=value is invalid: allowed …`` form); :func:`run_failure` does the same for a handled failure of a run, exit 1.
With the user's ``HYDRA_FULL_ERROR=1`` (:data:`settings`) both re-raise, to show the traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf.errors import OmegaConfBaseException

from psbench.conf import CONF_DIR
from psbench.errors import ConfigError, DataError, RunFailure

EXIT_BAD_INPUT = 2


class settings:
    #: the user asked for tracebacks (HYDRA_FULL_ERROR=1); psbench.cli.main sets it before it forces the variable on
    show_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"


def config_tree(cfg: Mapping[str, Any], label: str = "config"):
    """The resolved config as a :class:`rich.tree.Tree` (groups as branches)."""
    from rich.text import Text
    from rich.tree import Tree

    def add(node: Tree, mapping: Mapping[str, Any]) -> None:
        for key, value in mapping.items():
            if isinstance(value, Mapping) and value:
                add(node.add(Text(str(key), style="bold cyan")), value)
            else:
                text = Text(f"{key}: ", style="green")
                text.append(json.dumps(value, default=str, ensure_ascii=False))
                node.add(text)

    tree = Tree(Text(label, style="bold"))
    add(tree, cfg)
    return tree


def print_config(resolved: Mapping[str, Any]) -> None:
    from rich.console import Console

    Console(soft_wrap=True).print(config_tree(resolved))


def report(err: BaseException) -> None:
    """Bad input: print one line ``psbench: error: …`` and exit 2 (re-raise for tracebacks).

    With ``HYDRA_FULL_ERROR=1`` set by the user, ``err`` is re-raised instead.
    """
    if settings.show_traceback:
        raise err
    print(f"psbench: error: {error_message(err)}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_INPUT)


def error_message(err: BaseException) -> str:
    """The one-line message of a bad-input error."""
    message = str(err) if isinstance(err, ConfigError | DataError) else hydra_error_line(err)
    return " ".join(message.split())  # one line, whatever the message held


def run_failure(err: RunFailure) -> None:
    """A handled failure of a run: one line ``psbench: error: …``, exit 1 (re-raise for tracebacks)."""
    if settings.show_traceback:
        raise err
    print(f"psbench: error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
    sys.exit(1)


def yaml_error_line(err: BaseException) -> str | None:
    """A YAML syntax error (in a ``--config-dir`` file, a preset) as ``<file>:<line>:<column>: not valid YAML: …``,
    naming where the parser stopped and what it was reading (PyYAML's report is several lines); None if ``err``
    (or its cause) is not one."""
    import yaml

    while err is not None and not isinstance(err, yaml.MarkedYAMLError):
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    if err is None:
        return None
    mark = err.problem_mark or err.context_mark
    where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else "a config file"
    what = " ".join(str(err.problem or "").split()) or type(err).__name__
    if err.context and err.context_mark is not None:
        c = err.context_mark
        same = mark is not None and c.name == mark.name
        what += f" ({' '.join(err.context.split())} that starts at {'' if same else c.name + ':'}line {c.line + 1})"
    return f"{where}: not valid YAML: {what}"


def hydra_error_line(err: BaseException) -> str:
    """One line for a Hydra/OmegaConf error: ``protocol='foo' is invalid: allowed one of …``."""
    bad_yaml = yaml_error_line(err)
    if bad_yaml is not None:
        return bad_yaml
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        # "In 'config': Could not find 'experiment/rudra/nope' ... Available options in
        # 'experiment': ..." -> the group is the one Hydra names, options from conf/<group>/
        found = re.search(r"Available options in '([^']+)'", str(err))
        group = found.group(1) if found else err.missing_cfg_file.rpartition("/")[0]
        option = err.missing_cfg_file.removeprefix(group + "/")
        options = group_options(group) or list(err.options or [])
        if options:
            return str(ConfigError(group or "config", option, "one of " + ", ".join(options)))
    text = str(err)
    appended = re.search(r"Could not append to config\. An item is already at '([^']+)'.*?'\1=([^']*)'", text, re.S)
    if appended:  # +key=value on a key the config has: the user meant key=value
        key, value = appended.groups()
        return str(
            ConfigError(
                f"+{key}",
                value,
                f"{key}={value} without the + ({key} is a key of the config; ++{key}=... adds or overrides)",
            )
        )
    unknown = re.search(r"Could not override '([^']+)'\.\s*To append to your config use \+\1=(.*)", text)
    if unknown and "not in struct" in str(err.__cause__):  # a typo: name the keys there are, not "use +key"
        from psbench.validate import unknown_override

        return str(unknown_override(unknown.group(1), unknown.group(2).strip()))
    if isinstance(err, OverrideParseException):
        # the message says what is wrong, not where: "no viable alternative at input '['"
        text = f"cannot parse override {err.override!r}: {text.splitlines()[0]}"
    if isinstance(err.__cause__, OmegaConfBaseException):
        text += f" ({str(err.__cause__).splitlines()[0]})"
    if isinstance(err, OmegaConfBaseException) and getattr(err, "full_key", None):
        head = text.splitlines()[0] if text else type(err).__name__
        return f"{err.full_key}: {head}"
    return " ".join(text.split()) or type(err).__name__


def group_options(group: str) -> list[str]:
    """The options of a config group, from the yaml files under ``conf/<group>/``."""
    base = CONF_DIR / group
    return sorted(p.relative_to(base).with_suffix("").as_posix() for p in base.rglob("*.yaml"))
