"""Learning-rate schedules of the ``optimizer`` group: polynomial decay to zero (TernGrad §4, power 0.5)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.models import build_model
from psbench.optimizer.build import lr_schedule, poly_decay
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, SampleStream, UpdateBatches

warnings.filterwarnings("ignore", ".*does not have many workers.*")


def test_poly_decay_goes_from_one_to_zero_with_power():
    f = poly_decay(0.5, 100)
    assert f(0) == 1.0
    assert f(50) == pytest.approx(math.sqrt(0.5))
    assert f(75) == pytest.approx(0.5)
    assert f(100) == 0.0 and f(130) == 0.0
    assert poly_decay(1.0, 100)(75) == pytest.approx(0.25)


def test_schedule_none_milestones_poly_and_both():
    assert lr_schedule({"name": "sgd", "lr": 0.1, "milestones": [], "poly_power": None}, 10.0) is None
    step = lr_schedule({"milestones": [2], "gamma": 0.1}, 10.0)
    assert step(19) == 1.0 and step(20) == pytest.approx(0.1)
    poly = lr_schedule({"poly_power": 0.5, "poly_epochs": 4}, 10.0)  # T = 40 updates
    assert poly(30) == pytest.approx(0.5)
    both = lr_schedule({"milestones": [2], "gamma": 0.1, "poly_power": 0.5, "poly_epochs": 4}, 10.0)
    assert both(30) == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({"poly_power": 0, "poly_epochs": 1}, "optimizer.poly_power"),
        ({"poly_power": -0.5, "poly_epochs": 1}, "optimizer.poly_power"),
        ({"poly_power": "half", "poly_epochs": 1}, "optimizer.poly_power"),
        ({"poly_power": True, "poly_epochs": 1}, "optimizer.poly_power"),
        ({"poly_power": 0.5, "poly_epochs": 0}, "optimizer.poly_epochs"),
        ({"poly_power": 0.5, "poly_epochs": None}, "optimizer.poly_epochs"),
        ({"poly_power": 0.5, "poly_epochs": float("inf")}, "optimizer.poly_epochs"),
    ],
)
def test_bad_poly_values_name_the_key(cfg, key):
    with pytest.raises(ConfigError) as e:
        lr_schedule(cfg, 10.0)
    assert key in str(e.value) and "allowed" in str(e.value)


def test_composed_optimizers_decay_over_the_whole_run_by_default(compose_cfg):
    for opt in ("sgd", "adam", "adagrad"):
        cfg = compose_cfg(f"optimizer={opt}", "epochs=3")
        assert cfg.optimizer.poly_power is None and cfg.optimizer.poly_epochs == 3


def test_strategy_applies_the_poly_lr_at_every_update(digits):
    """async λ = 1 through the PS strategy ≡ plain SGD at α0·(1 − t/T)^0.5 per step t (T = 25 updates)."""
    mu, steps, lr = 16, 25, 0.2
    cost = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000)
    sched = Schedule.collect(Simulator(Protocol("async", 1), cost, Topology(), mu, steps, 0).run())

    def through_strategy(optimizer: dict) -> torch.nn.Module:
        torch.manual_seed(0)
        net = build_model("mlp", digits.input_shape, digits.num_classes)
        module = ClassifierModule(net, optimizer, updates_per_epoch=1.0)  # poly_epochs = updates
        batches = UpdateBatches(sched, digits.x_train, digits.y_train, mu, LRPolicy(), mu, 1, 0)
        fit_updates(ParameterServerStrategy(sched), module, batches)
        return net

    ps = through_strategy({"name": "sgd", "lr": lr, "momentum": 0.0, "poly_power": 0.5, "poly_epochs": steps})
    torch.manual_seed(0)
    ref = build_model("mlp", digits.input_shape, digits.num_classes)
    stream = SampleStream(len(digits.x_train), 0)
    for t in range(steps):
        idx = stream.indices(t * mu, mu)
        ref.zero_grad()
        torch.nn.functional.cross_entropy(ref(digits.x_train[idx]), digits.y_train[idx]).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= lr * (1 - t / steps) ** 0.5 * p.grad

    def diff(a, b):
        return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))

    assert diff(ps, ref) <= 1e-6
    constant = through_strategy({"name": "sgd", "lr": lr, "momentum": 0.0})
    assert diff(constant, ref) > 1e-3  # the decay is what makes them agree
