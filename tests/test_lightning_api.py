"""``ParameterServerStrategy.simulated`` in a user's own Lightning script.

A user's LightningModule (its own ``training_step``, ``configure_optimizers``, ``self.log``) and data, trained by
Lightning with the strategy: Rudra Eq 7 (hardsync λ×μ ≡ plain Lightning at μλ), async λ = 1 ≡ plain SGD, the
staleness histogram equals the CLI's schedule, the batching check, a regression module, bad input.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pytorch_lightning.callbacks import LearningRateMonitor

from logged_metrics import LoggedMetrics
from psbench import ParameterServerStrategy
from psbench.errors import ConfigError
from psbench.ps.samples import SampleStream

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*litlogger.*")
QUIET = dict(logger=False, enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)


class Classifier(pl.LightningModule):
    """A user's module: an MLP, mean cross-entropy, momentum SGD with a per-step lr schedule, ``self.log``."""

    def __init__(self, net: torch.nn.Module | None = None, lr: float = 0.05) -> None:
        super().__init__()
        self.net = (
            net
            if net is not None
            else torch.nn.Sequential(
                torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
            )
        )
        self.lr = lr

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=15, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class StreamOrder(torch.utils.data.Sampler):
    """Plain Lightning's sampler in the order of psbench's sample stream (positions 0, 1, …, across epochs): epoch e
    of ``samples`` each takes positions e·samples … (e+1)·samples − 1 (Lightning calls ``set_epoch``)."""

    def __init__(self, n: int, samples: int, seed: int = 0) -> None:
        self.n, self.samples, self.seed, self.epoch = n, samples, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.samples

    def __iter__(self):
        return iter(SampleStream(self.n, self.seed).indices(self.epoch * self.samples, self.samples).tolist())


class EpochEnds(pl.Callback):
    """``trainer.global_step`` (PS updates done) at the end of every training epoch."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.steps.append(trainer.global_step)


def train_set(digits):
    return torch.utils.data.TensorDataset(digits.x_train, digits.y_train)


def async_one_and_plain(data, mu: int = 16):
    """The exact pair: async λ = 1 ≡ plain SGD, plain Lightning in psbench's sample order. Yields ``(name, the
    Trainer's strategy or accelerator, the training loader of μ)``, each after ``torch.manual_seed(0)``."""
    n = len(data)
    for name, kw, order in (
        ("ps", {"strategy": ParameterServerStrategy.simulated(protocol="async", learners=1)}, dict(shuffle=True)),
        ("plain", {"accelerator": "cpu"}, dict(sampler=StreamOrder(n, n))),
    ):
        torch.manual_seed(0)
        yield name, kw, torch.utils.data.DataLoader(data, batch_size=mu, **order)


def fit(module, loader, strategy=None, **trainer) -> pl.Trainer:
    kw = {"strategy": strategy} if strategy is not None else {"accelerator": "cpu"}
    t = pl.Trainer(**kw, deterministic=True, **QUIET, **trainer)
    t.fit(module, train_dataloaders=loader)
    return t


def weights(module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


@pytest.mark.parametrize("clip", [None, 0.5])
def test_hardsync_equals_plain_lightning_at_batch_mu_lambda(digits, clip):
    """Rudra Eq 7 through the public API: (σ, μ, λ) = (0, 8, 4) of a user's module ≡ the same module trained by
    plain Lightning at μλ = 32 on the same samples (momentum SGD, a per-update lr schedule, 50 updates crossing
    an epoch; with the Trainer's gradient clipping, each PS update's aggregate clipped as Lightning clips the
    batch's gradient), and the strategy's epoch = N samples consumed by the PS."""
    lam, mu, steps = 4, 8, 50
    torch.manual_seed(0)
    ps = Classifier()
    torch.manual_seed(0)
    plain = Classifier()
    assert torch.equal(weights(ps), weights(plain))
    data = train_set(digits)
    strategy = ParameterServerStrategy.simulated(protocol="hardsync", learners=lam, seed=0)
    ends = EpochEnds()
    t = fit(
        ps,
        torch.utils.data.DataLoader(data, batch_size=mu, shuffle=True),
        strategy,
        max_steps=steps,
        callbacks=[ends],
        gradient_clip_val=clip,
    )
    fit(
        plain,
        torch.utils.data.DataLoader(data, batch_size=mu * lam, sampler=StreamOrder(len(data), steps * mu * lam)),
        max_steps=steps,
        gradient_clip_val=clip,
    )
    assert t.gradient_clip_val == clip  # the user's Trainer as it was
    assert t.global_step == steps and strategy.updates_done == steps
    assert ends.steps == [45, 50]  # epoch 0: the updates whose first sample is one of the first N = 1437
    assert strategy.check["concat"]["agree"] is True  # the 4 learners ran as one call, checked first
    assert float((weights(ps) - weights(plain)).abs().max()) <= 1e-5
    moved = float((weights(ps) - weights(Classifier())).abs().max())
    assert moved > 1e-2  # not vacuous: training moved the weights


def test_async_with_one_learner_equals_plain_sgd(digits):
    mu, steps = 16, 40
    torch.manual_seed(1)
    ps = Classifier()
    torch.manual_seed(1)
    plain = Classifier()
    data = train_set(digits)
    strategy = ParameterServerStrategy.simulated(protocol="async", learners=1, seed=3)
    fit(ps, torch.utils.data.DataLoader(data, batch_size=mu), strategy, max_steps=steps)
    fit(
        plain,
        torch.utils.data.DataLoader(data, batch_size=mu, sampler=StreamOrder(len(data), steps * mu, seed=3)),
        max_steps=steps,
    )
    assert float((weights(ps) - weights(plain)).abs().max()) <= 1e-6
    assert strategy.summary.staleness_hist == {0: steps} and strategy.summary.updates_done == steps


class AuxHead(pl.LightningModule):
    """A head the training loss does not use (validation only, say), AdamW with weight decay."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head, self.aux = torch.nn.Linear(8, 2), torch.nn.Linear(8, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.head(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.05, weight_decay=1.0)


def test_a_parameter_the_loss_does_not_use_is_left_alone_as_in_plain_lightning():
    """Hardsync of λ = 4 learners of μ = 16 on N = 64 (one update per epoch) ≡ plain Lightning at batch 64: the head
    the loss does not use has no gradient in any learner, so AdamW skips it (no weight decay, no moments) and it
    keeps its initial weights; the used head trains as in plain Lightning."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    data = torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())
    strategy = ParameterServerStrategy.simulated(protocol="hardsync", learners=4, progress="none")
    ps, plain = AuxHead(), AuxHead()
    fit(ps, torch.utils.data.DataLoader(data, batch_size=16), strategy, max_epochs=5)
    fit(plain, torch.utils.data.DataLoader(data, batch_size=64), max_epochs=5)
    assert strategy.updates_done == 5
    assert float((weights(ps) - weights(plain)).abs().max()) <= 1e-5
    assert torch.equal(weights(ps.aux), weights(AuxHead().aux))
    opt = ps.trainer.optimizers[0]
    assert all(p not in opt.state for p in ps.aux.parameters()) and all(p in opt.state for p in ps.head.parameters())
    assert float((weights(ps.head) - weights(AuxHead().head)).abs().max()) > 1e-2  # not vacuous
    ahead = strategy.lookahead  # a checkpoint keeps which weights the gradients computed ahead reached
    ahead.reached = {7: {"head.weight", "head.bias"}}
    sd = ahead.state_dict()
    ahead.reached = {}
    ahead.load_state_dict(sd)
    assert ahead.gradless(7) == {"aux.weight", "aux.bias"} and ahead.gradless(8) == frozenset()


class SummedLoss(Classifier):
    """A loss summed over the batch: concatenating learners would multiply the update by k."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y, reduction="sum") / 8


class ConvNet(Classifier):
    """A conv module; ``view`` after the convolution raises on channels_last activations."""

    def __init__(self, flatten: str = "flatten") -> None:
        super().__init__(torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2)))
        self.fc, self.flatten = torch.nn.Linear(36, 10), flatten

    def forward(self, x):
        h = self.net(x)
        return self.fc(h.flatten(1) if self.flatten == "flatten" else h.view(h.size(0), -1))


def softsync_fit(digits, module_cls, batching: str, *args):
    torch.manual_seed(2)
    module = module_cls(*args)
    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=2, learners=6, seed=1, batching=batching)
    fit(module, torch.utils.data.DataLoader(train_set(digits), batch_size=4, shuffle=True), strategy, max_steps=30)
    return weights(module), strategy.check


@pytest.mark.parametrize(
    ("module_cls", "args", "concat", "layout"),
    [
        (Classifier, (), True, False),
        (SummedLoss, (), False, False),
        (ConvNet, ("flatten",), True, True),
        (ConvNet, ("view",), True, False),
    ],
)
def test_batching_is_checked_on_the_first_gradients_and_gives_the_per_learner_weights(
    digits, module_cls, args, concat, layout
):
    """Learners that read one snapshot share one call only where the first such unit's concatenated and
    per-learner gradients agree (not for a summed loss); conv modules on the CPU run channels_last only where it
    gives the NCHW gradient without error (not with a ``view`` of an activation). Either way the weights are the
    per-learner loop's, to float tolerance."""
    auto, check = softsync_fit(digits, module_cls, "auto", *args)
    loop, none = softsync_fit(digits, module_cls, "loop", *args)
    assert check["concat"]["agree"] is concat and check["concat"]["rows"] >= 2
    assert check["channels_last"] is layout
    assert none == {"concat": None, "channels_last": False}
    assert float((auto - loop).abs().max()) <= 1e-5


@pytest.mark.parametrize(
    ("protocol", "hardware"), [({"name": "softsync", "n": 2}, "laptop"), ({"name": "async"}, "p775")]
)
def test_staleness_histogram_equals_the_cli_schedules(digits, run_psbench, tmp_path, protocol, hardware):
    """The same (protocol, λ, μ, hardware, seed, epochs) on the same model size and N: the summary's staleness
    histogram, PS updates, simulated time and schedule hash are the CLI's (``schedule_only``)."""
    from psbench.models import build_model

    args = [
        f"protocol={protocol['name']}",
        *(f"protocol.{k}={v}" for k, v in protocol.items() if k != "name"),
        "learners=4",
        "batch_size=32",
        "epochs=2",
        f"hardware={hardware}",
        "seed=5",
        "model=mlp",
        "dataset=digits",
        "schedule_only=true",
        "logger=none",
    ]
    proc = run_psbench(*args, root=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = (tmp_path / "outputs").rglob("summary.json")
    cli = json.loads(path.read_text())
    torch.manual_seed(0)
    module = Classifier(build_model("mlp", digits.input_shape, digits.num_classes, hidden=[128]))
    strategy = ParameterServerStrategy.simulated(protocol, learners=4, hardware=hardware, seed=5)
    fit(module, torch.utils.data.DataLoader(train_set(digits), batch_size=32, shuffle=True), strategy, max_epochs=2)
    s = strategy.summary
    assert {int(k): v for k, v in cli["staleness_hist"].items()} == s.staleness_hist
    assert len(s.staleness_hist) > 1  # not vacuous: stale gradients
    for key in (
        "ps_updates",
        "gradients",
        "staleness_mean",
        "sim_time_s",
        "bytes_pushed",
        "schedule_sha256",
        "samples",
        "epochs_done",
    ):
        assert getattr(s, key) == cli[key], key
    assert s.updates_done == s.ps_updates and s.status == "finished"


class Regression(pl.LightningModule):
    """A user's regression module: y = x·w + noise, mean squared error."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x).squeeze(1), y)
        self.log("train_mse", loss)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_mse", F.mse_loss(self.net(x).squeeze(1), y))

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.05)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)]  # per epoch (Lightning's default)


def regression_data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = x @ torch.linspace(-1, 1, 8) + 0.05 * torch.randn(n, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def test_a_regression_module_trains_and_its_test_loss_falls():
    torch.manual_seed(0)
    module = Regression()
    test = regression_data(256, 1)
    with torch.no_grad():
        before = float(F.mse_loss(module.net(test.tensors[0]).squeeze(1), test.tensors[1]))
    strategy = ParameterServerStrategy.simulated(
        protocol="softsync", n=2, learners=4, lr_policy="mean_staleness", seed=0
    )
    t = pl.Trainer(strategy=strategy, max_epochs=3, num_sanity_val_steps=0, **QUIET)
    t.fit(
        module,
        torch.utils.data.DataLoader(regression_data(512, 0), batch_size=8, shuffle=True),
        torch.utils.data.DataLoader(test, batch_size=64),
    )
    after = float(t.callback_metrics["val_mse"])
    assert after < 0.2 * before, (before, after)
    assert t.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.05 * 0.7**3)  # after every epoch, as Lightning
    s = strategy.summary
    assert s.updates_done == s.ps_updates and s.staleness_max >= 1 and s.train_loss < before


# ----------------------------------------------------------------------------- bad input: one line, before any work
@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"protocol": "nope"}, "protocol.name"),
        ({"protocol": "agn"}, "protocol.name"),  # a local-step protocol: refused with a LightningModule
        ({"protocol": "softsync", "n": 9}, "protocol.n"),
        ({"protocol": "hardsync", "n": 2}, "protocol.n"),
        ({"learners": 0}, "learners"),
        ({"seed": -1}, "seed"),
        ({"hardware": "cray"}, "hardware.name"),
        ({"hardware": {"name": "laptop", "bandwidth_Bps": -1}}, "hardware.bandwidth_Bps"),
        ({"hardware": {"name": "laptop", "calibrate": True}}, "hardware.calibrate"),
        ({"lr_policy": "fast"}, "lr_policy.name"),
        ({"compression": {"name": "topk", "k": 2}}, "compression.k"),
        ({"compression": {"name": "qsgd", "levls": 4}}, "compression.levls"),
        ({"batching": "vmap"}, "batching"),
        ({"updates_per_step": 0}, "updates_per_step"),
    ],
)
def test_refused_options_are_one_line_at_construction(options, key):
    kw = {"learners": 4, **options}
    with pytest.raises(ConfigError) as e:
        ParameterServerStrategy.simulated(kw.pop("protocol", "hardsync"), **kw)
    assert e.value.key == key and "\n" not in str(e.value) and "is invalid: allowed" in str(e.value)


def test_an_unknown_protocol_is_offered_the_four_a_module_runs():
    """Not the ``protocol`` group's every option: the local-step ones are refused with a LightningModule."""
    with pytest.raises(ConfigError) as e:
        ParameterServerStrategy.simulated("nope", learners=4)
    assert str(e.value).startswith("protocol.name='nope' is invalid: allowed hardsync, softsync, async or ssp with")


@pytest.mark.parametrize(
    ("options", "overrides"),
    [
        ({"protocol": "softsync", "n": 9}, ["protocol=softsync", "protocol.n=9"]),
        ({"hardware": {"name": "p775", "bandwidth_Bps": -1}}, ["hardware=p775", "hardware.bandwidth_Bps=-1"]),
        ({"compression": {"name": "topk", "k": 2}}, ["compression=topk", "compression.k=2"]),
    ],
)
def test_a_refused_option_is_the_line_the_cli_prints(run_psbench, tmp_path, options, overrides):
    """The same bad value through the API and through ``psbench``: the exception is the CLI's error line."""
    kw = {"learners": 4, **options}
    with pytest.raises(ConfigError) as e:
        ParameterServerStrategy.simulated(kw.pop("protocol", "hardsync"), **kw)
    proc = run_psbench(*overrides, "learners=4", "logger=none", root=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == f"psbench: error: {e.value}"


class NoLoss(Classifier):
    def __init__(self, returns: str) -> None:
        super().__init__()
        self.returns = returns

    def training_step(self, batch, batch_idx):
        x, y = batch
        per = F.cross_entropy(self(x), y, reduction="none")
        return {
            "none": None,
            "dict": {"logits": per},
            "detached": per.mean().detach(),
            "per_sample": per,
            "integer": y.sum(),
        }[self.returns]


class Manual(Classifier):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False


class TwoOptimizers(Classifier):
    def configure_optimizers(self):
        return [torch.optim.SGD(self.net[1].parameters(), lr=0.1), torch.optim.SGD(self.net[3].parameters(), lr=0.1)]


class OwnStep(Classifier):
    """Warm-up in ``optimizer_step``, Lightning's documented idiom: no PS update calls it."""

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)


class AfterBackward(Classifier):
    def on_after_backward(self) -> None:
        pass


class OwnClipping(Classifier):
    def configure_gradient_clipping(self, *args, **kwargs) -> None:
        pass


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, data) -> None:
        self.data = data

    def __iter__(self):
        return iter(self.data)


@pytest.mark.parametrize(
    ("make", "trainer", "key"),
    [
        (lambda d: (NoLoss("none"), d(batch_size=8)), {}, "training_step"),
        (lambda d: (NoLoss("dict"), d(batch_size=8)), {}, "training_step"),
        (lambda d: (NoLoss("detached"), d(batch_size=8)), {}, "training_step"),
        (lambda d: (NoLoss("per_sample"), d(batch_size=8)), {}, "training_step"),
        (lambda d: (NoLoss("integer"), d(batch_size=8)), {}, "training_step"),
        (lambda d: (Manual(), d(batch_size=8)), {}, "automatic_optimization"),
        (lambda d: (TwoOptimizers(), d(batch_size=8)), {}, "configure_optimizers"),
        (
            lambda d: (Classifier(), d(batch_size=8, sampler=torch.utils.data.SubsetRandomSampler(range(100)))),
            {},
            "train_dataloader.sampler",
        ),
        (lambda d: (Classifier(), d(batch_size=None)), {}, "train_dataloader.batch_size"),
        (lambda d: (Classifier(), d(batch_size=400)), {}, "train_dataloader.batch_size"),  # c·μ = 1600 > N
        (lambda d: (Classifier(), "stream"), {}, "train_dataloader.dataset"),
        (lambda d: (Classifier(), d(batch_size=8)), {"limit_train_batches": 0.5}, "limit_train_batches"),
        (lambda d: (Classifier(), d(batch_size=8)), {"accumulate_grad_batches": 2}, "accumulate_grad_batches"),
        (lambda d: (Classifier(), d(batch_size=8)), {"max_epochs": -1, "max_steps": -1}, "max_epochs"),
        (lambda d: (Classifier(), d(batch_size=8)), {"precision": "bf16-mixed"}, "precision"),
        (lambda d: (Classifier(), d(batch_size=8)), {"fast_dev_run": True}, "fast_dev_run"),
        (lambda d: (Classifier(), d(batch_size=8)), {"overfit_batches": 2}, "overfit_batches"),
        (
            lambda d: (Classifier(), d(batch_size=8)),
            {"reload_dataloaders_every_n_epochs": 1},
            "reload_dataloaders_every_n_epochs",
        ),
        (lambda d: (OwnStep(), d(batch_size=8)), {}, "LightningModule.optimizer_step"),
        (lambda d: (AfterBackward(), d(batch_size=8)), {}, "LightningModule.on_after_backward"),
        (lambda d: (OwnClipping(), d(batch_size=8)), {}, "LightningModule.configure_gradient_clipping"),
        (
            lambda d: (Classifier(), d(batch_size=8)),
            {"callbacks": [pl.callbacks.BackboneFinetuning(unfreeze_backbone_at_epoch=1)]},
            "callbacks",
        ),
        (
            lambda d: (Classifier(), d(batch_size=8)),
            {"callbacks": [pl.callbacks.StochasticWeightAveraging(swa_lrs=0.01)]},
            "callbacks",
        ),
        (
            lambda d: (Classifier(), d(batch_size=8)),
            {"callbacks": [pl.callbacks.GradientAccumulationScheduler(scheduling={0: 1, 2: 2})]},
            "callbacks",
        ),
    ],
)
def test_refused_modules_data_and_trainers_are_one_line_before_any_update(digits, make, trainer, key):
    data = train_set(digits)
    module, loader = make(lambda **kw: torch.utils.data.DataLoader(data, **kw))
    if loader == "stream":
        loader = torch.utils.data.DataLoader(Stream(data), batch_size=8)
    start = weights(module).clone()
    strategy = ParameterServerStrategy.simulated(protocol="hardsync", learners=4)
    t = pl.Trainer(strategy=strategy, **{"max_epochs": 1, **trainer}, **QUIET)
    with pytest.raises(ConfigError) as e:
        t.fit(module, train_dataloaders=loader)
    assert e.value.key == key and "\n" not in str(e.value)
    assert strategy.updates_done == 0 and torch.equal(weights(module), start)


class Dropped(pl.LightningModule):
    """Dropout draws on the module's device and BatchNorm counts its batches: the loss check must leave both."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Dropout(0.5))

    def training_step(self, batch, batch_idx):
        return self.net(batch).square().mean()


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
        ),
    ],
)
def test_the_loss_check_leaves_the_rngs_of_the_cpu_and_the_modules_device_and_its_buffers(device):
    from psbench.strategy.simulated import check_loss

    torch.manual_seed(0)
    module, batch = Dropped().to(device).train(), torch.randn(4, 8, device=device)
    rng = (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device == "cuda" else None)
    buffers = {k: b.clone() for k, b in module.named_buffers()}
    check_loss(module, batch)
    assert torch.equal(torch.get_rng_state(), rng[0])
    if device == "cuda":  # it drew its dropout mask there: unforked, the run's first mask would be another
        assert torch.equal(torch.cuda.get_rng_state(device), rng[1])
    assert all(torch.equal(b, buffers[k]) for k, b in module.named_buffers())


class WithHooks(Classifier):
    """Batch-transfer hooks of the user's: (x, y) becomes a dict before the transfer, x is centred after it."""

    def on_before_batch_transfer(self, batch, dataloader_idx):
        x, y = batch  # a Trainer step's chunk of PS updates would not unpack: it must not reach the hook
        return {"x": x, "y": y}

    def on_after_batch_transfer(self, batch, dataloader_idx):
        return {"x": batch["x"] - 0.5, "y": batch["y"]}

    def training_step(self, batch, batch_idx):
        return F.cross_entropy(self(batch["x"]), batch["y"])


def test_the_batch_transfer_hooks_run_on_every_learners_mini_batch(digits):
    """The user's batch hooks shape each learner's mini-batch as Lightning shapes a batch: hardsync with them equals
    plain Lightning with them (Rudra Eq 7), and with them removed the weights differ."""
    lam, mu, steps = 3, 8, 12
    data = train_set(digits)
    out = []
    for cls, strategy in (
        (WithHooks, ParameterServerStrategy.simulated(learners=lam)),
        (WithHooks, None),
        (Classifier, None),
    ):
        torch.manual_seed(0)
        module = cls()
        loader = (
            torch.utils.data.DataLoader(data, batch_size=mu, shuffle=True)
            if strategy
            else torch.utils.data.DataLoader(
                data, batch_size=mu * lam, sampler=StreamOrder(len(data), steps * mu * lam)
            )
        )
        fit(module, loader, strategy, max_steps=steps)
        out.append(weights(module))
    assert float((out[0] - out[1]).abs().max()) <= 1e-5
    assert float((out[1] - out[2]).abs().max()) > 1e-3


def test_same_seed_same_weights_and_a_codec_compresses_every_learners_gradient(digits):
    """Determinism (the same module, data and seed: the same weights, bit for bit), and ``compression`` as the
    CLI's group: TernGrad's payloads of every learner's gradient are what the codec says, and change the weights."""

    def run(**options):
        torch.manual_seed(0)
        module = Classifier()
        strategy = ParameterServerStrategy.simulated(protocol="ssp", staleness_bound=1, learners=4, seed=2, **options)
        fit(module, torch.utils.data.DataLoader(train_set(digits), batch_size=8, shuffle=True), strategy, max_steps=24)
        return weights(module), strategy

    plain, s = run()
    again, _ = run()
    tern, t = run(compression={"name": "terngrad", "clip": 2.5})
    assert torch.equal(plain, again)
    assert s.summary.staleness_max >= 1 and s.summary.bytes_pushed_measured is None
    assert t.summary.compression == "terngrad"
    assert t.summary.bytes_pushed_measured == t.summary.updates_done * t.compression.push_bytes()  # c = 1 (SSP)
    assert t.summary.bytes_pushed < s.summary.bytes_pushed  # the cost model's pushes are the codec's too
    assert float((tern - plain).abs().max()) > 1e-4


def test_the_lightning_example_trains_an_existing_module_with_the_strategy():
    """``examples/lightning/train.py``: model.py's LightningModule and DataModule, unchanged, on 2-softsync."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "lightning" / "train.py"
    spec = importlib.util.spec_from_file_location("psbench_lightning_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(["--protocol", "softsync", "--n", "2", "--learners", "4", "--max-epochs", "2"])
    assert result["protocol"] == "2-softsync" and result["staleness_mean"] > 1
    assert result["ps_updates"] == 2 * 1437 // (16 * 2)  # ⌊2·N/μ⌋ gradients, c = 2 a PS update
    assert result["val_acc"] > 0.3  # 10 classes: well above chance after two epochs


def test_import_psbench_is_torch_free_until_the_strategy_is_used():
    """``from psbench import ParameterServerStrategy`` loads on first use: ``import psbench`` (the CLI's start)
    imports no torch."""
    import subprocess
    import sys

    code = (
        "import sys, psbench; print(sorted({'torch', 'pytorch_lightning'} & set(sys.modules))); "
        "from psbench import ParameterServerStrategy; print(ParameterServerStrategy.__module__, "
        "'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "psbench.strategy.ps_strategy True"


# ----------------------------------------------------------------------------- one plan, two doors
def test_both_doors_plan_the_run_through_the_same_functions(digits, compose_cfg, tmp_path, monkeypatch, capsys):
    """The psbench command (``build_run`` → ``train_sim``, ``schedule_only``) and ``ParameterServerStrategy.simulated``
    for the same (protocol, λ, μ, hardware, seed, epochs) on the same model size and N: each plans its run by one
    call of each function of :mod:`psbench.ps.plan`, with equal arguments, and gets the same schedule hash, staleness
    histogram, simulated time and progress lines."""
    from psbench.assemble import build_run
    from psbench.models import build_model
    from psbench.ps import plan
    from psbench.strategy.executor import train_sim

    monkeypatch.setattr(plan, "PROGRESS_AFTER_S", 0.0)  # a line every 64 gradients, however fast the simulation
    monkeypatch.setattr(plan, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(plan, "PROGRESS_GRADIENTS", 64)
    calls: list[tuple[str, tuple, dict]] = []

    def spying(name: str):
        real = getattr(plan, name)

        def spy(*args, **kwargs):
            calls.append((name, args, kwargs))
            return real(*args, **kwargs)

        return spy

    for name in ("gradient_count", "codec_cost", "simulate", "summary"):
        monkeypatch.setattr(plan, name, spying(name))

    def progress(err: str) -> list[str]:
        lines = [s for s in err.splitlines() if s.startswith(("psbench: simulat", "psbench: collected"))]
        return [re.sub(r"\d+ s\b", "_ s", s) for s in lines]  # the seconds differ, the counts may not

    shared = {"learners": 4, "batch_size": 8, "epochs": 2, "hardware": "p775", "seed": 5}
    cfg = compose_cfg(
        *(f"{k}={v}" for k, v in shared.items()),
        *("protocol=softsync", "protocol.n=2", "model=mlp", "model.hidden=[16]", "dataset=digits"),
        *("schedule_only=true", "trainer.progress=plain", "logger=none"),
    )
    capsys.readouterr()
    cli = train_sim(build_run(cfg), tmp_path)
    cli_lines, cli_calls = progress(capsys.readouterr().err), calls[:]
    calls.clear()
    torch.manual_seed(0)
    module = Classifier(build_model("mlp", digits.input_shape, digits.num_classes, hidden=[16]))
    strategy = ParameterServerStrategy.simulated(
        {"name": "softsync", "n": 2}, learners=4, hardware="p775", seed=5, progress="plain"
    )
    fit(module, torch.utils.data.DataLoader(train_set(digits), batch_size=8, shuffle=True), strategy, max_epochs=2)
    api, api_lines = strategy.summary, progress(capsys.readouterr().err)

    assert (
        sorted(c[0] for c in cli_calls)
        == sorted(c[0] for c in calls)
        == sorted(["gradient_count", "codec_cost", "simulate", "summary"])
    )
    (cli_sim,), (api_sim,) = ([c for c in cs if c[0] == "simulate"] for cs in (cli_calls, calls))
    assert cli_sim[1] == api_sim[1] and cli_sim[2] == api_sim[2]  # protocol, cost model, topology, μ, G, seed, …
    assert cli_sim[1][4] == 2 * 1437 // 8  # G = ⌊epochs·N/μ⌋
    for key in ("schedule_sha256", "staleness_hist", "sim_time_s", "ps_updates", "bytes_pushed", "samples"):
        assert getattr(api, key) == getattr(cli, key), key
    assert len(cli.staleness_hist) > 1  # not vacuous: stale gradients
    assert cli_lines == api_lines and len(cli_lines) >= 5  # ⌊359/64⌋ lines and the last one
    assert cli_lines[-2:] == [
        "psbench: simulated the schedule: 358 gradients in _ s; collecting it",
        "psbench: collected the schedule and its statistics in _ s",
    ]


def test_the_api_draws_the_timeline_beside_the_trainers_logs(digits, tmp_path):
    """timeline.png (the trace of the first updates beside the staleness histogram) in the Trainer's log dir, named in
    the summary's artifacts, as the psbench command draws it in its run dir; none without a logger or checkpoints."""
    from pytorch_lightning.loggers import CSVLogger

    for logger in (CSVLogger(tmp_path), False):
        strategy = ParameterServerStrategy.simulated({"name": "softsync", "n": 2}, learners=4, seed=1)
        t = pl.Trainer(
            strategy=strategy,
            max_steps=10,
            logger=logger,
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            default_root_dir=tmp_path / "root",
        )
        t.fit(Classifier(), torch.utils.data.DataLoader(train_set(digits), batch_size=8, shuffle=True))
        if logger:
            (path,) = strategy.summary.artifacts
            assert path == str(Path(t.log_dir) / "timeline.png") and Path(path).read_bytes()[:4] == b"\x89PNG"
        else:
            assert strategy.summary.artifacts == [] and not (tmp_path / "root").exists()


class GradNorms(pl.Callback):
    """A gradient-norm logger as users write one: the aggregate's norm before each PS update's optimizer step."""

    def __init__(self) -> None:
        self.norms: list[float] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.norms.append(float(torch.cat([p.grad.flatten() for p in pl_module.parameters()]).norm()))


def test_on_before_optimizer_step_runs_once_per_update_and_changes_nothing(digits, monkeypatch):
    """Lightning's optimizer wrapper runs where a hook needs it (``on_before_optimizer_step`` sees each update's
    aggregate in p.grad); without one the strategy steps the optimizer itself: the same weights and global_step."""
    from pytorch_lightning.core.optimizer import LightningOptimizer

    wrapped, step = [], LightningOptimizer.step
    monkeypatch.setattr(LightningOptimizer, "step", lambda self, *a, **k: wrapped.append(1) or step(self, *a, **k))
    data = torch.utils.data.TensorDataset(digits.x_train[:480], digits.y_train[:480])
    ends, calls = [], []
    for callbacks in ([], [GradNorms()]):
        wrapped.clear()
        torch.manual_seed(0)
        model = Classifier()
        strategy = ParameterServerStrategy.simulated("async", learners=4, seed=0)
        trainer = pl.Trainer(strategy=strategy, max_epochs=1, callbacks=callbacks, **QUIET)
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8, shuffle=True))
        ends.append((trainer.global_step, [p.detach().clone() for p in model.parameters()]))
        calls.append(len(wrapped))
        if callbacks:
            norms = callbacks[0].norms
            assert len(norms) == strategy.summary.updates_done == 60 and all(n > 0 for n in norms)
    assert ends[0][0] == ends[1][0] == 60 and calls == [0, 60]
    assert all(torch.equal(a, b) for a, b in zip(ends[0][1], ends[1][1], strict=True))


class HalveGrads(pl.Callback):
    """A hook that changes each update's aggregate in p.grad before the optimizer's step, as gradient scalers do."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        for p in pl_module.parameters():
            p.grad.mul_(0.5)


class SeesWeights(Classifier):
    """Records, per ``training_step``, whether the weights it runs on are finite."""

    def __init__(self) -> None:
        super().__init__(lr=1000.0)
        self.finite: list[bool] = []

    def training_step(self, batch, batch_idx):
        self.finite.append(all(bool(p.isfinite().all()) for p in self.parameters()))
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("hooks", [[], [HalveGrads]], ids=["training_step", "and_on_before_optimizer_step"])
def test_a_users_code_runs_only_on_weights_read_back_finite(digits, monkeypatch, hooks):
    """In a user's Trainer the PS reads each hardsync update back before the next flush (``Pending.defer`` off: only
    the psbench command's Trainer defers): the user's ``training_step`` never runs on weights a later read-back
    would find diverged, and no rollback replays updates without the user's ``on_before_optimizer_step``. The same
    run as a read-back forced before every flush, the divergence included."""
    from psbench.strategy.pending import Pending

    data = torch.utils.data.TensorDataset(digits.x_train[:480], digits.y_train[:480])
    ends = []
    for forced in (True, False):
        if forced:
            monkeypatch.setattr(Pending, "due", lambda self, room=None: True)
        else:
            monkeypatch.undo()
        torch.manual_seed(0)
        model = SeesWeights()
        strategy = ParameterServerStrategy.simulated("hardsync", learners=4, seed=0, divergence_factor=None)
        trainer = pl.Trainer(strategy=strategy, max_epochs=1, callbacks=[h() for h in hooks], **QUIET)
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8, shuffle=True))
        assert strategy.summary.diverged_at_update is not None and all(model.finite), model.finite
        ends.append(
            (strategy.summary.diverged_at_update, trainer.global_step, [p.detach().clone() for p in model.parameters()])
        )
    assert ends[0][:2] == ends[1][:2]
    assert all(torch.equal(a, b) for a, b in zip(ends[0][2], ends[1][2], strict=True))


class OneCycle(Classifier):
    """Lightning's documented way to size a schedule: ``estimated_stepping_batches`` in ``configure_optimizers``."""

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=self.lr)
        self.total = self.trainer.estimated_stepping_batches
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=self.total)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


@pytest.mark.parametrize("per_step", [1, None])
def test_estimated_stepping_batches_counts_the_ps_updates(digits, per_step):
    """A OneCycle sized by ``estimated_stepping_batches`` ends where plain Lightning's does with as many optimizer
    steps: it counts PS updates, not Trainer steps (several updates each; before, reading it loaded the user's own
    loader before the plan and the fit failed at its first update)."""
    data = train_set(digits)
    n = len(data) // 32 * 32
    data = torch.utils.data.Subset(data, range(n))
    ps = OneCycle()
    strategy = ParameterServerStrategy.simulated(protocol="async", learners=4, updates_per_step=per_step)
    t = fit(ps, torch.utils.data.DataLoader(data, batch_size=8), strategy, max_epochs=2)
    plain = OneCycle()
    tp = fit(plain, torch.utils.data.DataLoader(data, batch_size=8), max_epochs=2)
    assert ps.total == t.global_step == plain.total == tp.global_step == 2 * n // 8
    assert t.optimizers[0].param_groups[0]["lr"] == tp.optimizers[0].param_groups[0]["lr"]


class Scheduled(Classifier):
    """A user's module with one lr scheduler of plain SGD: ``kind`` at ``interval``. Its ReduceLROnPlateau watches the
    validation loss in ``mode="max"``, so a falling loss is a plateau at every look (factor ½, patience 0)."""

    def __init__(self, kind: str, interval: str) -> None:
        super().__init__(lr=0.1)
        self.kind, self.interval = kind, interval

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=self.lr)
        lr = torch.optim.lr_scheduler
        config: dict = {"interval": self.interval}
        if self.kind == "plateau":  # (a step-interval one steps before the first evaluation too: strict=False)
            config.update(monitor="val_loss", strict=False, scheduler=lr.ReduceLROnPlateau(opt, "max", 0.5, 0))
        elif self.kind == "step_lr":
            config.update(scheduler=lr.StepLR(opt, step_size=1, gamma=0.5))
        else:
            config.update(scheduler=lr.OneCycleLR(opt, max_lr=0.2, total_steps=self.trainer.estimated_stepping_batches))
        return {"optimizer": opt, "lr_scheduler": config}


@pytest.mark.parametrize(
    ("kind", "interval"), [("plateau", "epoch"), ("plateau", "step"), ("step_lr", "epoch"), ("one_cycle", "step")]
)
def test_learning_rate_monitor_logs_plain_lightnings_lr_series(digits, tmp_path, kind, interval):
    """LearningRateMonitor, at every epoch's start and every step's, logs the lr series plain Lightning logs (async
    λ = 1 ≡ plain SGD, one update per Trainer step, four epochs of 15 updates, an evaluation every 5): the lr the
    next update uses. Before, a ReduceLROnPlateau stepped at the next Trainer step's start, after the monitor's
    hooks, which logged each of its steps one step (interval "step") or one epoch ("epoch") late; the weights and
    the final lr were right."""
    data = torch.utils.data.Subset(train_set(digits), range(240))
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(digits.x_test, digits.y_test), batch_size=360)
    runs = []
    for ps in (True, False):
        torch.manual_seed(0)
        module, logged = Scheduled(kind, interval), LoggedMetrics()
        if ps:
            strategy = ParameterServerStrategy.simulated(protocol="async", learners=1, seed=3, updates_per_step=1)
            loader = torch.utils.data.DataLoader(data, batch_size=16, shuffle=True)
            kw: dict = {"strategy": strategy}
        else:
            loader = torch.utils.data.DataLoader(data, batch_size=16, sampler=StreamOrder(len(data), len(data), 3))
            kw = {"accelerator": "cpu"}
        pl.Trainer(
            **kw,
            max_epochs=4,
            val_check_interval=5,
            num_sanity_val_steps=0,
            log_every_n_steps=1,
            deterministic=True,
            logger=logged,
            default_root_dir=tmp_path,  # (timeline.png)
            callbacks=[LearningRateMonitor("epoch"), LearningRateMonitor("step")],
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
        ).fit(module, loader, val)
        lrs = [(step, k, float(v)) for step, m in logged.logged for k, v in m.items() if k.startswith("lr-")]
        runs.append((module, lrs))
    (ps_module, ps_rows), (plain, plain_rows) = runs
    assert len(plain_rows) == 4 + 4 * 15  # each epoch's start, each step's start
    assert len({lr for _, _, lr in plain_rows}) >= 3  # not vacuous: the lr changed within the fit
    assert ps_rows == plain_rows
    assert torch.equal(weights(ps_module), weights(plain))  # the lr the updates used, as before


class DecayOff(pl.Callback):
    """Weight decay scheduled through ``param_groups`` (DINO/ViT recipes): off from the second epoch."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.current_epoch >= 1:
            for g in trainer.optimizers[0].param_groups:
                g["weight_decay"] = 0.0


class AdamW(Classifier):
    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.01, weight_decay=5.0)


def test_a_users_weight_decay_set_through_param_groups_is_the_decay_applied(digits):
    """Hardsync λ = 4, μ = 16 on 64 samples is plain Lightning's full-batch step, decay switched off by a callback
    after the first epoch included (before, the PS reset each update's decay to the one of its first update)."""
    data = torch.utils.data.Subset(train_set(digits), range(64))
    ps, plain = AdamW(), AdamW()
    ps_start = {k: v.clone() for k, v in ps.state_dict().items()}
    plain.load_state_dict(ps_start)
    strategy = ParameterServerStrategy.simulated(protocol="hardsync", learners=4, updates_per_step=1)
    fit(ps, torch.utils.data.DataLoader(data, batch_size=16), strategy, max_epochs=3, callbacks=[DecayOff()])
    fit(plain, torch.utils.data.DataLoader(data, batch_size=64), max_epochs=3, callbacks=[DecayOff()])
    torch.testing.assert_close(weights(ps), weights(plain), rtol=1e-5, atol=1e-6)
    kept = AdamW()  # the decay kept on: another run, far from it
    kept.load_state_dict(ps_start)
    fit(kept, torch.utils.data.DataLoader(data, batch_size=64), max_epochs=3)
    assert (weights(kept) - weights(ps)).abs().max() > 1e-3


class StepLosses(pl.Callback):
    """What a user's ``on_train_batch_end`` reads: ``outputs["loss"]``."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"]))


def test_on_train_batch_end_gets_the_loss_of_the_steps_last_update(digits):
    """As in plain Lightning, a Trainer step's ``outputs`` hold its ``"loss"`` (before, None: ``outputs["loss"]``
    failed): that of the last PS update the step applied, the fit's last equal to the loss psbench read back last."""
    data = train_set(digits)
    cb = StepLosses()
    strategy = ParameterServerStrategy.simulated(protocol="async", learners=4)
    t = fit(Classifier(), torch.utils.data.DataLoader(data, batch_size=8), strategy, max_epochs=1, callbacks=[cb])
    assert len(cb.losses) == t.num_training_batches < t.global_step
    assert cb.losses[-1] == strategy.last_loss


class Evaluations(pl.Callback):
    def __init__(self) -> None:
        self.at: list[int] = []

    def on_validation_end(self, trainer, pl_module) -> None:
        self.at.append(trainer.global_step)


def test_checkpoints_and_evaluations_every_so_many_steps_are_every_so_many_updates(digits, tmp_path):
    """With ``updates_per_step`` unset, a Trainer that counts its steps (``every_n_train_steps``, a fractional
    ``val_check_interval``) gets one update per step: the checkpoints and evaluations of plain Lightning with as many
    optimizer steps (before, several updates per step skipped them: steps 6 and 12 of 3, 6, 9, 12)."""
    data = torch.utils.data.Subset(train_set(digits), range(256))
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(train_set(digits), range(256, 320)), batch_size=64)
    runs = {}
    for name, strategy, mu in (
        ("ps", ParameterServerStrategy.simulated(protocol="hardsync", learners=4), 16),
        ("plain", None, 64),
    ):
        ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / name, save_top_k=-1, every_n_train_steps=3)
        ev = Evaluations()
        kw = {"strategy": strategy} if strategy is not None else {"accelerator": "cpu"}
        t = pl.Trainer(
            **kw,
            max_epochs=3,
            val_check_interval=0.5,
            num_sanity_val_steps=0,
            callbacks=[ck, ev],
            default_root_dir=tmp_path,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        t.fit(Classifier(), torch.utils.data.DataLoader(data, batch_size=mu), val)
        runs[name] = (sorted(p.name for p in (tmp_path / name).iterdir()), ev.at, t.global_step)
    assert runs["ps"] == runs["plain"]
    assert runs["ps"][2] == 12 and len(runs["ps"][0]) == 4 and runs["ps"][1] == [2, 4, 6, 8, 10, 12]


def test_a_strategy_fits_with_one_trainer(digits):
    """A second Trainer with the same strategy (a notebook's rerun cell, a loop over seeds) is refused in one line
    before any update: the strategy's counts, snapshots and schedule are its first fit's (before, they carried over
    and its summary failed with an IndexError)."""
    loader = torch.utils.data.DataLoader(train_set(digits), batch_size=8)
    strategy = ParameterServerStrategy.simulated(protocol="async", learners=4)
    fit(Classifier(), loader, strategy, max_steps=5)
    module = Classifier()
    start = weights(module).clone()
    with pytest.raises(ConfigError) as e:
        fit(module, loader, strategy, max_steps=5)
    assert e.value.key == "strategy" and "\n" not in str(e.value)
    assert strategy.updates_done == 5 and torch.equal(weights(module), start)


def test_on_before_optimizer_step_sees_the_aggregate_before_gradient_clipping(digits):
    """As in plain Lightning, a gradient-norm logger sees each update's aggregate unclipped, and the Trainer's
    ``gradient_clip_val`` clips after it (before, it saw the clipped norm, 0.01 every update): the weights those of the
    same fit without the hook, bit for bit."""
    data = torch.utils.data.TensorDataset(digits.x_train[:240], digits.y_train[:240])
    ends, seen = [], []
    for callbacks in ([], [GradNorms()]):
        torch.manual_seed(0)
        model = Classifier()
        strategy = ParameterServerStrategy.simulated("async", learners=4, seed=0)
        trainer = pl.Trainer(strategy=strategy, max_epochs=1, callbacks=callbacks, gradient_clip_val=0.01, **QUIET)
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=8))
        ends.append(weights(model))
        seen += [n for cb in callbacks for n in cb.norms]
    assert len(seen) == 30 and min(seen) > 0.1
    assert torch.equal(ends[0], ends[1])


class Monitored(Classifier):
    """A constant lr high enough that ``val_loss`` stops improving within a few epochs."""

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def test_early_stopping_and_the_best_checkpoint_are_plain_lightnings(digits, tmp_path):
    """Async λ = 1 ≡ plain SGD: ``EarlyStopping(monitor="val_loss")`` stops at plain Lightning's epoch and
    ``ModelCheckpoint(monitor="val_loss", save_top_k=1)`` keeps plain Lightning's best checkpoint, named by Lightning's
    epoch (before, ``epoch=1-step=16.ckpt`` for plain's ``epoch=0-step=16.ckpt``: the strategy's evaluation logged
    psbench's ``epoch`` — samples / N, 1.0 after epoch 0 — over Lightning's, and the checkpoint's name reads it)."""
    n = 256
    data = torch.utils.data.Subset(train_set(digits), range(n))
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(train_set(digits), range(n, n + 64)), batch_size=64)
    runs = {}
    for name, kw, loader in async_one_and_plain(data):
        module = Monitored(lr=0.5)
        stop = pl.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=0.02)
        best = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / name, monitor="val_loss", save_top_k=1)
        t = pl.Trainer(
            **kw,
            max_epochs=20,
            callbacks=[stop, best],
            default_root_dir=tmp_path,
            **{**QUIET, "enable_checkpointing": True},
        )
        t.fit(module, loader, val)
        runs[name] = (stop.stopped_epoch, t.global_step, Path(best.best_model_path).name, float(best.best_model_score))
        runs[name + " weights"] = weights(module)
    assert runs["ps"] == runs["plain"]
    assert 0 < runs["ps"][0] < 19  # not vacuous: it stopped early
    assert torch.equal(runs["ps weights"], runs["plain weights"])


class EvaluatedAt(pl.Callback):
    """(``global_step``, ``val_loss``) of every evaluation after the sanity check."""

    def __init__(self) -> None:
        self.at: list[tuple[int, float]] = []

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self.at.append((trainer.global_step, float(trainer.callback_metrics["val_loss"])))


@pytest.mark.parametrize(
    ("max_steps", "trainer"),
    [(20, {}), (5, {}), (30, {"max_epochs": 3}), (16, {}), (20, {"val_check_interval": 0.5}), (20, {"max_epochs": 1})],
)
def test_max_steps_ends_an_epoch_where_plain_lightning_ends_it(digits, tmp_path, max_steps, trainer):
    """Async λ = 1 ≡ plain SGD on N = 256 at μ = 16 (16 updates an epoch): ``max_steps`` inside an epoch stops it
    mid-way, as in plain Lightning — no end-of-epoch evaluation there, the evaluations (``val_check_interval``) and the
    epoch-interval lr steps of plain Lightning (before, the cut epoch ran as a whole epoch of its few updates: an extra
    evaluation after update 20 of max_steps = 20, evaluations after updates 2 and 4 of max_steps = 5 at
    ``val_check_interval=0.5``). At 16 (an epoch's end) and with ``max_epochs=1`` the epoch ends as before."""
    n = 256
    data = torch.utils.data.Subset(train_set(digits), range(n))
    val = torch.utils.data.DataLoader(torch.utils.data.Subset(train_set(digits), range(n, n + 64)), batch_size=64)
    runs = {}
    for name, kw, loader in async_one_and_plain(data):
        module = Scheduled("step_lr", "epoch")
        seen = EvaluatedAt()
        t = pl.Trainer(**kw, max_steps=max_steps, callbacks=[seen], default_root_dir=tmp_path, **QUIET, **trainer)
        t.fit(module, loader, val)
        lr = t.optimizers[0].param_groups[0]["lr"]
        runs[name] = (t.global_step, t.current_epoch, seen.at, lr, weights(module))
    ps, plain = runs["ps"], runs["plain"]
    assert ps[:4] == plain[:4] and torch.equal(ps[4], plain[4])
    assert ps[0] == min(max_steps, 16 * trainer.get("max_epochs", 99))
