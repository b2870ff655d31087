"""The ``logger`` config group: where runs are tracked (MLflow), checked before any run exists.

MLflow 3 refuses the file store (``file:``/plain paths), so the tracking URI must be a sqlite
database (``sqlite:///<path>``, one machine), a tracking server (``http(s)://``, many machines) or
a PostgreSQL database MLflow talks to directly (``postgresql[+driver]://``); a local artifact
location must be a writable directory. An existing sqlite file must be a database psbench can
read; one another process holds locked is waited for at most ``logger.lock_timeout_s`` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from psbench.schema import Group, Key, check_writable_dir, number, text
from psbench.tracking.mlflow_store import check_store

TRACKING_SCHEMES = ("sqlite", "http", "https", "postgresql")


def _tracking_uri(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    scheme = urlparse(v).scheme.split("+")[0]  # postgresql+psycopg: SQLAlchemy's dialect+driver
    return scheme in TRACKING_SCHEMES and (scheme != "sqlite" or v.startswith("sqlite:///"))


def default_artifact_location(tracking_uri: str, root_dir: str) -> str | None:
    """``logger.artifact_location``'s default: ``<root_dir>/mlartifacts`` beside a database store, ``None``
    for a tracking server, whose own artifact root (``mlflow server --artifacts-destination``) then holds them."""
    return None if urlparse(tracking_uri).scheme in ("http", "https") else f"{root_dir}/mlartifacts"


def _check(cfg: Mapping[str, Any]) -> None:
    """The store opens (waiting at most ``lock_timeout_s`` for a lock) and the artifact dir is writable."""
    lg = cfg["logger"]
    if lg["name"] != "mlflow":
        return
    check_store(lg["tracking_uri"], lg["lock_timeout_s"])
    location = lg["artifact_location"]
    if location is None:  # the tracking server's artifact root
        return
    if not urlparse(location).scheme or urlparse(location).scheme == "file":
        check_writable_dir("logger.artifact_location", location.removeprefix("file://"))


LOGGER = Group(
    {
        "mlflow": {
            "tracking_uri": Key(
                _tracking_uri,
                "sqlite:///<path>, http(s)://<server> or postgresql[+driver]://<db> "
                "(MLflow 3 refuses the file store: file: URIs and plain paths)",
            ),
            "experiment_name": text(),
            "artifact_location": text(
                what="a writable directory or an artifact URI", null="the tracking server's artifact root"
            ),
            "run_name": text(null="derived from the choices"),
            "lock_timeout_s": number(
                0, 86400, lo_open=True, unit="seconds to wait for a store another process holds locked, at most a day"
            ),
        },
        "none": {},
    },
    check=_check,
)
