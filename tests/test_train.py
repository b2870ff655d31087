"""train(): determinism and divergence handling on composed configs (issue: The harness)."""

from __future__ import annotations

import json
import math

import pytest

from data_files import REAL_DATA, needs_real_mnist
from psbench.train import train

SUMMARY_KEYS = {
    "status",
    "diverged",
    "test_error",
    "test_loss",
    "train_loss",
    "staleness_mean",
    "staleness_max",
    "staleness_hist",
    "ps_updates",
    "gradients",
    "samples",
    "sim_time_s",
    "wall_time_s",
    "bytes_pushed",
    "bytes_pulled",
    "comm_overlap",
    "weights_sha256",
}


def run(compose_cfg, tmp_path, *overrides):
    cfg = compose_cfg("trainer.progress=none", *overrides)
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    return train(cfg, out)


def test_same_config_and_seed_give_identical_weights(compose_cfg, tmp_path):
    args = ("protocol=softsync", "protocol.n=2", "learners=6", "batch_size=8", "epochs=1", "lr_policy=per_gradient")
    a = run(compose_cfg, tmp_path, *args)
    b = run(compose_cfg, tmp_path, *args)
    c = run(compose_cfg, tmp_path, *args, "seed=1")
    assert SUMMARY_KEYS <= set(a)
    assert a["weights_sha256"] == b["weights_sha256"] and a["test_error"] == b["test_error"]
    assert a["schedule_sha256"] == b["schedule_sha256"]
    assert c["weights_sha256"] != a["weights_sha256"]
    json.dumps(a, allow_nan=False)  # the summary is strict JSON


@needs_real_mnist
def test_30_softsync_diverges_with_alpha0_and_converges_with_alpha0_over_sigma(compose_cfg, tmp_path):
    """Rudra §5.1 / Fig 5, Zhang Fig 3: λ = 30, μ = 4, 30-softsync. With the single-learner α0 the stale
    gradients blow up (NaN) and the run ends cleanly as diverged; with α0/⟨σ⟩ (Eq 6) it converges."""
    args = (
        "dataset=mnist",
        f"paths.data_dir={REAL_DATA}",
        "dataset.subset=6000",
        "protocol=softsync",
        "protocol.n=30",
        "learners=30",
        "batch_size=4",
        "epochs=1",
        "optimizer.lr=0.2",
        "hardware=p775",
    )
    const = run(compose_cfg, tmp_path, *args, "lr_policy=constant")
    modulated = run(compose_cfg, tmp_path, *args, "lr_policy=mean_staleness")
    assert const["status"] == "diverged" and const["diverged"] is True
    assert 0 < const["diverged_at_update"] < const["ps_updates"]
    assert math.isfinite(const["test_error"])  # weights of the last finite update were kept and evaluated
    assert modulated["status"] == "finished" and modulated["diverged"] is False
    assert modulated["test_error"] < 0.2
    assert modulated["staleness_mean"] == pytest.approx(const["staleness_mean"])  # same schedule


def test_schedule_only_reports_statistics_without_training(compose_cfg, tmp_path):
    s = run(compose_cfg, tmp_path, "schedule_only=true", "protocol=async", "learners=8")
    assert s["weights_sha256"] is None and s["test_error"] is None
    assert s["gradients"] == s["ps_updates"] and s["staleness_mean"] > 1
    assert s["bytes_pushed"] == s["gradients"] * (4 * 9_610 + 8)  # MLP 64-128-10: exact wire bytes per push
    assert (tmp_path / "run" / "schedule.npz").exists() and (tmp_path / "run" / "staleness_hist.png").exists()
