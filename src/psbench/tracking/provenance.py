"""Which code produced a number: git commit and dirty flag, package versions, host, threads.

:func:`provenance` is recorded in every run's ``summary.json`` (under ``provenance``) and, by
:func:`provenance_tags`, as MLflow tags ``psbench.<key>``. The git lookup only trusts a
checkout whose ``src/psbench`` is the imported package, so a non-editable install (the
package in ``site-packages``, possibly inside some other repository) records ``null``.

A resumed run may continue under other code, libraries, host or threads: the ``psbench.<key>`` tags keep the values
it started with (``psbench.host`` where it ran last, which the liveness checks read), and :func:`changes` lists what
differed at each resume (tag :data:`CHANGES_TAG`, and
``summary.json``'s ``provenance_changes``), so a number from such a run says every commit it trained under.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # …/src/psbench when run from a checkout
#: the MLflow tag listing a resumed run's provenance changes: JSON ``[{"update": U, "<key>": "<value>", …}, …]``
CHANGES_TAG = "psbench.provenance_changes"
#: the keys of :func:`provenance` (``threads_from`` is added by the job)
KEYS = (
    "git_commit",
    "git_dirty",
    "version",
    "torch_version",
    "lightning_version",
    "mlflow_version",
    "host",
    "threads",
    "threads_from",
)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_state(package_dir: Path = PACKAGE_DIR) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding ``package_dir`` as ``<top>/src/psbench``; (None, None) otherwise.

    Dirty means uncommitted changes to tracked files or untracked files that git does not ignore.
    """
    top = _git(package_dir, "rev-parse", "--show-toplevel")
    if not top or Path(top.strip()).resolve() / "src" / package_dir.name != package_dir.resolve():
        return None, None
    commit = (_git(package_dir, "rev-parse", "HEAD") or "").strip() or None
    status = _git(package_dir, "status", "--porcelain")
    return commit, None if commit is None or status is None else bool(status.strip())


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def provenance(threads: int | None = None) -> dict[str, Any]:
    """The code and machine behind a run; ``threads`` defaults to torch's intra-op thread count.

    torch is imported only for that default: a sweep's driver, whose jobs name their threads, records its
    provenance without it (1 s of its start-up here)."""
    if not threads:
        import torch

        threads = torch.get_num_threads()
    commit, dirty = git_state()
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "version": _version("psbench"),
        "torch_version": _version("torch"),
        "lightning_version": _version("pytorch-lightning"),
        "mlflow_version": _version("mlflow"),
        "host": socket.gethostname(),
        "threads": int(threads),
    }


def provenance_tags(prov: Mapping[str, Any]) -> dict[str, str]:
    """``psbench.<key>`` tags (``git_dirty`` as ``"true"``/``"false"``); unknown values are left out."""
    return {f"psbench.{k}": str(v).lower() if isinstance(v, bool) else str(v) for k, v in prov.items() if v is not None}


def changes(tags: Mapping[str, str], update: int, now: Mapping[str, str]) -> list[dict[str, Any]]:
    """A run's provenance changes (its MLflow ``tags``: the ``psbench.<key>`` values it started with and
    :data:`CHANGES_TAG`), with this resume's before ``update`` appended where ``now`` (:func:`provenance_tags` of
    this process) differs from the values the run had last; a value this process does not know (a commit outside a
    checkout) is recorded as None. A malformed tag counts as no changes before."""
    found = recorded(tags)
    keys = [k.removeprefix("psbench.") for k in now] + [k for k in KEYS if f"psbench.{k}" not in now]
    last = {k: tags.get(f"psbench.{k}") for k in keys}
    for c in found:
        last.update({k: v for k, v in c.items() if k != "update"})
    differ = {k: now.get(f"psbench.{k}") for k in keys if last.get(k) != now.get(f"psbench.{k}")}
    return [*found, {"update": update, **differ}] if differ else found


def recorded(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """The changes a run's :data:`CHANGES_TAG` holds, ``[{"update": U, "<key>": "<value>", …}, …]``; ``[]`` for a run
    never resumed under anything else, or a malformed tag."""
    try:
        found = json.loads(tags.get(CHANGES_TAG) or "[]")
    except ValueError:
        return []
    if not isinstance(found, list):
        return []
    return [c for c in found if isinstance(c, dict) and isinstance(c.get("update"), int)]


def folded(found: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """``found`` (:func:`changes`) whose JSON fits in ``limit`` characters: the two oldest entries folded into one
    (from the older's update, with the newer's values) until it fits, so the values a run had last stay right."""
    while len(found) > 1 and len(json.dumps(found, separators=(",", ":"))) > limit:
        found = [{**found[0], **found[1], "update": found[0]["update"]}, *found[2:]]
    return found
