"""Divergence a researcher would call divergence (:mod:`psbench.ps.divergence`): a train loss whose mean over 10
updates exceeds ``trainer.divergence_factor`` × its start marks the run diverged at that update, besides NaN/inf."""

from __future__ import annotations

import math

import pytest

from psbench.ps.divergence import DEFAULT_FACTOR, WINDOW, first_exceeding, start_loss


def test_the_rule_is_the_trailing_mean_against_the_start():
    losses = [2.0] * WINDOW + [2.5] * 5 + [40.0] * WINDOW
    start = start_loss(losses)
    assert start == 2.0 and start_loss(losses[: WINDOW - 1]) is None
    j = first_exceeding(losses, start, 4.0)
    # the first window whose mean exceeds 8: k losses of 40 among 10, the rest 2.5 → 2.5 + 3.75·k > 8 at k = 2
    assert j == WINDOW + 5 + 1
    assert sum(losses[j - WINDOW + 1 : j + 1]) / WINDOW > 8 > sum(losses[j - WINDOW : j]) / WINDOW


def test_one_unlucky_mini_batch_is_not_divergence_and_the_rule_can_be_off():
    spike = [2.0] * WINDOW + [30.0] + [2.0] * WINDOW  # one batch at 15× the start: the window's mean is 4.8
    assert first_exceeding(spike, start_loss(spike), DEFAULT_FACTOR) is None
    climb = [2.0] * WINDOW + [100.0] * WINDOW
    assert first_exceeding(climb, 2.0, None) is None and first_exceeding(climb, 2.0, 0) is None
    assert first_exceeding(climb, 0.0, 4.0) is None  # no positive start: nothing to compare with
    assert start_loss([math.nan] + [1.0] * WINDOW) is None


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
    the non-finite check alone; the rule stops it at the update its 10-update mean passed 4× the start."""
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
