"""The ``logger`` config group: where runs are tracked (MLflow), checked before any run exists.

MLflow 3 refuses the file store (``file:``/plain paths), so the tracking URI must be a sqlite
database (``sqlite:///<path>``) or a tracking server (``http(s)://``); a local artifact location
must be a writable directory. An existing sqlite file must be a database psbench can read; one
another process holds locked is waited for at most ``logger.lock_timeout_s`` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from psbench.schema import Group, Key, check_writable_dir, number, text
from psbench.tracking.mlflow_store import check_store

TRACKING_SCHEMES = ("sqlite", "http", "https")


def _tracking_uri(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    scheme = urlparse(v).scheme
    return scheme in TRACKING_SCHEMES and (scheme != "sqlite" or v.startswith("sqlite:///"))


def _check(cfg: Mapping[str, Any]) -> None:
    """The store opens (waiting at most ``lock_timeout_s`` for a lock) and the artifact dir is writable."""
    lg = cfg["logger"]
    if lg["name"] != "mlflow":
        return
    check_store(lg["tracking_uri"], lg["lock_timeout_s"])
    location = lg["artifact_location"]
    if not urlparse(location).scheme or urlparse(location).scheme == "file":
        check_writable_dir("logger.artifact_location", location.removeprefix("file://"))


LOGGER = Group({
    "mlflow": {
        "tracking_uri": Key(_tracking_uri, "sqlite:///<path> or http(s)://<server> (MLflow 3 refuses the file "
                            "store: file: URIs and plain paths)"),
        "experiment_name": text(),
        "artifact_location": text(what="a writable directory or an artifact URI"),
        "run_name": text(null="derived from the choices"),
        "lock_timeout_s": number(0, lo_open=True, unit="seconds to wait for a store another process holds locked"),
    },
    "none": {},
}, check=_check)
