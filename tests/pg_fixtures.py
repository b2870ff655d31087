"""A real PostgreSQL server and a real ``mlflow server`` on loopback: the cluster set-up of README "On a cluster".

* ``postgres`` (session) — PostgreSQL 16 from the ``pgserver`` wheel in a fresh temporary data dir (each
  pytest-xdist worker has its own session, so its own server), stopped and deleted at teardown. Not under pytest's
  basetemp: as root, pgserver runs PostgreSQL as its own system user, and another pytest session resets
  ``/tmp/pytest-of-root`` to mode 0700 at its start, which would lock that user out of its data dir. Durability
  is off (``fsync``, ``synchronous_commit``): a test server, started and stopped faster. ``postgres.database(name)``
  creates a fresh database and returns its SQLAlchemy URL, ``postgresql+psycopg://postgres@/<name>?host=<socket
  dir>`` (the server listens on a Unix socket in its data dir, no TCP port to collide on).
* ``mlflow_server`` (session) — ``mlflow server`` with its backend store in a database of that server and its
  artifact root (``--artifacts-destination``) in a tmp dir, on a free loopback port; waited on until ``/health``
  answers, terminated at teardown. ``.uri`` is ``http://127.0.0.1:<port>``, ``.artifacts`` the artifact root.
  Tests share it and keep apart by experiment name (``logger.experiment_name``).

Both are skipped, saying why, only where ``pgserver`` or ``psycopg`` cannot be imported (a base install without the
``dev`` extra); a server that fails to start is an error, with the end of its log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

STARTUP_TIMEOUT_S = 120.0  # a fresh MLflow schema takes ~6 s here; a loaded 2-core machine much longer


@dataclass
class Postgres:
    server: object  # pgserver.PostgresServer
    socket_dir: str

    def database(self, name: str) -> str:
        """A new, empty database ``name`` (dropped first if a previous test left it); its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self.server.get_uri(), autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            con.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@/{name}?host={self.socket_dir}"


@dataclass
class MlflowServer:
    uri: str
    artifacts: Path
    backend_uri: str
    startup_s: float


def _need_postgres() -> None:
    for module in ("pgserver", "psycopg"):
        pytest.importorskip(
            module,
            reason=f"{module} is not installed (pip install -e '.[dev]' installs it): "
            "no PostgreSQL server to test the cluster set-up against",
        )


@pytest.fixture(scope="session")
def postgres():
    _need_postgres()
    from urllib.parse import parse_qs, urlparse

    import pgserver

    data = Path(tempfile.mkdtemp(prefix="psbench-pg-"))
    try:
        server = pgserver.get_server(data, cleanup_mode="stop")
        [socket_dir] = parse_qs(urlparse(server.get_uri()).query)["host"]
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as con:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                con.execute(f"ALTER SYSTEM SET {setting} = off")
            con.execute("SELECT pg_reload_conf()")
        try:
            yield Postgres(server, socket_dir)
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def mlflow_server(postgres, tmp_path_factory):
    backend = postgres.database("mlflow")
    artifacts = tmp_path_factory.mktemp("mlflow_artifacts")
    log = tmp_path_factory.mktemp("mlflow_log") / "server.log"
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    mlflow = Path(sys.executable).with_name("mlflow")
    # MLflow 3's server also starts a job runner with seven worker processes (GenAI evaluation jobs): psbench
    # uses none, and they double the start-up time on a loaded machine
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                str(mlflow),
                "server",
                "--backend-store-uri",
                backend,
                "--artifacts-destination",
                str(artifacts),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )  # its uvicorn workers go with it at teardown
    try:
        while not _healthy(uri):
            if proc.poll() is not None or time.perf_counter() - t0 > STARTUP_TIMEOUT_S:
                raise RuntimeError(f"mlflow server did not start (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield MlflowServer(uri, artifacts, backend, time.perf_counter() - t0)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # uvicorn waits for open keep-alive connections: not long
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
