"""The language in which each package declares its config group: options, keys, types, ranges.

A package that reads a config group declares it once, next to the code that uses the keys, as a
:class:`Group` — its options (the files ``conf/<group>/<option>.yaml``), each option's keys, and
for every key a :class:`Key` saying which values are allowed, in a predicate and in words. The
builders use the same declaration for their own argument checks, :mod:`psbench.validate` checks a
composed config against all of them before any work starts, and a test holds the declarations
and ``conf/`` equal. Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import math
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from psbench.errors import ConfigError, require

#: the largest finite float32: values that reach torch tensors must fit in one
FLOAT32_MAX = 3.4028234663852886e38
#: the smallest normal float32: a nonzero value below it is 0 or loses its precision once cast (1e-50 is 0.0)
FLOAT32_TINY = 1.1754943508222875e-38
#: the most of any count (updates, steps, batch sizes, bounds): a schedule holds at most 2**31 − 1 gradients
MAX_COUNT = 2**31 - 1
#: torch's intra-op threads: more is not a thread count a machine runs (10**5 crashed torch here)
MAX_THREADS = 1024
#: the most learners λ the simulator takes (O(λ) state and one jitter stream each; engine=dist: 256 processes)
MAX_LEARNERS = 100_000


@dataclass(frozen=True)
class Key:
    """One config key: ``ok(value)`` decides, ``allowed`` says what is allowed, in words.

    ``required`` keys are in the option's file; the others may be added with ``+group.key=…``
    (the code that reads them has their default).
    """

    ok: Callable[[Any], bool]
    allowed: str
    required: bool = True

    def optional(self) -> Key:
        return Key(self.ok, self.allowed, False)


#: an option's keys (besides ``name``): a :class:`Key` each, or a nested mapping of them
Keys = Mapping[str, "Key | Keys"]


@dataclass(frozen=True)
class Group:
    """A config group: its options and their keys, and the rules that span keys or groups.

    ``named``: the options are chosen by a ``name`` key (every group but ``trainer`` and
    ``paths``, whose one option is ``default``). ``check(cfg)`` runs on the whole resolved
    config after every key has passed its own check, and raises :class:`ConfigError`.
    ``target``: the group also takes a node with ``_target_`` (a user's callable, :mod:`psbench.target`),
    whose keys are the target's but for these, psbench's own (optional).
    """

    options: Mapping[str, Keys]
    check: Callable[[Mapping[str, Any]], None] | None = None
    named: bool = True
    target: Keys | None = None

    def keys(self, option: str) -> tuple[str, ...]:
        return (("name",) if self.named else ()) + tuple(self.options[option])


# ------------------------------------------------------------------------------ value kinds
def is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


def _range(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> tuple[Callable[[Any], bool], str]:
    def ok(v: Any) -> bool:
        return (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi))

    def show(v: float) -> str:  # integers as they are (2147483647, not 2.14748e+09)
        return str(v) if is_int(v) else f"{v:g}"

    if lo is not None and hi is not None:
        words = f"in {'(' if lo_open else '['}{show(lo)}, {show(hi)}{')' if hi_open else ']'}"
    elif lo is not None:
        words = f"{'>' if lo_open else '>='} {show(lo)}"
    elif hi is not None:
        words = f"{'<' if hi_open else '<='} {show(hi)}"
    else:
        words = ""
    return ok, words


def _nullable(ok: Callable[[Any], bool], allowed: str, null: bool | str) -> Key:
    if not null:
        return Key(ok, allowed)
    why = f" ({null})" if isinstance(null, str) else ""
    return Key(lambda v: v is None or ok(v), f"null{why} or {allowed}")


def integer(
    lo: int | None = None, hi: int | None = None, *, null: bool | str = False, words: str = "", what: str = "an integer"
) -> Key:
    within, text = _range(lo, hi, False, False)
    allowed = f"{what} {words or text}".rstrip()
    return _nullable(lambda v: is_int(v) and within(v), allowed, null)


def fits_float32(v: float) -> bool:
    """``v`` is what it says once cast to float32: 0, or a normal float32 (1.2e-38 <= |v| <= 3.4e38)."""
    return v == 0 or FLOAT32_TINY <= abs(v) <= FLOAT32_MAX


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    null: bool | str = False,
    float32: bool = False,
    unit: str = "",
) -> Key:
    """A finite real number in a range; ``float32``: it reaches torch, so it must be what it says as a float32
    (:func:`fits_float32`: ``optimizer.lr=1e-50`` would be 0 and train nothing)."""
    within, text = _range(lo, hi, lo_open, hi_open)
    kind = "a finite float32 number" if float32 else "a number"
    words = " (0 or 1.2e-38 <= |x| <= 3.4e38: float32 keeps it)" if float32 else ""
    allowed = f"{kind} {text}".rstrip() + (f" ({unit})" if unit else "") + words
    return _nullable(lambda v: is_num(v) and within(v) and (not float32 or fits_float32(v)), allowed, null)


def boolean() -> Key:
    return Key(lambda v: isinstance(v, bool), "true or false")


def one_of(*values: Any, null: bool | str = False) -> Key:
    return _nullable(
        lambda v: isinstance(v, str | int) and not isinstance(v, bool) and v in values,
        "one of " + ", ".join(map(str, values)),
        null,
    )


def text(*, null: bool | str = False, what: str = "a non-empty string") -> Key:
    return _nullable(lambda v: isinstance(v, str) and v.strip() != "", what, null)


def sequence(
    item: Key,
    *,
    length: int | None = None,
    min_length: int = 0,
    increasing: bool = False,
    null: bool | str = False,
    what: str = "",
) -> Key:
    """A list whose items all pass ``item`` (a ``length`` or at least ``min_length`` of them)."""

    def ok(v: Any) -> bool:
        if not isinstance(v, list | tuple):
            return False
        return (
            (length is None or len(v) == length)
            and len(v) >= min_length
            and all(item.ok(x) for x in v)
            and (not increasing or list(v) == sorted(v))
        )

    size = f"{length} " if length is not None else ""
    words = what or f"a list of {size}{'increasing ' if increasing else ''}values, each {item.allowed}"
    return _nullable(ok, words, null)


def mapping(
    value: Key | None = None,
    *,
    key_ok: Callable[[Any], bool] | None = None,
    null: bool = False,
    what: str = "a mapping",
) -> Key:
    def ok(v: Any) -> bool:
        return isinstance(v, Mapping) and all(
            (key_ok is None or key_ok(k)) and (value is None or value.ok(x)) for k, x in v.items()
        )

    return _nullable(ok, what, null)


# ------------------------------------------------------------------------------ checking
def did_you_mean(key: str, known: Any) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def unknown_key(path: str, value: Any, known: Any, where: str) -> ConfigError:
    """The error for a key nobody reads: names the allowed keys (and the closest one)."""
    last = path.rpartition(".")[2]
    if not known:
        return ConfigError(path, value, f"no key here ({where} takes none)")
    return ConfigError(path, value, f"a key of {where}{did_you_mean(last, known)}: {', '.join(known)}")


def check_keys(prefix: str, node: Mapping[str, Any], keys: Keys, where: str, partial: bool = False) -> None:
    """Refuse unknown keys, missing required keys (unless ``partial``) and values a :class:`Key` does not allow."""
    for k, v in node.items():
        if k not in keys:
            raise unknown_key(f"{prefix}.{k}" if prefix else str(k), v, keys, where)
    for k, key in keys.items():
        path = f"{prefix}.{k}" if prefix else k
        if k not in node:
            if partial or (isinstance(key, Key) and not key.required):
                continue
            allowed = key.allowed if isinstance(key, Key) else "a mapping"
            raise ConfigError(path, None, f"{allowed} (the key is missing from the config)")
        if isinstance(key, Key):
            require(key.ok(node[k]), path, node[k], key.allowed)
        else:
            require(isinstance(node[k], Mapping), path, node[k], "a mapping of " + ", ".join(key))
            check_keys(path, node[k], key, where, partial)


def check_group(group: str, node: Any, spec: Group) -> str:
    """Check one group's node against its declaration; return the option it chose."""
    require(isinstance(node, Mapping), group, node, "a config group (" + ", ".join(spec.options) + ")")
    if spec.target is not None and "_target_" in node:  # a user's callable: its keys are its own, but psbench's
        target = node["_target_"]
        require(
            isinstance(target, str) and target.strip() != "" and " " not in target.strip(),
            f"{group}._target_",
            target,
            "a dotted path to a callable, e.g. my_net.ResNet20",
        )
        check_keys(
            group, {k: v for k, v in node.items() if k in spec.target}, spec.target, f"{group}=<_target_>", partial=True
        )
        return "_target_"
    if spec.named:
        name = node.get("name")
        require(name in spec.options, f"{group}.name", name, "one of " + ", ".join(spec.options))
    else:
        name = next(iter(spec.options))
    for k, v in node.items():  # a key of another option: say which (protocol=hardsync +protocol.n=4)
        users = [o for o, keys in spec.options.items() if k in keys]
        if k != "name" and k not in spec.options[name] and users:
            raise ConfigError(
                f"{group}.{k}",
                v,
                f"only with {group}="
                + "|".join(users)
                + f" (this is {group}={name}, whose keys are: {', '.join(spec.keys(name))})",
            )
    check_keys(
        group,
        {k: v for k, v in node.items() if not (spec.named and k == "name")},
        spec.options[name],
        f"{group}={name}" if spec.named else group,
    )
    return name


def get(cfg: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """``cfg[a][b]`` for ``path`` ``"a.b"`` in a plain (resolved) config; ``default`` if absent."""
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def check_writable_dir(key: str, path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if needed and prove it is writable by writing a probe file.

    ``os.access`` is not enough: tests and CI run as root, for whom a chmod-0 dir is still
    writable while ``/proc/...`` or a path under a regular file is not.
    """
    p = Path(path)
    probe = p / f".psbench-write-probe-{uuid.uuid4().hex}"
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError(key, str(p), f"a writable directory ({reason})") from None
    return p
