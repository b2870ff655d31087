"""MLflow tracking against the real sqlite store (no mocks): store, experiment, runs, naming."""

from __future__ import annotations

import math
import multiprocessing as mp
import shutil
from pathlib import Path

import pytest

from psbench import tracking
from psbench.errors import ConfigError
from psbench.tracking import mlflow_store as ms


def _client(uri: str):
    from mlflow import MlflowClient

    return MlflowClient(uri)


@pytest.fixture
def store(tmp_path, mlflow_template_db) -> str:
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    shutil.copyfile(mlflow_template_db, db)
    return f"sqlite:///{db}"


# ----------------------------------------------------------------------------- naming
def _cfg(**over):
    cfg = {
        "protocol": {"name": "softsync", "n": 4}, "learners": 30, "batch_size": 4,
        "model": {"name": "cifar_cnn"}, "seed": 0, "logger": {"name": "mlflow", "run_name": None},
        "dataset": {"name": "cifar10_subset"}, "tags": {},
    }
    cfg.update(over)
    return cfg


def test_run_name_is_derived_from_the_choices():
    assert tracking.run_name(_cfg()) == "softsync-n4_lam30_mu4_cifar_cnn_s0"
    assert tracking.run_name(_cfg(protocol={"name": "ssp", "staleness_bound": 2}, seed=3)) == (
        "ssp-s2_lam30_mu4_cifar_cnn_s3"
    )
    assert tracking.run_name(_cfg(protocol={"name": "hardsync"})).startswith("hardsync_lam30")
    assert tracking.run_name(_cfg(logger={"name": "mlflow", "run_name": "mine"})) == "mine"


def test_flatten_gives_dotted_string_params():
    flat = tracking.flatten(
        {"a": {"b": 1, "c": [1, 2], "d": None, "e": {}}, "f": "x", "g": True, "h": 0.5}
    )
    assert flat == {"a.b": "1", "a.c": "[1, 2]", "a.d": "null", "a.e": "{}", "f": "x",
                    "g": "true", "h": "0.5"}


def test_run_tags_carry_choices_preset_and_free_tags():
    tags = tracking.run_tags(
        _cfg(tags={"paper": "rudra", "figure": "5"}),
        {"experiment": "rudra/fig5_30softsync", "hparams_search": None},
    )
    assert tags["protocol"] == "softsync" and tags["model"] == "cifar_cnn"
    assert tags["dataset"] == "cifar10_subset" and tags["learners"] == "30"
    assert tags["paper"] == "rudra" and tags["figure"] == "5"
    assert tags["experiment"] == "rudra/fig5_30softsync" and "hparams_search" not in tags


def test_summary_metrics_keeps_numbers_and_bools_only():
    m = tracking.summary_metrics({"test_error": 0.1, "diverged": True, "ps_updates": 7,
                                  "status": "finished", "staleness_hist": {0: 3},
                                  "weights_sha256": None, "test_loss": float("nan")})
    assert m["test_error"] == 0.1 and m["diverged"] == 1.0 and m["ps_updates"] == 7.0
    assert math.isnan(m["test_loss"])
    assert set(m) == {"test_error", "diverged", "ps_updates", "test_loss"}


def test_sqlite_path_and_artifact_uri(tmp_path):
    assert ms.sqlite_path("sqlite:////abs/dir/mlflow.db") == Path("/abs/dir/mlflow.db")
    assert ms.sqlite_path("sqlite:///rel/mlflow.db") == Path("rel/mlflow.db")
    assert ms.sqlite_path("http://localhost:5000") is None
    assert ms.artifact_uri(tmp_path) == tmp_path.resolve().as_uri()
    assert ms.artifact_uri("s3://bucket/x") == "s3://bucket/x"


# ----------------------------------------------------------------------------- store
def test_ensure_experiment_is_idempotent_and_keeps_its_artifact_location(store, tmp_path):
    art = tmp_path / "art"
    first = tracking.ensure_experiment(store, "psbench", str(art))
    assert tracking.ensure_experiment(store, "psbench", str(tmp_path / "other")) == first
    exp = _client(store).get_experiment(first)
    assert exp.name == "psbench" and exp.artifact_location == art.resolve().as_uri()


def test_ensure_experiment_restores_a_deleted_experiment(store):
    eid = tracking.ensure_experiment(store, "gone", None)
    _client(store).delete_experiment(eid)
    assert tracking.ensure_experiment(store, "gone", None) == eid
    assert _client(store).get_experiment(eid).lifecycle_stage == "active"


def test_ensure_experiment_refuses_an_unwritable_store_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    uri = f"sqlite:///{blocker}/sub/mlflow.db"
    with pytest.raises(ConfigError) as info:
        tracking.ensure_experiment(uri, "psbench", None)
    assert info.value.key == "logger.tracking_uri"


def _ensure_in_child(uri: str, name: str, queue) -> None:
    try:
        queue.put(("ok", tracking.ensure_experiment(uri, name, None)))
    except BaseException as e:  # report, do not hang the parent
        queue.put(("error", repr(e)))


def _race(uri: str, name: str, workers: int = 4) -> list:
    # fork: the children start at once with mlflow already imported, as racing jobs would
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_ensure_in_child, args=(uri, name, queue)) for _ in range(workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return results


def test_parallel_jobs_create_one_experiment(store):
    """Multirun jobs that start together all get the same experiment, none fails."""
    results = _race(store, "raced")
    assert [r[0] for r in results] == ["ok"] * 4, results
    assert len({r[1] for r in results}) == 1
    assert [e.name for e in _client(store).search_experiments()].count("raced") == 1


def test_parallel_jobs_on_a_fresh_database_create_schema_once(tmp_path):
    """The first creation of the sqlite schema raced by 4 processes (without the lock this
    fails with "duplicate column name" / "table already exists" from the migrations)."""
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    results = _race(uri, "psbench")
    assert [r[0] for r in results] == ["ok"] * 4, results
    assert len({r[1] for r in results}) == 1


# ----------------------------------------------------------------------------- runs
def test_run_lifecycle_params_tags_metrics_artifacts(store, tmp_path):
    eid = tracking.ensure_experiment(store, "psbench", str(tmp_path / "art"))
    long_value = "x" * 7000
    run_id = tracking.start_run(
        store, eid, "hardsync_lam4_mu32_mlp_s0",
        params={"protocol.name": "hardsync", "learners": "4", "long": long_value},
        tags={"paper": "rudra"},
    )
    c = _client(store)
    run = c.get_run(run_id)
    assert run.info.status == tracking.RUNNING
    assert run.info.run_name == "hardsync_lam4_mu32_mlp_s0"
    assert run.data.params["protocol.name"] == "hardsync"
    assert len(run.data.params["long"]) == ms.MAX_PARAM_VALUE  # clipped, not refused
    assert run.data.tags["paper"] == "rudra"

    tracking.log_metrics(store, run_id, {"test_error": 0.25, "test_loss": float("nan"),
                                         "train_loss": float("inf")})
    artifact = tmp_path / "summary.json"
    artifact.write_text("{}")
    tracking.log_artifacts(store, run_id, [artifact, tmp_path / "missing.png"])
    tracking.set_tags(store, run_id, {"diverged": "false"})
    tracking.end_run(store, run_id, tracking.FINISHED)

    run = c.get_run(run_id)
    assert run.info.status == tracking.FINISHED
    assert run.data.metrics["test_error"] == 0.25
    assert math.isnan(run.data.metrics["test_loss"])
    assert run.data.tags["diverged"] == "false"
    assert [a.path for a in c.list_artifacts(run_id)] == ["summary.json"]
    assert (tmp_path / "art" / run_id / "artifacts" / "summary.json").is_file()


def test_a_run_whose_params_fail_is_not_left_running(store):
    eid = tracking.ensure_experiment(store, "psbench", None)
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException, match="alphanumerics"):
        tracking.start_run(store, eid, "bad", params={"a,b": "1"})
    runs = _client(store).search_runs([eid])
    assert [r.info.status for r in runs] == [tracking.FAILED]
