"""psbench against a real tracking server and a real study database.

A real PostgreSQL 16 (``pgserver``) holds both the store of a real ``mlflow server`` on loopback and the Optuna
studies (``hydra.sweeper.storage=postgresql+psycopg://…``); psbench runs as the real command in subprocesses
(fixtures in ``pg_fixtures.py``). Each test keeps to its own MLflow experiment on the shared server and its own
database for studies.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from data_files import needs_real
from psbench.data import sources
from test_cli import last_line
from test_sweeper import FAST, KILL_DRIVER, PARETO

REPO = Path(__file__).resolve().parents[1]


def client(server):
    from mlflow import MlflowClient

    return MlflowClient(server.uri)


def experiment(server, name: str):
    exp = client(server).get_experiment_by_name(name)
    assert exp is not None, f"no experiment {name!r} on the server"
    return exp


def runs_of(server, name: str, parents: bool = False) -> list:
    c = client(server)
    return [
        r
        for r in c.search_runs([experiment(server, name).experiment_id], max_results=1000)
        if parents or r.data.tags.get("psbench.sweep_parent") != "true"
    ]


def on_server(server, exp_name: str) -> tuple[str, ...]:
    return (f"logger.tracking_uri={server.uri}", f"logger.experiment_name={exp_name}")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def db_status(backend_uri: str, run_id: str) -> str:
    """The run's status as PostgreSQL holds it (MLflow's ``runs`` table), not as the server answers."""
    import psycopg

    conninfo = backend_uri.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo) as con:
        return con.execute("SELECT status FROM runs WHERE run_uuid = %s", (run_id,)).fetchone()[0]


# --------------------------------------------------------------------------- cheap: default suite
def test_uris_of_a_server_or_a_database_are_valid_and_a_server_keeps_the_artifacts(compose_cfg, tmp_path):
    """http(s):// and postgresql[+driver]:// are valid stores; with a server, artifacts default to its own root."""
    from psbench.errors import ConfigError
    from psbench.validate import validate

    cfg = compose_cfg()
    assert cfg.logger.artifact_location == f"{tmp_path}/mlartifacts"  # beside the sqlite store
    for uri in ("http://127.0.0.1:5000", "https://mlflow.example.org"):
        cfg = compose_cfg(f"logger.tracking_uri={uri}")
        validate(cfg)
        assert cfg.logger.artifact_location is None  # the server's --artifacts-destination
    cfg = compose_cfg("logger.tracking_uri='postgresql+psycopg://u:p@db:5432/mlflow'")
    validate(cfg)
    assert cfg.logger.artifact_location == f"{tmp_path}/mlartifacts"  # a database store has no artifact root
    cfg = compose_cfg("logger.tracking_uri=http://127.0.0.1:5000", "logger.artifact_location=s3://bucket/psbench")
    validate(cfg)
    with pytest.raises(ConfigError) as info:
        validate(compose_cfg("logger.tracking_uri='mysqlx://db/mlflow'"))
    assert "postgresql[+driver]://" in str(info.value)


def test_a_server_that_does_not_answer_is_one_line_exit_2_and_no_run(run_psbench, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    proc = run_psbench(f"logger.tracking_uri={uri}", "logger.lock_timeout_s=2", root=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = last_line(proc.stderr)
    assert line.startswith(
        f"psbench: error: logger.tracking_uri='{uri}' is invalid: allowed an MLflow tracking server that answers ("
    )
    [summary] = tmp_path.glob("outputs/*/*/summary.json")  # nothing ran; the job's record says why
    record = json.loads(summary.read_text())
    assert record["status"] == "failed" and record["mlflow_run_id"] is None and record["updates_done"] is None
    assert line == f"psbench: error: {record['failure_reason']}"


def test_a_run_logs_params_metrics_provenance_and_artifacts_to_the_server(mlflow_server, run_psbench, tmp_path):
    """One psbench run with ``logger.tracking_uri=http://…``: FINISHED in PostgreSQL, its params, summary metrics,
    provenance tags, and its artifacts in the server's artifact root; nothing tracked in the run's root dir. The
    report reads it back from the server (``python -m analysis --tracking-uri``)."""
    name = unique("one_run")
    root = tmp_path / "root"
    root.mkdir()
    proc = run_psbench(
        "epochs=1",
        "trainer.progress=none",
        "trainer.num_threads=1",
        f"hydra.run.dir={root / 'run'}",
        *on_server(mlflow_server, name),
        root=root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((root / "run" / "summary.json").read_text())
    [run] = runs_of(mlflow_server, name)
    assert run.info.run_id == summary["mlflow_run_id"] and run.info.status == "FINISHED"
    assert db_status(mlflow_server.backend_uri, run.info.run_id) == "FINISHED"
    assert run.data.params["learners"] == "4" and run.data.params["logger.tracking_uri"] == mlflow_server.uri
    assert run.data.metrics["summary/test_error"] == pytest.approx(summary["test_error"], rel=1e-12)
    assert run.data.metrics["summary/ps_updates"] == summary["ps_updates"] > 0
    prov = summary["provenance"]
    assert prov["host"] == socket.gethostname()
    assert {k: run.data.tags[f"psbench.{k}"] for k in prov} == {
        k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in prov.items()
    }

    # artifacts went through the server into its --artifacts-destination, not into <root>/mlartifacts
    assert run.info.artifact_uri.startswith("mlflow-artifacts:/")
    stored = mlflow_server.artifacts / run.info.experiment_id / run.info.run_id / "artifacts"
    logged = {"resolved_config.yaml", "summary.json", *(Path(a).name for a in summary["artifacts"])}
    assert any(n.endswith(".png") for n in logged) and "weights.pt" in logged  # plots and weights too
    assert logged <= {p.name for p in stored.iterdir()}
    assert json.loads((stored / "summary.json").read_text())["mlflow_run_id"] == run.info.run_id
    assert not (root / "mlartifacts").exists() and not (root / "mlflow.db").exists()

    # the report reads runs and their artifacts from the server
    from analysis.runs import attach_summaries, load_runs

    [loaded] = load_runs(mlflow_server.uri, name)
    attach_summaries(mlflow_server.uri, [loaded])
    assert loaded.summary["staleness_hist"] == summary["staleness_hist"]
    from analysis.report import main

    out = tmp_path / "reports"
    assert main(["--tracking-uri", mlflow_server.uri, "--experiment", name, "--out", str(out)]) == 0
    assert (out / "index.html").is_file() and not (root / "reports").exists()


def _at_once(start: float, fn, *args) -> str:
    """``fn(*args)`` at time ``start``; its result, or its error as text (an exception would not cross back)."""
    while time.time() < start:
        time.sleep(0.001)
    try:
        return str(fn(*args))
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _ensure(url: str, art: str, start: float) -> str:
    from psbench import tracking

    return _at_once(start, tracking.ensure_experiment, url, "psbench", art)


def test_a_postgresql_tracking_uri_is_a_store_without_a_server(postgres, tmp_path):
    """``logger.tracking_uri=postgresql+psycopg://…``: MLflow talks to the database itself, artifacts in the local
    artifact location. Four jobs that open the fresh store at once all get the one experiment (MLflow creates its
    tables without a lock: three of them failed with a duplicate key before ensure_experiment retried)."""
    import multiprocessing

    import mlflow  # noqa: F401  (imported once, before the fork)

    from psbench import tracking

    uri = postgres.database(unique("direct"))
    art = tmp_path / "mlartifacts"
    start = time.time() + 2.0
    with multiprocessing.get_context("fork").Pool(4) as pool:
        ids = pool.starmap_async(_ensure, [(uri, str(art), start)] * 4).get(timeout=300)
    [exp_id] = set(ids)
    assert exp_id.isdigit(), exp_id
    run_id = tracking.start_run(uri, exp_id, "hardsync", {"learners": "4"}, {"protocol": "hardsync"})
    (tmp_path / "summary.json").write_text("{}")
    tracking.log_artifacts(uri, run_id, [tmp_path / "summary.json"])
    tracking.end_run(uri, run_id, tracking.FINISHED)
    assert db_status(uri, run_id) == "FINISHED"
    assert (art / run_id / "artifacts" / "summary.json").is_file()


def _open_storage(url: str, start: float) -> str:
    from hydra_plugins.psbench_optuna_sweeper._impl import make_storage

    return _at_once(start, lambda: make_storage(url) and "ok")


def test_sweeps_that_start_at_once_on_a_fresh_study_database_all_open_it(postgres):
    """Optuna creates its tables on first use without a lock: of four processes opening a fresh PostgreSQL
    database at once, three failed with a duplicate key (pg_type) before the sweeper retried."""
    import multiprocessing

    url = postgres.database(unique("fresh"))
    start = time.time() + 1.0
    with multiprocessing.get_context("fork").Pool(4) as pool:
        assert pool.starmap_async(_open_storage, [(url, start)] * 4).get(timeout=300) == ["ok"] * 4
    assert optuna.get_all_study_summaries(url) == []  # the schema is there, and whole


# --------------------------------------------------------------------------- acceptance (slow)
def study(storage: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=storage)


@pytest.mark.slow
def test_a_study_in_postgresql_killed_mid_sweep_resumes_only_the_remaining_trials(
    postgres, mlflow_server, run_psbench, tmp_path
):
    """As the sqlite study of ``test_sweeper``: SIGKILL while the 4th trial starts, the same command again; the
    study lives in PostgreSQL, the runs on the server (each trial FINISHED once, under one sweep parent)."""
    storage, name = postgres.database(unique("study")), unique("killed")
    args = (*PARETO, *FAST[:2], *on_server(mlflow_server, name), f"hydra.sweeper.storage='{storage}'")
    first = run_psbench(*args, root=tmp_path, driver=KILL_DRIVER, env={"KILL_AT": "4"})
    assert first.returncode == -9, first.stderr[-2000:]
    trials = study(storage, "rudra_pareto").get_trials()
    done_first = {t.number for t in trials if t.state == TrialState.COMPLETE}
    [killed] = [t for t in trials if t.state == TrialState.RUNNING]
    assert len(done_first) == 3
    assert not list(tmp_path.rglob("optuna.db"))  # the study is not in a sqlite file

    second = run_psbench(*args, root=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    trials = study(storage, "rudra_pareto").get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 5 and done_first < {t.number for t in complete}  # kept, and only the rest ran
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 5  # no replayed proposal
    [retry] = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert retry.params == killed.params and retry.state == TrialState.COMPLETE
    assert study(storage, "rudra_pareto").user_attrs["identity_hash"]  # the identity is stored with the study

    jobs = runs_of(mlflow_server, name)
    assert len(jobs) == 5 and {r.info.status for r in jobs} == {"FINISHED"}  # the killed job had not started one
    assert sorted(int(r.data.tags["optuna_trial"]) for r in jobs) == sorted(t.number for t in complete)
    [parent] = [r for r in runs_of(mlflow_server, name, parents=True) if r.data.tags.get("psbench.sweep_parent")]
    assert parent.info.status == "FINISHED" and {r.data.tags["mlflow.parentRunId"] for r in jobs} == {
        parent.info.run_id
    }


@pytest.mark.slow
def test_eight_concurrent_runs_from_two_sweeps_land_finished_with_distinct_ids(postgres, mlflow_server, tmp_path):
    """Two Optuna sweeps started at once, each a grid of 4 seeds handed to joblib × 4 in one batch: 8 psbench runs
    in parallel, writing to one mlflow server and two studies in one PostgreSQL database."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    storage, name = postgres.database(unique("studies")), unique("eight")
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    procs = []
    for study_name in ("left", "right"):
        root = tmp_path / study_name
        root.mkdir()
        cmd = [
            sys.executable,
            "-m",
            "psbench.cli",
            "-m",
            "hydra/sweeper=psbench_optuna",
            "seed=choice(0,1,2,3)",
            "hydra.sweeper.sampler.name=grid",
            "hydra.sweeper.n_trials=null",
            "hydra.sweeper.n_jobs=4",
            f"hydra.sweeper.study_name={study_name}",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=4",
            f"hydra.sweeper.storage='{storage}'",
            "epochs=1",
            "trainer.progress=none",
            "trainer.num_threads=1",
            *on_server(mlflow_server, name),
        ]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=root,
                env={**env, "PSBENCH_ROOT": str(root)},
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]

    jobs = runs_of(mlflow_server, name)
    assert len(jobs) == len({r.info.run_id for r in jobs}) == 8
    assert {r.info.status for r in jobs} == {"FINISHED"}
    assert {db_status(mlflow_server.backend_uri, r.info.run_id) for r in jobs} == {"FINISHED"}
    parents = [r for r in runs_of(mlflow_server, name, parents=True) if r.data.tags.get("psbench.sweep_parent")]
    assert len(parents) == 2 and {r.info.status for r in parents} == {"FINISHED"}
    assert sorted(collections.Counter(r.data.tags["mlflow.parentRunId"] for r in jobs).values()) == [4, 4]
    for study_name in ("left", "right"):
        trials = study(storage, study_name).get_trials()
        assert [t.state for t in trials].count(TrialState.COMPLETE) == 4
        mine = [r for r in jobs if r.data.tags["optuna_study"] == study_name]
        assert sorted(int(r.data.tags["optuna_trial"]) for r in mine) == sorted(
            t.number for t in trials if t.state == TrialState.COMPLETE
        )
    # they ran in parallel, and both sweeps at once: more runs open at one time than either sweep has
    edges = sorted([(r.info.start_time, 1) for r in jobs] + [(r.info.end_time, -1) for r in jobs])
    at_once = max(itertools.accumulate(d for _, d in edges))
    print(f"{at_once} of 8 runs open at once")
    assert at_once > 4


@pytest.mark.slow
@needs_real("CIFAR-10 subset (zhang/fig1's data set)", *sources.DATASET_FILES["cifar10_subset"])
def test_the_cluster_recipe_a_paper_sweep_on_the_server_and_its_report(postgres, mlflow_server, tmp_path):
    """README "On a cluster", on one machine: ``python -m sweeps zhang_fig1 scale=ci`` against the server and a
    study in PostgreSQL, then ``python -m analysis --tracking-uri http://…``: the page is measured at ci from the
    server's runs and their summary.json artifacts (its staleness histograms)."""
    storage, name = postgres.database(unique("recipe")), unique("recipe")
    env = {k: v for k, v in os.environ.items() if k not in ("PSBENCH_ROOT", "HYDRA_FULL_ERROR")}
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeps",
            "zhang_fig1",
            "scale=ci",
            *on_server(mlflow_server, name),
            f"hydra.sweeper.storage='{storage}'",
        ],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},  # `-m sweeps` from the repository; the store is the current dir
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert [t.state for t in study(storage, "zhang_fig1_ci").get_trials()] == [TrialState.COMPLETE] * 3
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlartifacts").exists()

    out = tmp_path / "reports"
    rep = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis",
            "--tracking-uri",
            mlflow_server.uri,
            "--experiment",
            name,
            "--out",
            str(out),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rep.returncode == 0, rep.stderr[-3000:]
    [line] = [x for x in rep.stdout.splitlines() if x.startswith("zhang_fig1:")]
    # every configuration has runs at ci (its tail claims need ~37,000 gradients: "not decided" at ci)
    assert line.startswith(("zhang_fig1: reproduced at scale ci", "zhang_fig1: measured at scale ci")), line
    page = (out / "zhang_fig1.md").read_text()
    assert "| 1-softsync |" in page and "1271 |" in page  # the gradient count read from the summaries
