"""BatchNorm under a schedule (:mod:`psbench.strategy.batchnorm`): each learner normalises with its own mini-batch,
the PS's running statistics follow the applied gradients' batch statistics in the PS's order.

* the PS's buffers and weights equal a hand replay of the rule (forward hooks read each learner's batch statistics
  on its snapshot; ``ps ← (1 − m)·ps + m·stat`` per applied gradient) in every batching mode;
* async with λ = 1 is plain training of the module in train mode (torch's own buffer updates);
* hardsync of λ learners of μ is the "ghost batch" step (the mean of λ gradients, each normalised over its μ), which
  is *not* one learner of μλ (Rudra Eq 7 needs a network without BatchNorm);
* a BatchNorm ResNet (torchvision's, vendored) and the lightning-hydra-template's SimpleDenseNet train through the
  CLI, and the CLI and the Lightning API give the same weights and running statistics;
* what cannot keep the statistics (the dist engine, local-step protocols) is refused in one line;
* a callback that puts a layer in eval mode (and freezes a weight) at an epoch's start: plain Lightning's weights and
  buffers at λ = 1; with staleness, no gradient of an epoch's updates is computed before that epoch's start hooks.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf, open_dict
from torch import nn

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule, Simulator
from psbench.ps.aggregate import contribution_order
from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches
from psbench.strategy.simulated import epoch_bounds
from test_lightning_namespaces import NAMESPACES, QUIET, EpochOfStream, namespace, strategy_class
from thirdparty.dense_net import SimpleDenseNet
from thirdparty.tv_resnet import resnet10_small

warnings.filterwarnings("ignore", ".*does not have many workers.*")
COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)
LR = 0.05


def mlp_bn() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(64, 16), nn.BatchNorm1d(16, momentum=0.3), nn.ReLU(), nn.Linear(16, 10)
    )


def schedule(proto: Protocol, gradients: int, mu: int) -> Schedule:
    return Schedule.collect(Simulator(proto, COST, Topology(), mu, gradients, 0).run())


def fit_cli_path(net, x, y, proto: Protocol, sched: Schedule, mu: int, batching: str = "auto"):
    """The psbench command's gradient path (built-in look-ahead, plain SGD) on ``net``; the strategy."""
    strategy = ParameterServerStrategy(sched, batching)
    data = UpdateBatches(sched, x, y, mu, LRPolicy("constant"), mu, proto.learners, 0)
    fit_updates(strategy, ClassifierModule(net, {"name": "sgd", "lr": LR, "momentum": 0.0}), data)
    assert strategy.updates_done == sched.num_updates
    return strategy, data


def replay(net0: nn.Module, sched: Schedule, data: UpdateBatches) -> nn.Module:
    """The rule by hand: snapshots θ_t kept, each update's gradients in contribution order, each on its snapshot in
    train mode; a hook reads every BatchNorm layer's input and folds its batch mean and unbiased variance into the
    PS's buffers with the layer's momentum; then plain SGD."""
    ps = copy.deepcopy(net0)
    bns = [m for m in ps.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    snaps = {0: copy.deepcopy(net0.state_dict())}
    for i in range(sched.num_updates):
        rows = np.arange(sched.offsets[i], sched.offsets[i + 1])
        w = data.weights(i)
        total = None
        for j in contribution_order(sched.ts[rows].tolist()):
            r = int(rows[j])
            learner = copy.deepcopy(net0)
            learner.load_state_dict(snaps[int(sched.ts[r])])
            learner.train()
            seen: list[torch.Tensor] = []
            hooks = [
                m.register_forward_pre_hook(lambda _m, a, seen=seen: seen.append(a[0].detach()))
                for m in learner.modules()
                if isinstance(m, nn.modules.batchnorm._BatchNorm)
            ]
            x, y = data.samples([r])
            loss = F.cross_entropy(learner(x), y) * torch.tensor(w[j], dtype=torch.float32)
            grads = torch.autograd.grad(loss, list(learner.parameters()))
            for h in hooks:
                h.remove()
            total = grads if total is None else [a + b for a, b in zip(total, grads, strict=True)]
            with torch.no_grad():
                for m, h in zip(bns, seen, strict=True):
                    dims = [0, *range(2, h.dim())]
                    m.num_batches_tracked += 1
                    mom = m.momentum
                    m.running_mean.mul_(1 - mom).add_(mom * h.mean(dims))
                    m.running_var.mul_(1 - mom).add_(mom * h.var(dims, unbiased=True))
        with torch.no_grad():
            for p, g in zip(ps.parameters(), total, strict=True):
                p -= LR * g
        snaps[i + 1] = copy.deepcopy(ps.state_dict())
    return ps


def state(net: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def assert_states_close(a: dict, b: dict, atol: float = 2e-5) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if a[k].dtype == torch.long:
            assert torch.equal(a[k], b[k]), k
        else:
            assert torch.allclose(a[k], b[k], atol=atol, rtol=1e-4), (k, float((a[k] - b[k]).abs().max()))


@pytest.mark.parametrize("batching", ["auto", "vmap", "grouped", "loop"])
def test_the_ps_running_statistics_are_the_hand_replay_of_the_rule(digits, batching):
    """2-softsync, λ = 4, μ = 8, 48 gradients of an MLP with BatchNorm1d (momentum 0.3): the strategy's weights and
    PS buffers equal the replay; num_batches_tracked counts the applied gradients."""
    proto, mu = Protocol("softsync", 4, n=2), 8
    sched = schedule(proto, 48, mu)
    assert sched.staleness.max() > 0  # stale snapshots: statistics are taken on older weights
    torch.manual_seed(0)
    net0 = mlp_bn()
    net = copy.deepcopy(net0)
    strategy, data = fit_cli_path(net, digits.x_train, digits.y_train, proto, sched, mu, batching)
    expected = replay(net0, sched, data)
    assert_states_close(state(net), state(expected))
    assert int(net[2].num_batches_tracked) == sched.num_gradients == 48
    assert not strategy.lookahead.row_stats  # every row's statistics applied
    moved = float((net[2].running_mean - net0[2].running_mean).abs().max())
    assert moved > 1e-2  # not vacuous


def test_async_with_one_learner_is_plain_training_of_the_module(digits):
    """λ = 1: the PS's buffers are those torch's BatchNorm keeps when the module trains in train mode on the same
    mini-batches with SGD (a BatchNorm2d ResNet, channels_last gradients on the CPU). In float64: in float32 the
    two orders of float operations drift apart ~10× every 2 updates at this lr (1e-6 after 2, 1e-4 after 8)."""
    proto, mu, steps = Protocol("async", 1), 8, 12
    sched = schedule(proto, steps, mu)
    x = digits.x_train.expand(-1, 3, -1, -1).double()  # 3 channels for the ResNet's stem
    torch.manual_seed(0)
    net0 = resnet10_small(num_classes=10).double()
    net = copy.deepcopy(net0)
    _, data = fit_cli_path(net, x, digits.y_train, proto, sched, mu)
    plain = copy.deepcopy(net0).train()
    opt = torch.optim.SGD(plain.parameters(), lr=LR)
    for i in range(steps):
        xb, yb = data.samples([i])
        opt.zero_grad()
        F.cross_entropy(plain(xb), yb).backward()
        opt.step()
    assert_states_close(state(net), state(plain), atol=1e-9)
    assert int(net.bn1.num_batches_tracked) == steps


def test_hardsync_is_the_ghost_batch_step_not_one_large_batch(digits):
    """Hardsync of λ = 4 learners of μ = 8: the mean of 4 gradients each normalised over its own 8 samples (and the
    buffers moved 4 times a step) — torch's module run on each learner's batch in turn; one learner of μλ = 32
    (Rudra Eq 7, exact without BatchNorm) gives other weights."""
    proto, mu, steps = Protocol("hardsync", 4), 8, 10
    sched = schedule(proto, 4 * steps, mu)
    torch.manual_seed(0)
    net0 = mlp_bn()
    net = copy.deepcopy(net0)
    _, data = fit_cli_path(net, digits.x_train, digits.y_train, proto, sched, mu)
    ghost, large = copy.deepcopy(net0).train(), copy.deepcopy(net0).train()
    for i in range(steps):
        rows = list(range(4 * i, 4 * i + 4))
        for model, groups in ((ghost, [[r] for r in rows]), (large, [rows])):
            grads = None
            for j in contribution_order([0] * len(groups))[::1]:
                xb, yb = data.samples(groups[j])
                g = torch.autograd.grad(F.cross_entropy(model(xb), yb) / len(groups), list(model.parameters()))
                grads = g if grads is None else [a + b for a, b in zip(grads, g, strict=True)]
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads, strict=True):
                    p -= LR * g
    assert_states_close(state(net), state(ghost))
    diff = float((net[1].weight - large[1].weight).detach().abs().max())
    assert diff > 1e-3  # λ learners of μ ≠ one of μλ with BatchNorm


def bn_classifier(net: nn.Module):
    class BNClassifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

    return BNClassifier()


def test_the_cli_and_the_lightning_api_agree_on_a_batchnorm_network(compose_cfg, tmp_path):
    """The lightning-hydra-template's SimpleDenseNet by ``_target_`` through the psbench command (vmapped learners,
    psbench's per-sample loss) and through ``ParameterServerStrategy.simulated`` in a user's Trainer (each learner's
    ``training_step``): the same schedule, weights and running statistics."""
    from psbench.assemble import build_run
    from psbench.strategy.executor import train_sim

    shared = {"learners": 4, "batch_size": 8, "seed": 3, "epochs": 1}
    cfg = compose_cfg(
        *(f"{k}={v}" for k, v in shared.items()),
        *("protocol=softsync", "protocol.n=2", "dataset=digits", "trainer.max_updates=40", "logger=none"),
        *("trainer.progress=none", "trainer.save_weights=false", "trainer.checkpoint_every=0"),
    )
    with open_dict(cfg):
        cfg.model = OmegaConf.create(
            {
                "_target_": "thirdparty.dense_net.SimpleDenseNet",
                "input_size": 64,
                "lin1_size": 32,
                "lin2_size": 32,
                "lin3_size": 32,
            }
        )
    setup = build_run(cfg)
    cli = train_sim(setup, tmp_path)
    assert not cli.diverged and cli.updates_done == 40
    torch.manual_seed(3)
    module = bn_classifier(SimpleDenseNet(64, 32, 32, 32, 10))
    strategy = ParameterServerStrategy.simulated({"name": "softsync", "n": 2}, learners=4, seed=3)
    data = torch.utils.data.TensorDataset(setup.data.x_train, setup.data.y_train)  # the CLI's split (seed 3)
    pl.Trainer(
        strategy=strategy,
        max_steps=40,
        deterministic=True,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    ).fit(module, torch.utils.data.DataLoader(data, batch_size=8, shuffle=True))
    assert strategy.summary.schedule_sha256 == cli.schedule_sha256
    assert_states_close(state(setup.net), state(module.net), atol=1e-5)
    assert int(module.net.model[1].num_batches_tracked) == cli.gradients > 0


class FrozenBN(pl.LightningModule):
    """Fine-tuning with a frozen BatchNorm: ``frozen`` in eval mode from each epoch's start (its "pretrained"
    statistics, far from the data's), ``live`` in train mode."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.frozen, self.l1 = nn.BatchNorm1d(8), nn.Linear(8, 8)
        self.live, self.l2 = nn.BatchNorm1d(8, momentum=0.3), nn.Linear(8, 2)
        with torch.no_grad():
            self.frozen.running_mean.fill_(3.0)
            self.frozen.running_var.fill_(4.0)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.l2(self.live(torch.relu(self.l1(self.frozen(x))))), y)

    def on_train_epoch_start(self) -> None:
        self.frozen.eval()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_batchnorm_layer_in_eval_mode_keeps_its_statistics_as_in_plain_lightning():
    """A user's module that puts one BatchNorm layer in eval mode during training: hardsync with one learner of
    the full batch (one update per epoch) is plain Lightning at that batch, weights and buffers: the frozen layer
    normalises with its running statistics and keeps them (num_batches_tracked 0), the other one trains."""
    g = torch.Generator().manual_seed(1)
    x = 3 + 2 * torch.randn(64, 8, generator=g)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 3).long())
    quiet = dict(logger=False, enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
    out = []
    for strategy in ("auto", ParameterServerStrategy.simulated(protocol="hardsync", learners=1, progress="none")):
        module = FrozenBN()
        pl.Trainer(strategy=strategy, accelerator="cpu", max_epochs=4, deterministic=True, **quiet).fit(
            module, torch.utils.data.DataLoader(data, batch_size=64)
        )
        out.append(module)
    plain, ps = out
    assert ps.trainer.strategy.updates_done == 4 and not ps.trainer.strategy.summary.diverged
    assert_states_close(state(ps), state(plain), atol=1e-5)
    assert int(ps.frozen.num_batches_tracked) == 0 and bool((ps.frozen.running_mean == 3.0).all())
    assert int(ps.live.num_batches_tracked) == 4
    assert float((ps.l1.weight - FrozenBN().l1.weight).abs().max()) > 1e-2  # not vacuous: training moved it


def test_what_cannot_keep_the_statistics_is_refused_in_one_line(compose_cfg):
    from psbench.validate import validate

    validate(compose_cfg("model=alexnet", "model.batchnorm=true"))  # trains now (engine=sim)
    for extra, word in ((("engine=dist",), "engine=sim"), (("protocol=downpour",), "local steps")):
        with pytest.raises(ConfigError) as err:
            validate(compose_cfg("model=alexnet", "model.batchnorm=true", *extra))
        assert err.value.key == "model.batchnorm" and word in str(err.value)
    validate(compose_cfg("model=alexnet", "model.batchnorm=true", "engine=dist", "schedule_only=true"))


def test_a_batchnorm_resnet_by_target_trains_through_the_command(run_psbench, psbench_root, tmp_path):
    """torchvision's ResNet (vendored: the same code) by ``_target_`` from a user's conf/, no edits: it trains,
    its summary has the PS's running statistics in weights.pt, and the same network under a local-step protocol is
    one line naming model._target_, exit 2."""
    import os

    conf = tmp_path / "proj" / "conf" / "model"
    conf.mkdir(parents=True)
    (conf / "resnet.yaml").write_text("_target_: thirdparty.tv_resnet.resnet10_small\nnum_classes: 10\n")
    tests = str(Path(__file__).parent)
    env = {"PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    common = ("--config-dir", str(conf.parent), "model=resnet", "dataset=synthetic", "dataset.shape=[3,16,16]")
    common += ("dataset.num_train=128", "dataset.num_test=32", "learners=4", "batch_size=8", "epochs=1", "logger=none")
    proc = run_psbench(*common, "protocol=async", "trainer.progress=none", root=psbench_root, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(next(psbench_root.glob("outputs/*/*/summary.json")).read_text())
    assert summary["status"] == "finished" and summary["updates_done"] == 16
    weights = torch.load(next(psbench_root.glob("outputs/*/*/weights.pt")))
    assert int(weights["bn1.num_batches_tracked"]) == 16 and float(weights["bn1.running_var"].min()) > 0
    proc = run_psbench(*common, "protocol=downpour", "trainer.progress=none", root=psbench_root, env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and lines[-1].startswith("psbench: error: model._target_="), proc.stderr[-3000:]
    assert "a protocol without local steps" in lines[-1]


def test_a_checkpoint_of_the_look_ahead_holds_each_result_once(digits, monkeypatch):
    """Async, vmapped: an update's result and its row's BatchNorm statistics are views of the flush's vmapped tensors
    (no copy while training); the look-ahead's ``state_dict`` copies them out, so that a checkpoint written after
    some of a flush's updates holds the results still ahead, not the whole flush's tensor."""
    import io

    from psbench.strategy.lookahead import Lookahead

    checked: list[tuple[int, int]] = []
    pop = Lookahead._pop

    def spy(self, key):
        entry = pop(self, key)
        if self._blocks and len(checked) < 40:  # a checkpoint between two updates of a flush
            sd = self.state_dict()
            tensors = [t for g, loss, _ in sd["results"].values() for t in (*g.values(), loss)]
            tensors += [t for stats in sd["row_stats"].values() for t in stats.values()]
            assert all(t.untyped_storage().nbytes() == t.nbytes for t in tensors)
            buf = io.BytesIO()
            torch.save({"results": sd["results"], "row_stats": sd["row_stats"]}, buf)
            checked.append((len(buf.getvalue()), sum(t.nbytes for t in tensors) + 512 * len(tensors)))
        return entry

    monkeypatch.setattr(Lookahead, "_pop", spy)
    proto, mu = Protocol("async", 8), 8
    torch.manual_seed(0)
    fit_cli_path(mlp_bn(), digits.x_train, digits.y_train, proto, schedule(proto, 160, mu), mu, "vmap")
    assert len(checked) == 40
    assert all(saved <= held for saved, held in checked), checked  # the tensors' bytes and a record each


def frozen_from_epoch_1(name: str) -> tuple[type, type]:
    """(module, callback) of Lightning namespace ``name``. The module: ``frozen`` and ``live`` BatchNorm layers
    around ``l1``; each ``training_step`` call records (batch_idx: the PS update, the Trainer's epoch, whether
    ``frozen`` was in train mode, whether ``l1.weight`` required grad). The callback, from epoch 1's
    ``on_train_epoch_start`` on: ``frozen`` in eval mode and, with ``weight``, ``l1.weight`` frozen
    (``requires_grad_(False)``; its value then kept in ``at_freeze``)."""
    pl_ns = namespace(name)

    class Recorded(pl_ns.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.frozen, self.l1 = nn.BatchNorm1d(8), nn.Linear(8, 8)
            self.live, self.l2 = nn.BatchNorm1d(8, momentum=0.3), nn.Linear(8, 2)
            self.seen: list[tuple[int, int, bool, bool]] = []

        def training_step(self, batch, batch_idx):
            epoch = self.trainer.current_epoch
            self.seen.append((batch_idx, epoch, self.frozen.training, self.l1.weight.requires_grad))
            x, y = batch
            return F.cross_entropy(self.l2(self.live(torch.relu(self.l1(self.frozen(x))))), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)

    class FreezeFromEpoch1(pl_ns.Callback):
        def __init__(self, weight: bool) -> None:
            self.weight, self.at_freeze = weight, None

        def on_train_epoch_start(self, trainer, pl_module) -> None:
            if trainer.current_epoch >= 1:
                pl_module.frozen.eval()
                if self.weight and self.at_freeze is None:
                    pl_module.l1.weight.requires_grad_(False)
                    self.at_freeze = pl_module.l1.weight.detach().clone()

    return Recorded, FreezeFromEpoch1


def shifted_data(n: int = 64) -> torch.utils.data.TensorDataset:
    """Features of mean 3, std 2 (far from a fresh BatchNorm's running statistics 0 and 1), a linear label."""
    g = torch.Generator().manual_seed(1)
    x = 3 + 2 * torch.randn(n, 8, generator=g)
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 3).long())


@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("name", NAMESPACES)
def test_a_callback_that_freezes_at_an_epochs_start_is_plain_lightning(name, weight):
    """Async λ = 1 (μ = 16, N = 64: 4 updates an epoch, 3 epochs) ≡ plain Lightning on the same samples: a callback
    puts a BatchNorm layer in eval mode (and freezes ``l1.weight``) at epoch 1's start; from then on it normalises
    with the running statistics the PS gathered in epoch 0 and keeps them, and the frozen weight gets no gradient
    (the optimizer skips it: no momentum, no weight decay), weights and buffers as in plain Lightning."""
    pl_ns, data, mu = namespace(name), shifted_data(), 16
    module_cls, callback_cls = frozen_from_epoch_1(name)
    runs = []
    for ps in (True, False):
        module, callback = module_cls(), callback_cls(weight)
        strategy = strategy_class(name).simulated("async", learners=1, seed=2, progress="none") if ps else "auto"
        sampler = None if ps else EpochOfStream(len(data), 2)
        loader = torch.utils.data.DataLoader(data, batch_size=mu, sampler=sampler)
        trainer = pl_ns.Trainer(
            strategy=strategy, accelerator="cpu", max_epochs=3, deterministic=True, callbacks=[callback], **QUIET
        )
        trainer.fit(module, loader)
        runs.append((module, callback))
    (ps_module, ps_callback), (plain, _) = runs
    assert ps_module.trainer.strategy.updates_done == 12
    assert_states_close(state(ps_module), state(plain), atol=1e-5)
    assert int(ps_module.frozen.num_batches_tracked) == 4 and int(ps_module.live.num_batches_tracked) == 12
    assert float(ps_module.frozen.running_mean.min()) > 0.5  # not vacuous: epoch 0 moved them towards the data
    if weight:  # the frozen weight is where it was at epoch 1's start; the others moved on
        assert torch.equal(ps_module.l1.weight, ps_callback.at_freeze)
        assert not torch.equal(ps_module.l1.bias, module_cls().l1.bias)


class UpdateByUpdate:
    """A callback (mixed into the namespace's ``Callback``) that makes the look-ahead compute each update's gradients
    at its own update, none ahead."""

    def on_train_start(self, trainer, pl_module) -> None:
        trainer.strategy.lookahead.ahead = 1


@pytest.mark.parametrize(("name", "per_step"), [("pytorch_lightning", None), ("lightning.pytorch", 1)])
def test_no_gradient_of_an_epochs_update_is_computed_before_that_epochs_start_hooks(name, per_step):
    """1-softsync, λ = 4, μ = 4, N = 64 (4 updates an epoch, 3 epochs): rows of epoch e + 1's first updates read
    weights of epoch e, so the look-ahead could compute them before epoch e + 1's ``on_train_epoch_start``. Every
    ``training_step`` call of an update runs in that update's Lightning epoch and sees its hooks' state (the layer
    in eval mode and the weight frozen from epoch 1 on); the frozen layer's statistics count epoch 0's gradients
    only; the weights and buffers are those of computing each update's gradients at its own update."""
    pl_ns, data, mu, epochs = namespace(name), shifted_data(), 4, 3
    module_cls, callback_cls = frozen_from_epoch_1(name)
    runs = []
    for ahead in (True, False):
        module = module_cls()
        callbacks = [callback_cls(weight=True)]
        if not ahead:
            callbacks.append(type("UpdateByUpdate", (UpdateByUpdate, pl_ns.Callback), {})())
        strategy = strategy_class(name).simulated(
            "softsync", n=1, learners=4, seed=0, progress="none", updates_per_step=per_step
        )
        loader = torch.utils.data.DataLoader(data, batch_size=mu)
        pl_ns.Trainer(strategy=strategy, max_epochs=epochs, deterministic=True, callbacks=callbacks, **QUIET).fit(
            module, loader
        )
        runs.append((module, strategy))
    (module, strategy), (by_update, _) = runs
    sched = strategy.schedule
    b = epoch_bounds(sched, mu, len(data), epochs)
    assert b == [0, 4, 8, 12]
    epoch_of = np.searchsorted(b, np.arange(sched.num_updates), side="right") - 1
    upd, ts = sched.update_index, sched.ts
    assert any(((ts < b[e]) & (upd >= b[e])).any() for e in (1, 2))  # not vacuous: rows that read the last epoch
    assert len(module.seen) == sched.num_gradients + 1  # (and the loss check at setup)
    for u, epoch, training, requires_grad in module.seen:
        assert (epoch, training, requires_grad) == (epoch_of[u], epoch_of[u] == 0, epoch_of[u] == 0), (u, epoch)
    assert int(module.frozen.num_batches_tracked) == int(sched.offsets[b[1]]) == 16
    assert int(module.live.num_batches_tracked) == sched.num_gradients
    assert_states_close(state(module), state(by_update), atol=1e-6)


def adam_bn_module(name: str):
    """A user's module as projects write it, in namespace ``name``: BatchNorm, Adam with a StepLR each epoch and
    ``self.log`` in every step (an MLP: cuDNN's convolutions would add their own rounding on the GPU)."""
    lpl = namespace(name)

    class AdamBN(lpl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = mlp_bn()
            self.devices: set[str] = set()  # where training_step's samples were

        def training_step(self, batch, batch_idx):
            x, y = batch
            self.devices.add(x.device.type)
            loss = F.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            opt = torch.optim.Adam(self.parameters(), lr=1e-2)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)}

    return AdamBN()


def largest_gap(a: dict, b: dict) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: nothing to compare")
@pytest.mark.parametrize("name", NAMESPACES)
def test_cuda_gives_the_cpu_weights_for_a_users_batchnorm_adam_module(digits, name, tmp_path):
    """The Lightning door on a GPU: a user's BatchNorm module with Adam and a scheduler, async with λ = 4 (stale
    snapshots, the PS's running statistics) for 2 epochs, ends on CUDA as close to its CPU weights and buffers as
    plain Lightning's same 32 steps end to theirs. (Adam divides by √v: a gradient at rounding level moves its
    weight by up to the learning rate, so the devices' gap is plain Lightning's own, not a fixed tolerance; it was
    5.6e-4 for the strategy on an H200.)"""
    lpl = namespace(name)
    data = torch.utils.data.TensorDataset(digits.x_train[:256], digits.y_train[:256])
    end: dict[tuple[str, str], dict] = {}
    for door in ("plain", "ps"):
        for accelerator in ("cpu", "gpu"):
            module = adam_bn_module(name)
            strategy = strategy_class(name).simulated("async", learners=4, progress="none", seed=0)
            trainer = lpl.Trainer(
                strategy=strategy if door == "ps" else "auto",
                accelerator=accelerator,
                devices=1,
                max_epochs=2,
                default_root_dir=tmp_path,
                **QUIET,
            )
            trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=16))
            assert trainer.global_step == 32 if door == "plain" else strategy.updates_done == 32
            assert module.devices == {"cuda" if accelerator == "gpu" else "cpu"}  # a gap of 0 is not a CPU rerun
            end[door, accelerator] = {k: v.detach().cpu() for k, v in module.net.state_dict().items()}
    plain, ps = (largest_gap(end[d, "gpu"], end[d, "cpu"]) for d in ("plain", "ps"))
    assert ps <= max(4 * plain, 1e-5), f"CUDA against CPU: the strategy's largest gap {ps:.2e}, plain's {plain:.2e}"
    assert largest_gap(end["ps", "cpu"], end["plain", "cpu"]) > 1e-2  # the strategy's own run, not plain's
    assert int(end["ps", "gpu"]["2.num_batches_tracked"]) == int(end["ps", "cpu"]["2.num_batches_tracked"]) == 32
