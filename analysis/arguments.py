"""``python -m analysis``'s arguments, each checked before anything is written: a ``--root`` without ``mlflow.db``
(a typo there made a report of "no runs" and a directory at the typo), a store that does not answer (a tracking
server down retried for minutes, then a traceback), an ``--experiment`` the store does not hold, an ``--out`` or
``--docs`` that cannot be written. Each refusal is one line naming the option and what it allows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: how long the store may take to answer the check (a tracking server's first request), in seconds
PROBE_TIMEOUT_S = 10


def refusal(root: Path, uri: str, tracking_uri: str | None, experiment: str, out: Path, docs: Path | None) -> str:
    """Why the report cannot be built from these arguments (``"--key='value' is invalid: allowed …"``), "" if it
    can. ``uri`` is the store ``tracking_uri`` names, or ``root``'s ``mlflow.db``."""
    if tracking_uri is None and not (root / "mlflow.db").is_file():
        return (
            f"--root='{root}' is invalid: allowed a dir holding mlflow.db, the store psbench and python -m sweeps "
            "write under $PSBENCH_ROOT or the current dir (or --tracking-uri for another store)"
        )
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
    for key, given, folder in (("--docs", docs, docs.parent if docs else None), ("--out", out, out)):
        if folder is not None and (why := _unwritable(folder)):
            return f"{key}='{given}' is invalid: allowed a path that can be written ({why})"
    return ""


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
    """Why ``path`` (a dir, made if missing) cannot be written, "" if it can."""
    if file := next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None):
        return f"{file} is a file"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return err.strerror or type(err).__name__
    return "" if os.access(path, os.W_OK) else "not writable"
