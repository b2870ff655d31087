"""MLflow tracking against the real sqlite store (no mocks): store, experiment, runs, naming."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import shutil
import subprocess
from pathlib import Path

import pytest

from psbench import tracking
from psbench.cli import CONF_DIR
from psbench.errors import ConfigError
from psbench.tracking import mlflow_store as ms
from psbench.tracking import provenance, sweep


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
        "protocol": {"name": "softsync", "n": 4},
        "learners": 30,
        "batch_size": 4,
        "model": {"name": "cifar_cnn"},
        "seed": 0,
        "logger": {"name": "mlflow", "run_name": None},
        "dataset": {"name": "cifar10_subset"},
        "tags": {},
    }
    cfg.update(over)
    return cfg


def test_run_name_is_the_protocol_and_what_differs_from_the_defaults():
    defaults = tracking.config_defaults(CONF_DIR / "config.yaml")
    assert defaults == {
        "model": "mlp",
        "dataset": "digits",
        "compression": "none",
        "optimizer": "sgd",
        "lr_policy": "constant",
        "topology": "rudra_base",
        "hardware": "laptop",
        "engine": "sim",
        "learners": 4,
        "batch_size": 32,
        "seed": 0,
    }
    assert tracking.run_name(_cfg(), defaults) == "4-softsync-λ30-μ4-cifar_cnn-cifar10_subset"
    assert tracking.run_name(_cfg(protocol={"name": "ssp", "staleness_bound": 2}, seed=3, learners=4), defaults) == (
        "ssp-s2-μ4-cifar_cnn-cifar10_subset-seed3"
    )
    assert tracking.run_name(_cfg(logger={"name": "mlflow", "run_name": "mine"}), defaults) == "mine"


RUN_NAMES = {  # overrides -> name: runs differing only in codec, dataset, engine, H or topology
    (): "hardsync",
    ("compression=terngrad",): "hardsync-terngrad",
    ("compression=topk",): "hardsync-topk",
    ("dataset=cifar10_subset",): "hardsync-cifar10_subset",
    ("engine=dist",): "hardsync-dist",
    ("protocol=agn",): "agn-H10",
    ("protocol=agn", "protocol.local_steps=3"): "agn-H3",
    ("protocol=aeasgd", "protocol.rho=2.5"): "aeasgd-H10-ρ2.5",
    ("topology=rudra_adv",): "hardsync-rudra_adv",
    ("topology=rudra_adv_star",): "hardsync-rudra_adv_star",
    (
        "protocol=softsync",
        "protocol.n=4",
        "learners=30",
        "batch_size=4",
        "dataset=cifar10_subset",
        "compression=terngrad",
        "engine=dist",
    ): "4-softsync-λ30-μ4-cifar10_subset-terngrad-dist",
}


def test_runs_differing_in_one_choice_get_distinct_deterministic_names(compose_cfg):
    from omegaconf import OmegaConf

    defaults = tracking.config_defaults(CONF_DIR / "config.yaml")

    def name(overrides):
        return tracking.run_name(OmegaConf.to_container(compose_cfg(*overrides), resolve=True), defaults)

    assert {o: name(o) for o in RUN_NAMES} == RUN_NAMES
    assert name(("compression=terngrad",)) == name(("compression=terngrad",))  # deterministic


def test_a_swept_axis_is_named_even_at_its_default(compose_cfg):
    """Issue 41: ``-m learners=4,8`` named the λ = 4 job ``hardsync`` (4 is the default). Every swept key is named:
    λ, μ, seed and the groups at their defaults too, any other key by its last part and value."""
    from omegaconf import OmegaConf

    defaults = tracking.config_defaults(CONF_DIR / "config.yaml")

    def name(swept, *overrides):
        return tracking.run_name(OmegaConf.to_container(compose_cfg(*overrides), resolve=True), defaults, swept)

    assert name([]) == "hardsync"  # a single run: what differs from the defaults, as before
    assert name(["learners"], "learners=4") == "hardsync-λ4"
    assert name(["learners"], "learners=8") == "hardsync-λ8"
    assert name(["batch_size", "seed", "model"]) == "hardsync-μ32-mlp-seed0"
    assert name(["optimizer.lr", "protocol.n"], "protocol=softsync", "protocol.n=2") == "2-softsync-lr0.1"
    assert name(["+trainer.divergence_factor"]) == "hardsync-divergence_factor4.0"


def test_a_sweeps_swept_keys_are_its_sweep_overrides_and_its_sweepers_params(tmp_path):
    from omegaconf import OmegaConf

    config = OmegaConf.create(
        {
            "hydra": {
                "overrides": {"task": ["learners=4,8", "epochs=1", "optimizer.lr=range(0.1,0.3,0.1)"]},
                "sweeper": {"params": {"batch_size": "choice(4, 8)", "protocol.n": "int(interval(1, 4))"}},
            }
        }
    )
    assert sweep.swept_keys(config) == ["learners", "optimizer.lr", "batch_size", "protocol.n"]


def test_the_sweepers_results_file_is_an_artifact_of_the_parent_run(store, tmp_path):
    """The Optuna sweeper's optimization_results.yaml (best trial or Pareto front) is logged to the sweep's parent
    run when the sweep ends."""
    from omegaconf import OmegaConf

    eid = tracking.ensure_experiment(store, "psbench", str(tmp_path / "art"))  # not ./mlruns in the cwd
    sweep_dir = tmp_path / "multirun" / "opt"
    config = OmegaConf.create(
        {
            "hydra": {"sweep": {"dir": str(sweep_dir)}, "overrides": {"task": []}},
            "paths": {"root_dir": str(tmp_path)},
            "logger": {"tracking_uri": store},
            "trainer": {"num_threads": 1},
        }
    )
    sweep.start_sweep(config, eid)
    parent = json.loads((sweep_dir / sweep.SWEEP_FILE).read_text())["parent_run_id"]
    child = tracking.start_run(store, eid, "hardsync", tags={"mlflow.parentRunId": parent})
    tracking.end_run(store, child, tracking.FINISHED)
    (sweep_dir / "optimization_results.yaml").write_text("name: optuna\nbest_value: 0.1\n")
    sweep.end_sweep(config)
    c = _client(store)
    assert [a.path for a in c.list_artifacts(parent)] == ["optimization_results.yaml"]
    got = Path(c.download_artifacts(parent, "optimization_results.yaml", str(tmp_path / "dl"))).read_text()
    assert got == "name: optuna\nbest_value: 0.1\n"


def test_count_line_names_each_failed_job_by_what_sets_it_apart():
    jobs = [
        {"num": n, "overrides": ["protocol=softsync", f"learners={lam}"], "status": st, "reason": why}
        for n, lam, st, why in (
            (2, 8, "finished", None),
            (0, 1, "failed", "protocol.n=4 is invalid"),
            (1, 2, "diverged", None),
            (3, 3, "failed", "x\ny"),
        )
    ]
    assert sweep.count_line(jobs) == (
        "2 of 4 jobs failed: job 0 [learners=1]: protocol.n=4 is invalid; job 3 [learners=3]: x y"
    )
    assert sweep.count_line([j for j in jobs if j["status"] != "failed"]) is None


def _git(cwd, *args):
    subprocess.run(
        ["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


def test_git_state_is_read_only_from_a_checkout_holding_the_package(tmp_path):
    repo = tmp_path / "repo"
    pkg = repo / "src" / "psbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "x")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert provenance.git_state(pkg) == (head, False)
    (pkg / "__init__.py").write_text("changed = True\n")
    assert provenance.git_state(pkg) == (head, True)
    # installed non-editably: site-packages inside some other repository, or outside any
    site = repo / ".venv" / "lib" / "site-packages" / "psbench"
    site.mkdir(parents=True)
    assert provenance.git_state(site) == (None, None)
    (tmp_path / "plain" / "psbench").mkdir(parents=True)
    assert provenance.git_state(tmp_path / "plain" / "psbench") == (None, None)
    tags = provenance.provenance_tags({"git_commit": None, "git_dirty": None, "version": "0.1.0", "threads": 2})
    assert tags == {"psbench.version": "0.1.0", "psbench.threads": "2"}


def test_flatten_gives_dotted_string_params():
    flat = tracking.flatten({"a": {"b": 1, "c": [1, 2], "d": None, "e": {}}, "f": "x", "g": True, "h": 0.5})
    assert flat == {"a.b": "1", "a.c": "[1, 2]", "a.d": "null", "a.e": "{}", "f": "x", "g": "true", "h": "0.5"}


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
    m = tracking.summary_metrics(
        {
            "test_error": 0.1,
            "diverged": True,
            "ps_updates": 7,
            "status": "finished",
            "staleness_hist": {0: 3},
            "weights_sha256": None,
            "test_loss": float("nan"),
        }
    )
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
        store,
        eid,
        "hardsync_lam4_mu32_mlp_s0",
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

    tracking.log_metrics(store, run_id, {"test_error": 0.25, "test_loss": float("nan"), "train_loss": float("inf")})
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


def test_an_interrupted_sweep_ends_its_parent_killed_and_a_rerun_reuses_it(store, tmp_path):
    from omegaconf import OmegaConf

    eid = tracking.ensure_experiment(store, "psbench", str(tmp_path / "art"))  # not ./mlruns in the cwd
    config = OmegaConf.create(
        {
            "hydra": {"sweep": {"dir": str(tmp_path / "multirun" / "s")}, "overrides": {"task": ["seed=0,1"]}},
            "paths": {"root_dir": str(tmp_path)},
            "logger": {"tracking_uri": store},
            "trainer": {"num_threads": 1},
        }
    )
    sweep.start_sweep(config, eid)
    info = json.loads((tmp_path / "multirun" / "s" / sweep.SWEEP_FILE).read_text())
    parent = info["parent_run_id"]
    assert info["sweep_id"] == "multirun/s"
    child = tracking.start_run(store, eid, "hardsync", tags={"mlflow.parentRunId": parent, "sweep_id": "multirun/s"})
    sweep.abandon(SystemExit(143))  # e.g. SIGTERM turned into exit 143
    run = _client(store).get_run(parent)
    assert run.info.status == "KILLED" and run.data.tags["failure_reason"] == "SystemExit: 143"
    assert run.info.run_name == "sweep seed=0,1" and run.data.tags["psbench.threads"] == "1"

    sweep.start_sweep(config, eid)  # the same sweep dir again: the same parent, running again
    assert _client(store).get_run(parent).info.status == "RUNNING"
    tracking.end_run(store, child, tracking.FINISHED)
    assert sweep.end_sweep(config) is None  # no job recorded in this invocation, none failed
    run = _client(store).get_run(parent)
    assert run.info.status == "FINISHED" and run.data.metrics["jobs"] == 0 and "failure_reason" not in run.data.tags
    assert len(_client(store).search_runs([eid])) == 2
