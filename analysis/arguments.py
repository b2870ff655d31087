"""``python -m analysis``'s arguments, each checked before anything is written: a ``--root`` without ``mlflow.db``
(a typo there made a report of "no runs" and a directory at the typo), a local store that does not exist (MLflow would
create one at the typo), a store that does not answer (a tracking server down was retried for minutes, then a
traceback), an ``--experiment`` the store does not hold, an ``--out`` or ``--docs`` that cannot be written. Each
refusal is one line naming the option and what it allows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psbench.tracking.mlflow_store import sqlite_path

#: how long the store may take to answer the check (a tracking server's first request), in seconds
PROBE_TIMEOUT_S = 10


def refusal(root: Path, uri: str, tracking_uri: str | None, experiment: str, out: Path, docs: Path | None) -> str:
    """Why the report cannot be built from these arguments (``"--key='value' is invalid: allowed …"``), "" if it
    can; then ``out`` and ``docs``' folder exist. ``uri`` is the store ``tracking_uri`` names, or ``root``'s
    ``mlflow.db``. Nothing is created before every check has passed (MLflow would make a store at a mistyped path)."""
    if tracking_uri is None and not (root / "mlflow.db").is_file():
        return (
            f"--root='{root}' is invalid: allowed a dir holding mlflow.db, the store psbench and python -m sweeps "
            "write under $PSBENCH_ROOT or the current dir (or --tracking-uri for another store)"
        )
    if tracking_uri is not None and (missing := _missing_local_store(tracking_uri)):
        return f"--tracking-uri='{tracking_uri}' is invalid: allowed an existing store ({missing})"
    try:
        with _one_try():
            from mlflow import MlflowClient

            names = sorted(e.name for e in MlflowClient(uri).search_experiments())
    except Exception as err:  # any store error is the refusal's reason
        said = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        key = "--tracking-uri" if tracking_uri else "--root"
        return f"{key}='{tracking_uri or root}' is invalid: allowed an MLflow store that answers ({said[:300]})"
    if experiment not in names:
        held = ", ".join(names) or "none"
        return f"--experiment='{experiment}' is invalid: allowed one of the store's experiments: {held}"
    if docs is not None and docs.is_dir():
        return f"--docs='{docs}' is invalid: allowed a file path (it is a directory)"
    folders = [("--out", out, out)]
    if docs is not None:
        folders.insert(0, ("--docs", docs, docs.parent))
    for key, given, folder in folders:
        if why := _unwritable(folder):
            return f"{key}='{given}' is invalid: allowed a path that can be written ({why})"
    for key, given, folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            return f"{key}='{given}' is invalid: allowed a path that can be written ({err.strerror})"
    return ""


def _missing_local_store(uri: str) -> str:
    """Why a local store ``uri`` (``sqlite:///path``, ``file:path``, a plain path) does not exist, "" if it does or
    is a server's (whose answer :func:`refusal` checks)."""
    if (path := sqlite_path(uri)) is not None:
        return "" if path.is_file() else f"no such file: {path}"
    if ("://" in uri and not uri.startswith("file:")) or uri.startswith("databricks"):
        return ""
    path = Path(uri.removeprefix("file://").removeprefix("file:"))
    return "" if path.is_dir() else f"no such directory: {path}"


@contextmanager
def _one_try() -> Iterator[None]:
    """MLflow's HTTP requests without retries and with a short timeout while the store is checked (its defaults retry
    a refused connection with back-off for minutes)."""
    keys = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(PROBE_TIMEOUT_S)}
    before = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _unwritable(path: Path) -> str:
    """Why the dir ``path`` could not be made or written, "" if it can (nothing is created here)."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                return f"{p} is a file"
            return "" if os.access(p, os.W_OK) else f"{p} is not writable"
    return ""
