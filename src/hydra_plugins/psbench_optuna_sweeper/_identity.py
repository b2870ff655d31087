"""A study's identity: what its command says, and the sweep dir it resumes from by default.

Identity = search space (sweep overrides, ``params``, ``cases``, ``derived``, ``constraints``) +
fixed overrides (every non-sweep override of the command, e.g. ``epochs=1``, but ``resources`` and ``overwrite``) +
sampler + objectives + directions. ``n_trials``, ``n_jobs`` and the failure keys are not part of it:
re-running with a larger ``n_trials`` extends the same study. The identity is stored as the
study's user attrs ``identity`` and ``identity_hash``; a re-run whose identity differs is
refused (see :func:`differences`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

UNSET = "(unset)"


def describe(dist: BaseDistribution) -> str:
    """A distribution in Hydra's sweep syntax (``choice(1, 2)``, ``tag(log, interval(0.001, 0.1))``)."""
    if isinstance(dist, CategoricalDistribution):
        return "choice(" + ", ".join(repr(c) if isinstance(c, str) else str(c) for c in dist.choices) + ")"
    if isinstance(dist, FloatDistribution | IntDistribution):
        body = f"interval({dist.low}, {dist.high})"
        if isinstance(dist, IntDistribution):
            body = f"int({body})"
        if dist.step not in (None, 1):
            body += f" step {dist.step}"
        return f"tag(log, {body})" if dist.log else body
    return repr(dist)


def fixed_values(fixed: Sequence[str]) -> dict[str, str]:
    """``key -> value`` of the fixed overrides (``++tags.x=1`` and ``tags.x=1`` are the same key)."""
    out: dict[str, str] = {}
    for o in OverridesParser.create().parse_overrides(list(fixed)):
        key = o.get_key_element().lstrip("+~")
        out[key] = "(deleted)" if o.is_delete() else o.get_value_element_as_str()
    return out


def identity(
    space: Mapping[str, BaseDistribution],
    fixed: Sequence[str],
    cases: Mapping[str, list[str]],
    derived: Mapping[str, str],
    constraints: Sequence[str],
    sampler: Mapping[str, Any],
    objectives: Sequence[str],
    directions: Sequence[str],
) -> dict[str, Any]:
    """The identity of a study (JSON-able; see the module docstring)."""
    return {
        "space": {k: describe(d) for k, d in sorted(space.items())},
        "cases": {k: list(v) for k, v in sorted(cases.items())},
        "derived": {str(k): str(v) for k, v in sorted(derived.items())},
        "constraints": [str(c) for c in constraints],
        # where the trials run (resources=<scale>: a cluster launcher's request) and whether a trial may replace an
        # earlier run's files in its dir (overwrite) do not change their results
        "fixed": {
            k: v for k, v in sorted(fixed_values(fixed).items()) if k.split(".")[0] not in ("resources", "overwrite")
        },
        "sampler": {k: v for k, v in sorted(sampler.items()) if v is not None},
        "objectives": list(objectives),
        "directions": list(directions),
    }


def fingerprint(ident: Mapping[str, Any]) -> str:
    """Short hash of an identity (8 hex digits), part of the default sweep dir."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:8]


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``key: old -> new`` for every part of two identities that differs (fixed overrides first)."""
    out: list[str] = []
    for part in ("fixed", "space", "cases", "derived", "sampler"):
        a, b = old.get(part) or {}, new.get(part) or {}
        prefix = "" if part == "fixed" else f"{part}."
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{prefix}{key}: {_show(a.get(key, UNSET))} -> {_show(b.get(key, UNSET))}")
    for part in ("constraints", "objectives", "directions"):
        if list(old.get(part) or []) != list(new.get(part) or []):
            out.append(f"{part}: {_show(old.get(part))} -> {_show(new.get(part))}")
    return out


def _show(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


_NOW = re.compile(r"\$\{now:")


def default_sweep_dir(raw_dir: str, study_name: str, fp: str) -> str | None:
    """The resumable sweep dir that replaces a timestamped one, or ``None`` if ``raw_dir`` has no ``${now:…}``.

    Everything from the first path component holding ``${now:…}`` on becomes
    ``optuna/<study_name>-<fingerprint>``: psbench's ``${paths.root_dir}/multirun/${now:…}/${now:…}``
    → ``${paths.root_dir}/multirun/optuna/psbench-1a2b3c4d``, Hydra's ``multirun/${now:…}/…`` →
    ``multirun/optuna/…``. A dir the user set (no ``${now:…}``) is kept as it is.
    """
    parts = raw_dir.split("/")
    for i, part in enumerate(parts):
        if _NOW.search(part):
            return "/".join([*parts[:i], "optuna", f"{study_name}-{fp}"])
    return None
