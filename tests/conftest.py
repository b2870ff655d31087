"""Shared fixtures: composing ``conf/``, running the ``psbench`` command, reading MLflow.

* ``compose_cfg(*overrides)`` — the composed config as the CLI would see it, with
  ``paths.root_dir``/``paths.output_dir`` under ``tmp_path`` (the compose API has no
  Hydra runtime to resolve ``${hydra:...}``).
* ``psbench_root`` — a fresh root dir (``PSBENCH_ROOT``) whose ``mlflow.db`` is a copy of a
  schema-only template: creating an MLflow sqlite schema takes ~10 s of migrations, so it
  is done once (cached in pytest's cache dir, keyed by the MLflow version) and copied.
* ``run_psbench(*args, root=..., env=..., driver=...)`` — the real console entry in a
  subprocess (``python -m psbench.cli``), cwd and ``PSBENCH_ROOT`` = ``root``.
* ``postgres``, ``mlflow_server`` — a real PostgreSQL server and a real ``mlflow server`` backed by it, per
  session (``pg_fixtures.py``).
* ``mlflow_runs(root, parents=False)`` — every job run in ``root/mlflow.db`` as dicts (status,
  tags, params, metrics), ``[]`` when no store was created; sweeps' parent runs only with
  ``parents=True``.
* ``running_runs(root)`` — (name, lifecycle stage) of every run still RUNNING in ``root/mlflow.db``, read with
  sqlite, deleted runs included (MLflow's search hides those).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The suite runs as `pytest -n 2` on 2 cores: one intra-op thread per worker (and per CLI subprocess,
# which inherits the environment) avoids oversubscription, which made training tests 10x slower here.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]

from pg_fixtures import mlflow_server, postgres  # noqa: E402, F401  (a real PostgreSQL and mlflow server)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """scikit-learn's digits as a set-up data module (the embedded default data set)."""
    from psbench.data import build_datamodule

    dm = build_datamodule("digits", tmp_path_factory.mktemp("data"), seed=0)
    dm.setup("fit")
    return dm


@pytest.fixture
def compose_cfg(tmp_path):
    from hydra import compose, initialize_config_dir

    import psbench.cli  # registers the resolvers conf/ uses

    def _compose(*overrides: str):
        base = [f"paths.root_dir={tmp_path}", f"paths.output_dir={tmp_path / 'run'}"]
        with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=base + list(overrides))

    return _compose


@pytest.fixture
def compose_preset(compose_cfg):
    """``experiment=<preset>`` plus a sweep entry point's overrides (its ``hydra.*`` ones dropped), validated."""
    from psbench.validate import validate

    def _compose(preset: str, *overrides: str):
        cfg = compose_cfg(f"experiment={preset}", *(o for o in overrides if not o.startswith("hydra.")))
        validate(cfg)
        return cfg

    return _compose


@pytest.fixture
def jpeg_data_dir(tmp_path, monkeypatch) -> str:
    """``paths.data_dir=<dir>`` of a tiny ``cifar10-jpeg/cifar10-jpeg.zip`` (its md5 registered): a config on
    ``dataset=cifar10_jpeg`` (the sweeps' ``full`` scale) validates on any clone, the real zip or not."""
    from data_files import write_cifar10_jpeg
    from psbench.data import sources
    from psbench.data.checksum import KNOWN_MD5, md5_file

    data = tmp_path / "jpeg_data"
    write_cifar10_jpeg(data)
    key = sources.DATASET_FILES["cifar10_jpeg"][0]
    monkeypatch.setitem(KNOWN_MD5, key, md5_file(data / key))
    return f"paths.data_dir={data}"


def _build_template(cache_dir: Path) -> Path:
    import fcntl

    from psbench.tracking import ensure_store

    final = cache_dir / "template.db"
    with open(cache_dir / "build.lock", "a") as fh:  # pytest-xdist workers build it once
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        if not final.exists():
            tmp = cache_dir / f"building-{os.getpid()}.db"
            tmp.unlink(missing_ok=True)
            ensure_store(f"sqlite:///{tmp}")
            os.replace(tmp, final)  # an interrupted build never leaves a half schema
    return final


@pytest.fixture(scope="session")
def mlflow_template_db(request, tmp_path_factory) -> Path:
    """A schema-only MLflow sqlite database to copy (no experiments but Default)."""
    import mlflow

    cache = getattr(request.config, "cache", None)
    name = f"psbench_mlflow_{mlflow.__version__}"
    cache_dir = Path(cache.mkdir(name)) if cache is not None else tmp_path_factory.mktemp(name)
    return _build_template(cache_dir)


@pytest.fixture
def psbench_root(tmp_path, mlflow_template_db) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copyfile(mlflow_template_db, root / "mlflow.db")
    return root


@pytest.fixture
def run_psbench():
    def _run(
        *args: str, root: Path, env: dict[str, str] | None = None, driver: str | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        full_env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
        full_env["PSBENCH_ROOT"] = str(root)
        full_env.update(env or {})
        cmd = [sys.executable, "-c", driver] if driver else [sys.executable, "-m", "psbench.cli"]
        return subprocess.run(
            [*cmd, *args],
            cwd=root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    return _run


@pytest.fixture
def mlflow_runs():
    def _runs(root: Path, parents: bool = False) -> list[dict]:
        db = root / "mlflow.db"
        if not db.exists():
            return []
        from mlflow import MlflowClient

        c = MlflowClient(f"sqlite:///{db}")
        ids = [e.experiment_id for e in c.search_experiments()]
        return [
            {
                "run_id": r.info.run_id,
                "status": r.info.status,
                "name": r.info.run_name,
                "experiment_id": r.info.experiment_id,
                "artifact_uri": r.info.artifact_uri,
                "tags": dict(r.data.tags),
                "params": dict(r.data.params),
                "metrics": dict(r.data.metrics),
            }
            for r in c.search_runs(ids)
            if parents or r.data.tags.get("psbench.sweep_parent") != "true"
        ]

    return _runs


@pytest.fixture
def running_runs():
    def _running(root: Path) -> list[tuple[str, str]]:
        import sqlite3

        db = root / "mlflow.db"
        if not db.exists():
            return []
        with sqlite3.connect(db, timeout=30) as con:
            return con.execute("select name, lifecycle_stage from runs where status = 'RUNNING'").fetchall()

    return _running
