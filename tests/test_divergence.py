"""Divergence a researcher would call divergence (:mod:`psbench.ps.divergence`): a train loss whose trailing mean —
at least 10 updates and 1,024 samples — exceeds ``trainer.divergence_factor`` × its start (the mean of the first 10
updates) marks the run diverged at that update, besides NaN/inf."""

from __future__ import annotations

import math

import pytest

from psbench.ps.divergence import DEFAULT_FACTOR, SAMPLES, START, LossRule, window


def _first(losses, samples, factor=DEFAULT_FACTOR, initial=START):
    """(the first update the rule stops at, its reason) feeding ``losses`` of ``samples`` samples each, the first
    ``initial`` of them on the initial weights."""
    rule = LossRule(factor)
    for i, v in enumerate(losses):
        why = rule.add(i, v, samples, i if i < initial else 0.0)  # ⟨σ⟩ = i: every gradient on the initial weights
        if why is not None:
            return i, why
    return None, None


def test_the_window_holds_at_least_ten_updates_and_1024_samples():
    assert window(4) == 256 and window(8) == 128 and window(1000) == START == 10 and window(SAMPLES) == 10
    assert window(3) == math.ceil(SAMPLES / 3)


def test_the_rule_is_the_trailing_mean_against_the_start():
    w = window(128)  # 10 updates
    losses = [2.0] * START + [2.5] * 5 + [40.0] * w
    j, why = _first(losses, 128)
    # the first window whose mean exceeds 8: two losses of 40, five of 2.5 and three of 2 (98.5 / 10)
    assert j == START + 5 + 1
    assert sum(losses[j - w + 1 : j + 1]) / w > 8 > sum(losses[j - w : j]) / w
    assert why == f"train loss 9.85 (mean of 10 updates) above 4× its start 2 at update {j}"


def test_a_transient_the_run_recovers_from_is_not_divergence():
    """Rudra §5.1's 30-softsync at μ = 4 under α0/⟨σ⟩ climbs to ~9× its start for ~20 updates, then learns: a
    window of 1,024 samples (256 updates of 4) sees a mean under 4×; the same climb, sustained, is divergence."""
    transient = [2.3] * 200 + [20.0] * 20 + [1.0] * 600
    assert _first(transient, 4) == (None, None)
    assert _first(transient, 128)[0] == 200 + 3  # updates of 128 samples: 10 updates already hold 1,280
    sustained = [2.3] * 200 + [20.0] * 300
    j, _ = _first(sustained, 4)
    assert j is not None and 200 < j < 200 + window(4)
    spike = [2.0] * START + [30.0] + [2.0] * START  # one batch at 15× the start: a 10-update mean of 4.8
    assert _first(spike, 128) == (None, None)


def test_the_start_is_the_loss_on_the_initial_weights():
    """Only updates whose gradients all read the initial weights make the start (hardsync: the first; async λ = 8:
    the first 8): a run that explodes within its first 10 updates cannot inflate its own reference. ResNet-18, async
    λ = 8 at α0 = 0.1: 3.0 at update 0, 110 by update 10 (docs/how-to/own-model.md)."""
    early = [3.0] * 8 + [110.0, 150.0] + [40.0] * 200
    j, why = _first(early, 8, initial=8)
    assert j is not None and "its start 3 " in why
    assert _first(early, 8, initial=START) == (None, None)  # the first 10 whatever their weights: start 34.6
    rule = LossRule(DEFAULT_FACTOR)
    rule.add(0, 2.0, 120, 0.0)
    assert rule.start is None  # the next update may be on the initial weights too
    rule.add(1, 9.0, 120, 0.0)
    assert rule.start == 2.0 and rule.head == [2.0]  # hardsync: its first update alone


def test_the_rule_can_be_off_and_needs_a_positive_start():
    climb = [2.0] * START + [100.0] * 300
    assert _first(climb, 8, None) == (None, None) and _first(climb, 8, 0) == (None, None)
    assert _first([0.0] * START + [100.0] * 300, 8) == (None, None)  # no positive start: nothing to compare with


def test_a_saved_rule_continues_exactly():
    import random

    rng = random.Random(0)
    losses = [2.0 + rng.random() for _ in range(400)] + [2.0 + 0.05 * k for k in range(400)]
    whole = _first(losses, 8)
    assert whole[0] is not None
    rule = LossRule(DEFAULT_FACTOR)
    for i, v in enumerate(losses[:300]):
        assert rule.add(i, v, 8, i if i < START else 0.0) is None
    resumed = LossRule(DEFAULT_FACTOR)
    resumed.load_state_dict(rule.state_dict())
    assert next((i, w) for i, v in enumerate(losses[300:], 300) if (w := resumed.add(i, v, 8, 0.0))) == whole


def _run(compose_cfg, tmp_path, *overrides):
    from psbench.assemble import build_run
    from psbench.strategy.executor import train_sim

    cfg = compose_cfg(
        *("protocol=async", "learners=8", "batch_size=8", "epochs=1", "optimizer.lr=0.5", "logger=none"),
        *("trainer.progress=none", "trainer.save_weights=false", "trainer.checkpoint_every=0"),
        *overrides,
    )
    tmp_path.mkdir()
    return train_sim(build_run(cfg), tmp_path)


def test_a_loss_that_climbs_to_4x_its_start_marks_the_run_diverged_at_that_update(compose_cfg, tmp_path):
    """Async λ = 8 at α0 = 0.5 on digits: the loss stays finite (38 at the end, 179 updates) — diverged: false under
    the non-finite check alone; the rule stops it at the update its 128-update (1,024-sample) mean passed 4× the
    start."""
    off = _run(compose_cfg, tmp_path / "off", "trainer.divergence_factor=null")
    assert off.status == "finished" and not off.diverged and off.updates_done == off.ps_updates
    assert off.train_loss is not None and math.isfinite(off.train_loss) and off.train_loss > 10
    on = _run(compose_cfg, tmp_path / "on")
    assert on.status == "diverged" and on.diverged
    assert on.diverged_at_update is not None and on.updates_done == on.diverged_at_update + 1 < off.updates_done
    assert on.divergence is not None and f"at update {on.diverged_at_update}" in on.divergence
    assert "above 4× its start" in on.divergence


@pytest.mark.parametrize("value", ["1", "0.5", "-2"])
def test_a_factor_that_would_fire_at_once_is_refused(compose_cfg, value):
    from psbench.errors import ConfigError
    from psbench.validate import validate

    with pytest.raises(ConfigError) as err:
        validate(compose_cfg(f"trainer.divergence_factor={value}"))
    assert err.value.key == "trainer.divergence_factor"


def test_the_lightning_api_takes_the_same_rule(digits):
    """``ParameterServerStrategy.simulated(divergence_factor=…)``: the user's door stops at the same kind of update."""
    import pytorch_lightning as pl
    import torch
    import torch.nn.functional as F

    from psbench import ParameterServerStrategy

    class Hot(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(
                torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
            )

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5, momentum=0.9)

    data = torch.utils.data.TensorDataset(digits.x_train, digits.y_train)
    ends = {}
    for factor in (None, 4.0):
        strategy = ParameterServerStrategy.simulated("async", learners=8, seed=0, divergence_factor=factor)
        pl.Trainer(
            strategy=strategy,
            max_epochs=1,
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
        ).fit(Hot(), torch.utils.data.DataLoader(data, batch_size=8, shuffle=True))
        ends[factor] = strategy.summary
    assert not ends[None].diverged
    assert ends[4.0].diverged and ends[4.0].divergence and ends[4.0].updates_done < ends[None].updates_done
