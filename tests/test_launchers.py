"""Hydra's launchers as psbench options: joblib, submitit (local, SLURM), Ray.

Real launchers, real subprocesses, the real sqlite MLflow store and Optuna storage; tiny digits jobs:

* a launcher whose plugin is not installed (made unimportable in the subprocess, as after a plain
  ``pip install -e .``) is one line naming the ``cluster`` extra, exit 2, before any run or sweep dir;
* the ``resources`` preset of each scale lands in the SLURM and Ray launchers' keys (composed config);
* a grid under joblib and an Optuna study under submitit_local run their jobs in parallel workers, one MLflow
  child run per job under the sweep's parent; a trial with bad input fails alone, its batch-mate completes;
* slow: 4-trial Optuna studies under submitit_local and Ray (n_jobs=2), every run FINISHED, every trial
  COMPLETE; a submitit job pre-empted (USR2, what SLURM sends) is requeued and resumes from its checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.trial import TrialState

from psbench import launchers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps import _runner, run_all

TINY = ("epochs=1", "trainer.max_updates=3", "trainer.progress=none", "trainer.num_threads=1")
# a real plugin made unimportable, as when the cluster extra is not installed
NOT_INSTALLED = """
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] == ["hydra_plugins", "hydra_ray_launcher"]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""


def _study(storage_dir, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{storage_dir}/optuna.db")


# --------------------------------------------------------------------------- not installed
@pytest.mark.parametrize("entry", ["psbench", "sweep"])
def test_a_launcher_that_is_not_installed_is_one_line_naming_the_extra(
    run_psbench, psbench_root, mlflow_runs, tmp_path, entry
):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(NOT_INSTALLED)
    # `-m sweeps` is found on the repository's path (sweeps/ is not installed)
    env = {"PYTHONPATH": os.pathsep.join([str(shadow), str(_runner.REPO), os.environ.get("PYTHONPATH", "")])}
    if entry == "psbench":
        res = run_psbench("-m", "hydra/launcher=ray", "learners=1,2", *TINY, root=psbench_root, env=env)
    else:  # a paper sweep entry point passes the override through to psbench
        res = subprocess.run(
            [sys.executable, "-m", "sweeps", "rudra_table2", "scale=ci", "hydra/launcher=ray"],
            cwd=psbench_root,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **env, "PSBENCH_ROOT": str(psbench_root)},
        )
    assert res.returncode == 2, res.stderr[-2000:]
    [line] = [s for s in res.stderr.splitlines() if s.startswith("psbench")]
    assert line.startswith(
        "psbench: error: hydra/launcher='ray' is invalid: allowed one of basic, joblib, "
        "submitit_local, submitit_slurm (installed); ray is hydra-ray-launcher"
    ), line
    assert "pip install -e '.[cluster]'" in line
    assert not (psbench_root / "multirun").exists() and not (psbench_root / "sweeps").exists()
    assert mlflow_runs(psbench_root, parents=True) == []
    # the same command with the plugin importable gets past the check (here: --cfg, nothing runs)
    ok = run_psbench("hydra/launcher=ray", "--cfg", "hydra", "-p", "hydra.launcher", root=psbench_root)
    assert ok.returncode == 0 and "hydra_ray_launcher.ray_launcher.RayLauncher" in ok.stdout, ok.stderr[-2000:]


def test_the_check_knows_each_launcher_and_leaves_others_to_hydra():
    assert launchers.requested(["-m", "hydra/launcher=joblib", "learners=1", "hydra/launcher=ray"]) == "ray"
    assert launchers.requested(["hydra.launcher.n_jobs=2"]) is None
    assert all(launchers.installed(n) for n in launchers.PLUGINS)  # the dev install carries the extra
    launchers.check(["hydra/launcher=no_such_launcher"])  # Hydra lists the options there are


# --------------------------------------------------------------------------- resources
@pytest.mark.parametrize("scale", ["ci", "small", "full", "paper"])
def test_each_scale_s_resources_reach_the_slurm_and_ray_launchers(scale, tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import psbench.cli

    cmd = _runner.command("rudra_table2", "rudra/table2", [], scale, ["hydra/launcher=submitit_slurm"])
    assert f"resources={scale}" in cmd and cmd[-1] == "hydra/launcher=submitit_slurm"  # the user's override last
    preset = OmegaConf.load(psbench.cli.CONF_DIR / "resources" / f"{scale}.yaml")
    base = [f"paths.root_dir={tmp_path}", f"resources={scale}", "experiment=rudra/table2"]
    with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
        slurm = compose("config", [*base, "hydra/launcher=submitit_slurm"], return_hydra_config=True)
        ray = compose("config", [*base, "hydra/launcher=ray"], return_hydra_config=True)
    got = OmegaConf.to_container(slurm.hydra.launcher, resolve=True)
    assert {k: got[k] for k in ("timeout_min", "cpus_per_task", "gpus_per_node", "mem_gb")} == {
        "timeout_min": preset.timeout_min,
        "cpus_per_task": preset.cpus,
        "gpus_per_node": preset.gpus,
        "mem_gb": preset.mem_gb,
    }
    assert got["_target_"] == "hydra_plugins.psbench_launchers.requeue.SlurmLauncher" and got["max_num_timeout"] == 3
    remote = OmegaConf.to_container(ray.hydra.launcher.ray.remote, resolve=True)
    assert remote == {"num_cpus": preset.cpus, "num_gpus": preset.gpus}
    assert ray.hydra.launcher.ray.init.include_dashboard is False


def test_run_all_passes_launcher_overrides_to_every_entry_point_and_sweeper_keys_to_optuna_ones():
    from sweeps import run_all

    extra = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", "hydra.sweeper.n_jobs=8"]
    cmds = dict(run_all.commands("ci", None, extra))
    assert cmds["rudra_table2"][-3:] == extra
    assert "hydra/launcher=submitit_slurm" in cmds["agn_table1"] and "hydra.sweeper.n_jobs=8" not in cmds["agn_table1"]


def test_a_run_resumes_under_other_resources():
    from psbench.checkpoint import config_diff

    ci = {"protocol": {"n": 4}, "resources": {"name": "ci", "cpus": 1, "gpus": 0}}
    paper = {"protocol": {"n": 4}, "resources": {"name": "paper", "cpus": 8, "gpus": 1}}
    assert config_diff(ci, paper) == []
    assert config_diff(ci, {**paper, "protocol": {"n": 2}}) == ["protocol.n (4 → 2)"]


def test_the_resources_of_a_study_are_not_part_of_its_identity():
    from hydra_plugins.psbench_optuna_sweeper._identity import identity

    def ident(resources):
        return identity({}, ["epochs=1", f"resources={resources}"], {}, {}, [], {}, ["test_error"], ["minimize"])

    assert ident("ci") == ident("paper") and ident("ci")["fixed"] == {"epochs": "1"}


# --------------------------------------------------------------------------- cheap, default suite
def test_a_grid_under_joblib_runs_its_jobs_in_workers_under_one_parent_run(run_psbench, psbench_root, mlflow_runs):
    res = run_psbench(
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "hydra.sweep.dir=grid",
        "learners=1,2",
        *TINY,
        root=psbench_root,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = mlflow_runs(psbench_root)
    [parent] = [r for r in mlflow_runs(psbench_root, parents=True) if r not in runs]
    assert sorted(r["params"]["learners"] for r in runs) == ["1", "2"]
    assert {r["status"] for r in runs} == {"FINISHED"} and parent["status"] == "FINISHED"
    assert {r["tags"]["mlflow.parentRunId"] for r in runs} == {parent["run_id"]}
    assert {r["tags"]["sweep_id"] for r in runs} == {"grid"} == {parent["tags"]["sweep_id"]}
    for n in (0, 1):
        assert json.loads((psbench_root / "grid" / str(n) / "summary.json").read_text())["status"] == "finished"


def test_a_bad_trial_under_submitit_fails_alone_and_its_batch_mate_completes(run_psbench, psbench_root, mlflow_runs):
    """n_jobs=2 trials in submitit's worker processes: the bad one's error comes back as its result."""
    res = run_psbench(
        "-m",
        "hydra/sweeper=psbench_optuna",
        "hydra/launcher=submitit_local",
        "hydra.sweep.dir=s",
        "hydra.sweeper.study_name=pair",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.n_jobs=2",
        "protocol=softsync",
        "hydra.sweeper.cases={ok: {learners: 2}, bad: {learners: 2, protocol.n: 5}}",
        *TINY,
        root=psbench_root,
    )
    assert res.returncode == 1, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-2].startswith("psbench: 1 of 2 trials crashed")
    trials = {t.params["case"]: t for t in _study(psbench_root / "s", "pair").get_trials()}
    assert trials["ok"].state == TrialState.COMPLETE
    assert trials["bad"].state == TrialState.FAIL
    assert trials["bad"].user_attrs["crashed"].startswith("ConfigError: protocol.n=5 is invalid")
    [run] = mlflow_runs(psbench_root)  # bad input starts no MLflow run
    assert run["status"] == "FINISHED" and run["tags"]["case"] == "ok"
    assert list((psbench_root / "s" / ".submitit").iterdir())  # the jobs went through submitit


# --------------------------------------------------------------------------- acceptance (slow)
def _submitit_task(p: psutil.Process) -> bool:
    """Whether ``p`` is a live submitit job process (``python -m submitit.core._submit``)."""
    try:
        return p.status() != psutil.STATUS_ZOMBIE and "submitit.core._submit" in " ".join(p.cmdline())
    except psutil.Error:  # exited meanwhile
        return False


STUDY = (
    "-m",
    "hydra/sweeper=psbench_optuna",
    "hydra.sweeper.sampler.name=grid",
    "hydra.sweeper.n_trials=4",
    "hydra.sweeper.n_jobs=2",
    "hydra.sweeper.params={learners: 'choice(1,2,3,4)'}",
    "epochs=1",
    "trainer.max_updates=5",
    "trainer.progress=none",
    "trainer.num_threads=1",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "launcher",
    [
        ("hydra/launcher=submitit_local",),
        ("hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2"),
    ],
    ids=["submitit_local", "ray"],
)
def test_a_4_trial_optuna_study_runs_its_trials_in_parallel_under_the_launcher(
    run_psbench, psbench_root, mlflow_runs, launcher
):
    t0 = time.time()
    res = run_psbench(*STUDY, *launcher, "hydra.sweep.dir=study", "hydra.sweeper.study_name=four", root=psbench_root)
    assert res.returncode == 0, res.stderr[-3000:]
    trials = _study(psbench_root / "study", "four").get_trials()
    assert len(trials) == 4 and {t.state for t in trials} == {TrialState.COMPLETE}
    runs = mlflow_runs(psbench_root)
    assert len(runs) == 4 and {r["status"] for r in runs} == {"FINISHED"}
    assert sorted(int(r["tags"]["optuna_trial"]) for r in runs) == [0, 1, 2, 3]
    assert sorted(r["run_id"] for r in runs) == sorted(t.user_attrs["mlflow_run_id"] for t in trials)
    parents = {r["tags"]["mlflow.parentRunId"] for r in runs}
    assert len(parents) == 1
    # two batches of two: each batch's jobs overlap in time (they ran in parallel)
    spans = {}
    for t in trials:
        s = json.loads((psbench_root / "study" / t.user_attrs["subdir"] / "summary.json").read_text())
        assert s["status"] == "finished" and s["mlflow_run_id"] == t.user_attrs["mlflow_run_id"]
        spans[t.number] = (t.datetime_start.timestamp(), t.datetime_complete.timestamp())
    for a, b in ((0, 1), (2, 3)):
        assert spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
    print(f"{launcher[0]}: 4 trials in {time.time() - t0:.1f} s")


@pytest.mark.slow
def test_a_preempted_submitit_job_is_requeued_and_resumes_from_its_checkpoint(psbench_root, mlflow_runs):
    """USR2 (what SLURM sends before pre-emption or the time limit; submitit's local executor sends it too)
    to the job's process once a checkpoint exists: submitit requeues the job, which resumes in the same run
    dir and MLflow run from the checkpointed update, and finishes."""
    cmd = [
        sys.executable,
        "-m",
        "psbench.cli",
        "-m",
        "hydra/launcher=submitit_local",
        "hydra.sweep.dir=S",
        "learners=2",
        "epochs=50",
        "trainer.max_updates=600",
        "trainer.checkpoint_every=25",
        "trainer.progress=none",
        "trainer.num_threads=1",
    ]
    env = {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, "PSBENCH_ROOT": str(psbench_root)}
    proc = subprocess.Popen(cmd, cwd=psbench_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = psbench_root / "S" / "0" / "checkpoint.pt"
    deadline = time.time() + 300
    while not ckpt.exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint before the job ended"
        time.sleep(0.05)
    [task] = [c for c in psutil.Process(proc.pid).children(recursive=True) if _submitit_task(c)]
    task.send_signal(signal.SIGUSR2)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((psbench_root / "S" / "0" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["updates_done"] == 600
    assert summary["resumed_from_update"] is not None and 25 <= summary["resumed_from_update"] < 600
    assert not ckpt.exists()
    [run] = mlflow_runs(psbench_root)  # the same run, not a second one
    assert run["status"] == "FINISHED" and run["run_id"] == summary["mlflow_run_id"]
    assert run["tags"]["psbench.resumed_from_update"] == str(summary["resumed_from_update"])
    assert "failure_reason" not in run["tags"]
    logs = "".join(p.read_text() for p in (psbench_root / "S" / ".submitit").rglob("*_log.*"))
    assert "this job is preempted" in logs and "Requeued job" in logs


@pytest.mark.slow
def test_a_trial_whose_job_process_dies_fails_alone_though_the_launcher_loses_the_batch(psbench_root):
    """SIGKILL (an OOM kill, a lost node) of one submitit job of a batch of two: submitit raises for the whole
    batch; the sweeper still records the other trial from the summary.json its job wrote."""
    cases = "{short: {learners: 2, trainer.max_updates: 3}, long: {learners: 2, epochs: 1000}}"
    cmd = [
        sys.executable,
        "-m",
        "psbench.cli",
        "-m",
        "hydra/sweeper=psbench_optuna",
        "hydra/launcher=submitit_local",
        "hydra.sweep.dir=s",
        "hydra.sweeper.study_name=lost",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.n_jobs=2",
        f"hydra.sweeper.cases={cases}",
        "trainer.progress=none",
        "trainer.num_threads=1",
        "logger=none",
    ]
    env = {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, "PSBENCH_ROOT": str(psbench_root)}
    proc = subprocess.Popen(cmd, cwd=psbench_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not list((psbench_root / "s").glob("*/summary.json")):  # the short trial finished
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.1)
    while True:  # until the short one's process has exited: the one left runs the long trial
        tasks = [c for c in psutil.Process(proc.pid).children(recursive=True) if _submitit_task(c)]
        if len(tasks) == 1:
            break
        assert time.time() < deadline
        time.sleep(0.1)
    tasks[0].kill()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    trials = {t.params["case"]: t for t in _study(psbench_root / "s", "lost").get_trials()}
    assert trials["short"].state == TrialState.COMPLETE and trials["short"].values[0] is not None
    assert trials["long"].state == TrialState.FAIL and "crashed" in trials["long"].user_attrs


@pytest.mark.parametrize("name", [n for n in run_all.SIMULATION_ONLY if n != "terngrad_fig5"])  # fig5: analytic
def test_a_schedule_only_entry_point_asks_for_ci_resources_even_at_paper_scale(name, tmp_path):
    """Its paper scale is a few CPU minutes: on SLURM it must not ask for ``resources=paper``'s GPU and day. The
    entry point prints its psbench command, which a launcher that does not exist then stops (exit 2) at once."""
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps", name, "scale=paper", "hydra/launcher=nosuch"],
        cwd=_runner.REPO,  # `-m sweeps` from the repository root
        env={**os.environ, "PSBENCH_ROOT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    [cmd] = [line for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert [a for a in cmd.split() if a.startswith("resources=")] == ["resources=ci"], cmd
    assert "++tags.scale=paper" in cmd.split()
