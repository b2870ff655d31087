"""summary.json: one RunSummary for both engines, written by one atomic strict-JSON writer."""

from __future__ import annotations

import json
import signal

import pytest

from psbench import lifecycle
from psbench.summary import FIELDS, RunSummary, write_json


def test_a_summary_survives_summary_json_unchanged(tmp_path):
    s = RunSummary(
        status="diverged",
        diverged=True,
        diverged_at_update=7,
        test_error=0.9,
        engine="dist",
        mode="free_run",
        staleness_hist={0: 3, 2: 1},
        staleness_max=2,
        run_time_s=1.5,
        failed_learners=[2],
        calibration={"ks_staleness": 0.1},
        artifacts=["a.npz"],
        provenance={"host": "h"},
    )
    write_json(tmp_path / "summary.json", s)
    raw = json.loads((tmp_path / "summary.json").read_text())
    assert set(raw) == set(FIELDS)  # every key, null where it does not apply
    assert raw["sim_time_s"] is None and raw["staleness_hist"] == {"0": 3, "2": 1}
    assert RunSummary.read(tmp_path / "summary.json") == s  # σ keys come back as integers
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary file left


def test_non_finite_numbers_are_written_as_null(tmp_path):
    write_json(tmp_path / "s.json", RunSummary(test_loss=float("nan"), train_loss=float("inf")))
    text = (tmp_path / "s.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    s = RunSummary.read(tmp_path / "s.json")
    assert s.test_loss is None and s.train_loss is None


def test_unknown_keys_and_statuses_are_refused():
    with pytest.raises(ValueError, match="not RunSummary fields: sim_time"):
        RunSummary.from_dict({"status": "finished", "sim_time": 1.0})
    with pytest.raises(ValueError, match="status='done'"):
        RunSummary(status="done")


def test_a_killed_runs_summary_is_a_run_summary():
    k = lifecycle.Killed(signal.SIGTERM)
    k.progress.update(updates_done=3, updates_total=10, samples=96, run_time_s=2.0, test_error=0.5)
    s = lifecycle.summary(k)
    assert isinstance(s, RunSummary)
    assert (s.status, s.signal, s.updates_done, s.ps_updates, s.updates_total) == ("killed", "SIGTERM", 3, 3, 10)
    assert s.failure_reason == "killed by SIGTERM after 3 of 10 PS updates"
    assert s.run_time_s == 2.0 and s.sim_time_s is None  # a dist PS reports measured time, not simulated
    assert s.engine is None  # the CLI, which knows the config, says which engine it was


def test_the_simulators_summary_is_a_run_summary(compose_cfg, tmp_path):
    from psbench.train import train

    s = train(compose_cfg("trainer.progress=none", "schedule_only=true", "learners=4"), tmp_path)
    assert list(s) == list(FIELDS)
    r = RunSummary.from_dict(s)
    assert r.engine == "sim" and r.mode is None and r.run_time_s is None and r.pushes_received is None
    assert r.sim_time_s > 0 and r.wall_time_s > 0 and r.ps_updates > 0
    assert r.sim_time_s != r.wall_time_s  # the virtual clock: simulated seconds, not the seconds this took
