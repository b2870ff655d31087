"""Checkpoint and resume: an interrupted and resumed run equals the uninterrupted one.

In-process tests drive :func:`psbench.train.train` with a :class:`~psbench.checkpoint.Plan` (the code path the
CLI uses); the CLI tests run the real ``psbench`` command and check the MLflow run's lifecycle and history.
"""

from __future__ import annotations

import json
import shutil

import pytest

from psbench.checkpoint import CHECKPOINT_FILE, Plan, RunStopped, config_diff, load
from psbench.train import train

BASE = ("trainer.progress=none", "trainer.num_threads=1", "epochs=1", "batch_size=8", "trainer.log_every_n_updates=1")
CASES = {
    # momentum SGD with a step decay half-way: the lr-schedule position must survive
    "hardsync": ("protocol=hardsync", "learners=4", "optimizer.milestones=[0.5]"),
    "4-softsync": ("protocol=softsync", "protocol.n=4", "learners=8", "lr_policy=mean_staleness"),
    "async-adam": ("protocol=async", "learners=4", "optimizer=adam"),
    "terngrad-ef": (
        "protocol=softsync",
        "protocol.n=2",
        "learners=4",
        "compression=terngrad",
        "compression.error_feedback=true",
    ),
    "agn": ("protocol=agn", "protocol.local_steps=2", "learners=4"),
}
K = 13  # the stop: not a multiple of checkpoint_every, so the periodic checkpoints before it are overwritten


def _train(cfg, run_dir, plan):
    run_dir.mkdir(exist_ok=True)
    return train(cfg, run_dir, None, plan)


@pytest.mark.parametrize("case", list(CASES))
def test_interrupted_and_resumed_run_equals_uninterrupted(compose_cfg, tmp_path, case):
    cfg = compose_cfg(*BASE, *CASES[case])
    full = _train(cfg, tmp_path / "full", Plan(tmp_path / "full" / CHECKPOINT_FILE, every=5))
    assert full["updates_done"] > K + 5

    d = tmp_path / "cut"
    with pytest.raises(RunStopped) as stop:
        _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5, stop_after=K))
    assert stop.value.update == K
    state = load(d / CHECKPOINT_FILE)
    assert state["update"] == K and state["strategy"]["updates_done"] == K

    resumed = _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5, state=state))
    assert resumed["resumed_from_update"] == K
    for key in (
        "weights_sha256",
        "test_error",
        "test_loss",
        "train_loss",
        "updates_done",
        "samples_trained",
        "bytes_pushed_measured",
    ):
        assert resumed[key] == full[key], key


def test_resume_from_a_periodic_checkpoint(compose_cfg, tmp_path):
    """The checkpoint a finished run left behind (every 5 updates) resumes to the same weights."""
    cfg = compose_cfg(*BASE, *CASES["4-softsync"])
    d = tmp_path / "full"
    full = _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5))
    state = load(d / CHECKPOINT_FILE)
    assert state["update"] % 5 == 0 and 0 < state["update"] < full["updates_done"]
    assert len(state["strategy"]["snapshots"]) > 0  # 4-softsync: snapshots that pending gradients read
    again = _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5, state=state))
    assert again["weights_sha256"] == full["weights_sha256"]


def test_request_stop_checkpoints_at_the_next_update_boundary(compose_cfg, tmp_path, monkeypatch):
    """What a signal handler calls: the update in progress completes, then checkpoint and stop; resume matches."""
    from psbench import checkpoint
    from psbench.strategy import ParameterServerStrategy

    cfg = compose_cfg(*BASE, *CASES["async-adam"])
    full = _train(cfg, tmp_path / "full", None)
    assert not checkpoint.request_stop("nothing runs")  # no fit: nothing to stop
    step = ParameterServerStrategy.training_step

    def stepping(self, batch, *args, **kwargs):
        if batch.index == 7:
            assert checkpoint.request_stop("SIGTERM")
        return step(self, batch, *args, **kwargs)

    monkeypatch.setattr(ParameterServerStrategy, "training_step", stepping)
    d = tmp_path / "cut"
    with pytest.raises(RunStopped) as stop:
        _train(cfg, d, Plan(d / CHECKPOINT_FILE))  # checkpoint_every 0: only the requested one
    assert (stop.value.update, stop.value.reason) == (8, "SIGTERM")
    monkeypatch.undo()
    resumed = _train(cfg, d, Plan(d / CHECKPOINT_FILE, state=load(d / CHECKPOINT_FILE)))
    assert resumed["weights_sha256"] == full["weights_sha256"]


@pytest.mark.parametrize("case", ["hardsync", "async-adam"])
def test_a_checkpoint_from_a_fused_gpu_step_resumes_with_the_cpus_step(compose_cfg, tmp_path, case):
    """A checkpoint's optimizer groups say how its device stepped (``fused`` on a GPU, optimizer/build.py's
    FUSED_DEVICES); the resumed run steps as its own device does: here the CPU's, to the uninterrupted CPU run's
    weights bit for bit (torch's own ``load_state_dict`` would step fused on the CPU: other floats)."""
    cfg = compose_cfg(*BASE, *CASES[case], "epochs=2")
    full = _train(cfg, tmp_path / "full", None)
    d = tmp_path / "cut"
    with pytest.raises(RunStopped):
        _train(cfg, d, Plan(d / CHECKPOINT_FILE, stop_after=3))
    state = load(d / CHECKPOINT_FILE)
    for g in state["optimizer"]["param_groups"]:  # as a GPU wrote it
        g["fused"], g["foreach"] = True, None
    resumed = _train(cfg, d, Plan(d / CHECKPOINT_FILE, state=state))
    assert resumed["weights_sha256"] == full["weights_sha256"]


def test_unreadable_checkpoint_is_a_config_error(tmp_path):
    from psbench.checkpoint import resume_state
    from psbench.errors import ConfigError

    (tmp_path / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    for resume in ("auto", str(tmp_path)):
        with pytest.raises(ConfigError) as info:
            resume_state(resume, tmp_path, {})
        assert info.value.key == "resume" and CHECKPOINT_FILE in str(info.value) and "\n" not in str(info.value)
    assert resume_state(None, tmp_path, {}) == ("fresh", None)


class _Payload:
    """A pickle that creates a file when unpickled."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.path}",))


def test_a_checkpoint_that_would_run_code_is_refused_in_one_line_and_runs_nothing(
    psbench_root, run_psbench, mlflow_runs
):
    """``resume=<dir>`` on a shared file system: a checkpoint.pt someone else placed there is read with
    ``weights_only=True`` — refused naming what it holds, exit 2, no MLflow run, nothing executed."""
    import torch

    run_dir, marker = psbench_root / "shared_run", psbench_root / "created_by_the_checkpoint"
    run_dir.mkdir()
    torch.save({"format": 1, "update": 3, "config": {}, "weights": _Payload(marker)}, run_dir / CHECKPOINT_FILE)
    r = run_psbench(f"resume={run_dir}", "trainer.progress=none", root=psbench_root, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and lines[-1].startswith("psbench: error: resume="), r.stderr[-2000:]
    assert "system" in lines[-1] and "Traceback" not in r.stderr
    assert not marker.exists() and mlflow_runs(psbench_root) == []


def test_a_checkpoint_round_trips_numpy_state_as_tensors(tmp_path):
    """:func:`psbench.checkpoint.save` stores numpy arrays (the numpy RNG state) as tensors: weights-only loadable."""
    import numpy as np
    import torch

    from psbench.checkpoint import rng_state, save

    state = {"rng": rng_state(), "a": np.arange(5, dtype=np.int16), "b": [np.float32(1.5), (np.int64(3),)]}
    save(tmp_path / CHECKPOINT_FILE, state)
    torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)  # no numpy global in the file
    back = load(tmp_path / CHECKPOINT_FILE)
    assert back["a"].dtype == np.int16 and back["a"].tolist() == [0, 1, 2, 3, 4]
    assert back["b"] == [1.5, (3,)] and np.array_equal(back["rng"]["numpy"][1], state["rng"]["numpy"][1])


def test_config_diff_names_keys_and_ignores_resume_keys():
    a = {
        "protocol": {"n": 4},
        "trainer": {"checkpoint_every": 10, "stop_after_updates": 3},
        "resume": None,
        "tags": {"optuna_trial": 2},
    }
    b = {
        "protocol": {"n": 2},
        "trainer": {"checkpoint_every": 0, "stop_after_updates": None},
        "resume": "auto",
        "tags": {"optuna_trial": 5},
    }
    assert config_diff(a, b) == ["protocol.n (4 → 2)"]
    assert config_diff(a, a) == []


# ---------------------------------------------------------------- the psbench command
CLI = (
    "epochs=1",
    "learners=8",
    "batch_size=8",
    "protocol=softsync",
    "protocol.n=4",
    "trainer.num_threads=1",
    "trainer.progress=none",
    "trainer.log_every_n_updates=1",
    "trainer.checkpoint_every=5",
)


def _history(root, run_id, key):
    from mlflow import MlflowClient

    c = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    return [(m.step, m.value) for m in sorted(c.get_metric_history(run_id, key), key=lambda m: m.step)]


def test_cli_resume_continues_the_same_mlflow_run(psbench_root, run_psbench, mlflow_runs):
    root = psbench_root
    full = run_psbench(*CLI, "hydra.run.dir=full", root=root)
    assert full.returncode == 0, full.stderr
    cut = run_psbench(*CLI, "hydra.run.dir=cut", "trainer.stop_after_updates=17", root=root)
    assert cut.returncode == 0, cut.stderr
    cut_summary = json.loads((root / "cut" / "summary.json").read_text())
    assert cut_summary["status"] == "killed" and cut_summary["updates_done"] == 17
    assert (root / "cut" / CHECKPOINT_FILE).is_file()
    run_id = cut_summary["mlflow_run_id"]
    assert {r["run_id"]: r["status"] for r in mlflow_runs(root)}[run_id] == "KILLED"

    refused = run_psbench(*CLI, "protocol.n=2", f"resume={root / 'cut'}", root=root)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("psbench: error: resume=") and "protocol.n (4 → 2)" in lines[0]
    assert len(mlflow_runs(root)) == 2  # refused before any MLflow run

    # the first 17 updates "ran" under another torch: the resume records what differs, from which update
    import torch
    from mlflow import MlflowClient

    MlflowClient(f"sqlite:///{root / 'mlflow.db'}").set_tag(run_id, "psbench.torch_version", "1.0.0")
    resumed = run_psbench(*CLI, f"resume={root / 'cut'}", root=root)
    assert resumed.returncode == 0, resumed.stderr
    a = json.loads((root / "full" / "summary.json").read_text())
    b = json.loads((root / "cut" / "summary.json").read_text())
    assert b["weights_sha256"] == a["weights_sha256"] and b["test_error"] == a["test_error"]
    assert b["mlflow_run_id"] == run_id and b["resumed_from_update"] == 17
    assert b["provenance_changes"] == [{"update": 17, "torch_version": torch.__version__}]
    assert a["provenance_changes"] is None  # never resumed
    assert not (root / "cut" / CHECKPOINT_FILE).exists()  # finished: no checkpoint left

    runs = {r["run_id"]: r for r in mlflow_runs(root)}
    assert len(runs) == 2 and runs[run_id]["status"] == "FINISHED"
    assert runs[run_id]["tags"]["psbench.resumed_from_update"] == "17"
    assert json.loads(runs[run_id]["tags"]["psbench.provenance_changes"]) == b["provenance_changes"]
    for key in ("train_loss", "sim_time_s"):  # per-update metrics: one point per update, as uninterrupted
        want, got = _history(root, a["mlflow_run_id"], key), _history(root, run_id, key)
        steps = [s for s, _ in got]
        assert steps == sorted(set(steps)) and len(steps) > 17, key  # strictly increasing: no duplicates
        assert got == want, key  # no gaps, and bit-identical values
    # evaluations (every epoch, and the final one) at the same steps with the same values
    assert _history(root, run_id, "test_error") == _history(root, a["mlflow_run_id"], "test_error")
    arts = [f.path for f in MlflowClient(f"sqlite:///{root / 'mlflow.db'}").list_artifacts(run_id)]
    assert "weights.pt" in arts
    from types import SimpleNamespace

    from psbench.models.evaluate import weights_sha256

    final = torch.load(root / "cut" / "weights.pt")  # the final weights, as the summary's hash says
    assert weights_sha256(SimpleNamespace(state_dict=lambda: final)) == a["weights_sha256"]


@pytest.mark.slow
def test_sweep_rerun_with_resume_auto_resumes_interrupted_jobs(psbench_root, run_psbench, mlflow_runs):
    """A fixed sweep dir gives every job the same dir again: resume=auto resumes the stopped ones."""
    root = psbench_root
    sweep = ("-m", "hydra.sweep.dir=sweep", "seed=0,1", *CLI)
    first = run_psbench(*sweep, "trainer.stop_after_updates=9", root=root)
    assert first.returncode == 0, first.stderr
    ids = [json.loads((root / "sweep" / str(j) / "summary.json").read_text())["mlflow_run_id"] for j in (0, 1)]
    shutil.copy(root / "sweep" / "1" / "summary.json", root / "stopped1.json")
    again = run_psbench(*sweep, "resume=auto", root=root)
    assert again.returncode == 0, again.stderr
    done = [json.loads((root / "sweep" / str(j) / "summary.json").read_text()) for j in (0, 1)]
    assert [d["mlflow_run_id"] for d in done] == ids
    assert [d["resumed_from_update"] for d in done] == [9, 9]
    assert {r["status"] for r in mlflow_runs(root)} == {"FINISHED"} and len(mlflow_runs(root)) == 2
    third = run_psbench(*sweep, "resume=auto", root=root)  # finished jobs are not run again
    assert third.returncode == 0 and third.stderr.count("already finished") == 2
    assert len(mlflow_runs(root)) == 2


KILL_AFTER_CHECKPOINT = """
import os, signal, sys
import psbench.checkpoint as ck
import psbench.cli as cli
orig, calls = cli.execute, [0]
def execute(cfg):
    calls[0] += 1
    return orig(cfg)
cli.execute = execute
write = ck.Checkpointer.write
def write_then_die(self, trainer, update):
    write(self, trainer, update)
    if calls[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # pre-empted right after the second trial's first checkpoint
ck.Checkpointer.write = write_then_die
sys.argv = ["psbench", *sys.argv[1:]]
cli.main()
"""


@pytest.mark.slow
def test_optuna_retry_of_a_killed_trial_resumes_its_checkpoint(psbench_root, run_psbench, mlflow_runs):
    import optuna

    root = psbench_root
    args = (
        "-m",
        "hparams_search=rudra_pareto",
        "hydra.sweeper.n_trials=2",
        "epochs=1",
        "trainer.progress=none",
        "trainer.num_threads=1",
        "trainer.checkpoint_every=3",
    )
    first = run_psbench(*args, root=root, driver=KILL_AFTER_CHECKPOINT)
    assert first.returncode == -9, first.stderr[-2000:]
    (sweep,) = (root / "multirun/optuna").glob("rudra_pareto-*")  # the study's default dir
    killed = [d for d in sweep.iterdir() if (d / CHECKPOINT_FILE).is_file()]
    assert len(killed) == 1
    state = load(killed[0] / CHECKPOINT_FILE)
    assert state["update"] == 3

    second = run_psbench(*args, root=root)
    assert second.returncode == 0, second.stderr[-3000:]
    study = optuna.load_study(study_name="rudra_pareto", storage=f"sqlite:///{sweep}/optuna.db")
    retry = [t for t in study.get_trials() if t.user_attrs.get("retry_of") == int(killed[0].name)]
    assert len(retry) == 1 and retry[0].state == optuna.trial.TrialState.COMPLETE
    done = json.loads((killed[0] / "summary.json").read_text())
    assert done["resumed_from_update"] == 3 and done["mlflow_run_id"] == state["mlflow_run_id"]
    assert retry[0].user_attrs["mlflow_run_id"] == state["mlflow_run_id"]
    assert {r["run_id"]: r["status"] for r in mlflow_runs(root)}[state["mlflow_run_id"]] == "FINISHED"


def test_the_rng_streams_hold_each_cuda_devices_where_the_run_used_cuda(monkeypatch, tmp_path):
    """A checkpoint's RNG streams include each CUDA device's when the run initialised CUDA (dropout on a GPU draws
    from them; they were not saved) and are set again on as many devices, not on another count; a run that never
    touched CUDA (every CPU run) stores exactly the streams it did. The CUDA calls are faked here: a CPU machine has
    none (``test_cuda_rng_streams_resume_on_a_gpu`` runs them for real where one is lent)."""
    import torch

    from psbench import checkpoint as ck

    assert set(ck.rng_state()) == {"torch", "numpy", "python"} and not torch.cuda.is_initialized()
    states = [torch.arange(8, dtype=torch.uint8), torch.arange(8, 16, dtype=torch.uint8)]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in states])
    torch.save(ck._plain(ck.rng_state()), tmp_path / "rng.pt")  # as a checkpoint is written and read
    loaded = ck._numpy(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert all(torch.equal(a, b) for a, b in zip(loaded["cuda"], states, strict=True))
    set_to: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_to.append)
    for devices, expect in ((2, 1), (1, 0)):  # as many devices: set; another count: left as they are
        monkeypatch.setattr(torch.cuda, "device_count", lambda d=devices: d)
        set_to.clear()
        ck.set_rng_state(loaded)
        assert len(set_to) == expect
        if expect:  # each device's own stream, in order
            assert all(torch.equal(a, b) for a, b in zip(set_to[0], states, strict=True))


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rng_streams_resume_on_a_gpu():
    """On a GPU: dropout masks drawn after the streams are saved and set again are the same masks."""
    import torch

    from psbench import checkpoint as ck

    x = torch.ones(1024, device="cuda")
    torch.nn.functional.dropout(x, 0.5)
    saved = ck.rng_state()
    first = torch.nn.functional.dropout(x, 0.5)
    torch.nn.functional.dropout(x, 0.5)
    ck.set_rng_state(saved)
    assert "cuda" in saved and torch.equal(torch.nn.functional.dropout(x, 0.5), first)


def test_provenance_changes_list_what_differed_at_each_resume():
    """A run started under commit a and torch 2.0, resumed at update 100 under the same code (nothing recorded), at
    200 under commit b, at 300 under b again and at 400 under commit c with 4 threads: each resume compares with
    the values the run had last, so the changes say b from 200 and c with 4 threads from 400, and the report's
    provenance says "a → b → c" with the resumes."""
    import sys
    from pathlib import Path

    from psbench.tracking.provenance import CHANGES_TAG, changes

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from analysis.render import provenance_md
    from analysis.runs import Run

    tags = {"psbench.git_commit": "a" * 40, "psbench.torch_version": "2.0", "psbench.threads": "1"}
    now = dict(tags)
    assert changes(tags, 100, now) == []
    for update, commit, threads in ((200, "b", "1"), (300, "b", "1"), (400, "c", "4")):
        now = {**now, "psbench.git_commit": commit * 40, "psbench.threads": threads}
        tags[CHANGES_TAG] = json.dumps(changes(tags, update, now))
    want = [{"update": 200, "git_commit": "b" * 40}, {"update": 400, "git_commit": "c" * 40, "threads": "4"}]
    assert json.loads(tags[CHANGES_TAG]) == want
    md = provenance_md([Run("0123456789ab", tags, {}, {}, 0)])
    assert "- commit: aaaaaaa → bbbbbbb → ccccccc (1 run)" in md
    assert "01234567 from update 200: commit bbbbbbb; 01234567 from update 400: commit ccccccc, threads 4" in md


def test_provenance_changes_say_what_became_unknown_and_fold_to_fit_the_tag():
    """A resume under an install outside a checkout (commit unknown) records the commit as None, where it recorded
    nothing; a malformed tag counts as no changes before; folding the oldest entries to fit MLflow's tag length keeps
    the values the run had last, so the next resume compares with them."""
    from psbench.tracking.provenance import CHANGES_TAG, changes, folded

    tags = {"psbench.git_commit": "a" * 40, "psbench.host": "h"}
    assert changes(tags, 10, {"psbench.host": "h"}) == [{"update": 10, "git_commit": None}]
    assert changes({**tags, CHANGES_TAG: "{not json"}, 10, dict(tags)) == []
    history = [{"update": u, "git_commit": c * 40} for u, c in ((100, "b"), (200, "c"), (300, "a"))]
    short = folded(history, 2 * len(json.dumps(history[0])))
    assert short[-1] == history[-1] and len(short) < len(history) and short[0]["update"] == 100
    assert changes({**tags, CHANGES_TAG: json.dumps(short)}, 400, dict(tags)) == short  # back at a: nothing new


def test_a_resume_on_another_host_is_recorded(psbench_root):
    """The resume compares the host before this process's liveness tags overwrite ``psbench.host``: a run started
    on ``oldhost`` and resumed here records this host (it recorded nothing)."""
    import socket

    from psbench import tracking
    from psbench.tracking.job_run import JobRun

    store = f"sqlite:///{psbench_root / 'mlflow.db'}"
    eid = tracking.ensure_experiment(store, "psbench", str(psbench_root / "art"))
    prov = {"git_commit": "a" * 40, "host": socket.gethostname(), "threads": 1}
    started = {**tracking.provenance_tags(prov), "psbench.host": "oldhost"}
    run_id = tracking.start_run(store, eid, "r", tags=started)
    tracking.end_run(store, run_id, tracking.KILLED)
    run = JobRun(
        {"logger": {"name": "mlflow", "tracking_uri": store}},
        psbench_root,
        prov,
        {"mlflow_run_id": run_id, "update": 5},
    )
    assert run.provenance_changes == [{"update": 5, "host": socket.gethostname()}]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", ["4-softsync", "async-adam"])
def test_a_cuda_run_resumed_from_its_checkpoint_ends_at_the_uninterrupted_runs_loss(compose_cfg, tmp_path, case):
    """On a GPU: the checkpoint is loaded onto the CPU; the resumed run's stale snapshots and gradients computed
    ahead go back to the GPU (they stayed on the CPU: the first stale gradient mixed devices), and it ends where
    the uninterrupted CUDA run does, to float tolerance (cuDNN and atomics: not bit for bit)."""
    cfg = compose_cfg(*BASE, *CASES[case], "trainer.accelerator=cuda")
    full = _train(cfg, tmp_path / "full", Plan(tmp_path / "full" / CHECKPOINT_FILE, every=5))
    d = tmp_path / "cut"
    with pytest.raises(RunStopped):
        _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5, stop_after=K))
    state = load(d / CHECKPOINT_FILE)
    assert state["strategy"]["lookahead"]["results"]  # gradients computed ahead, loaded onto the CPU: moved back
    resumed = _train(cfg, d, Plan(d / CHECKPOINT_FILE, every=5, state=state))
    assert resumed["resumed_from_update"] == K and resumed["updates_done"] == full["updates_done"]
    assert (
        abs(resumed["test_loss"] - full["test_loss"]) < 1e-3 and abs(resumed["train_loss"] - full["train_loss"]) < 1e-3
    )
