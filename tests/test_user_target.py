"""A user's own model, data and loss through the CLI and the Python API.

A project of the user's — ``byo_user.py`` beside its ``conf/`` folder, imported because psbench puts the folder
above ``--config-dir`` on ``sys.path`` (the commands run from another directory) — gives ``_target_`` models, data
sets (datasets and a LightningDataModule) and losses; every bad one is one line naming its key, exit 2, no MLflow
run, and the same :class:`~psbench.errors.ConfigError` from :func:`psbench.train.train`. A ``_target_`` naming a
built-in class is the built-in model, weight for weight; regression (float targets) trains in every engine and
execution path and its test loss falls; a dist replay of a user's model reaches the simulator's weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from psbench.errors import ConfigError

USER_MODULE = '''
import torch
import torch.nn.functional as F
import pytorch_lightning as pl
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Tiny(nn.Module):
    def __init__(self, input_shape, num_classes, width=16):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(input_shape).prod()), width), nn.ReLU(),
                                 nn.Linear(width, num_classes))

    def forward(self, x):
        return self.net(x)


class Regressor(nn.Module):
    def __init__(self, input_shape, output_size, width=16):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(input_shape).prod()), width), nn.Tanh(),
                                 nn.Linear(width, output_size))

    def forward(self, x):
        return self.net(x)


class ThreeOutputs(nn.Module):
    def __init__(self, input_shape):
        super().__init__()
        self.fc = nn.Linear(int(torch.tensor(input_shape).prod()), 3)

    def forward(self, x):
        return self.fc(x.flatten(1))


def not_a_network(input_shape):
    return "a string"


def blobs(num_train=96, num_test=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(4, 2, 3, 3, generator=g)

    def draw(n):
        y = torch.arange(n) % 4
        return TensorDataset(centres[y] + torch.randn(n, 2, 3, 3, generator=g), y)

    return draw(num_train), draw(num_test)


class BlobsModule(pl.LightningDataModule):
    """Train and validation loaders only: psbench tests on the validation set."""

    def setup(self, stage=None):
        self.train, self.val = blobs()

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=8, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val, batch_size=8)


def wave(num_train=128, num_test=64, targets=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, targets, generator=g)

    def draw(n):
        x = torch.rand(n, 6, generator=g) * 2 - 1
        y = torch.sin(2 * x) @ w
        return TensorDataset(x, y[:, 0] if targets == 1 else y)

    return draw(num_train), draw(num_test)


def not_datasets():
    return [1, 2, 3]


class Dicts(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"x": torch.zeros(3), "y": 1}


def dict_items():
    return Dicts(), Dicts()


class Ragged(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return torch.zeros(4 if i < 3 else 5), i % 2


def ragged():
    return Ragged(), Ragged()


def scalar_loss(out, y):
    return F.mse_loss(out, y)


def absolute(out, y):  # float targets: psbench gives the outputs in the targets' shape
    return (out - y).abs()
'''

CONF = {
    "model/tiny.yaml": "_target_: byo_user.Tiny\nname: tiny\n",
    "model/regressor.yaml": "_target_: byo_user.Regressor\nname: regressor\nwidth: 16\nloss: mse\n",
    "dataset/blobs.yaml": "_target_: byo_user.blobs\nname: blobs\n",
    "dataset/wave.yaml": "_target_: byo_user.wave\nname: wave\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's project: ``byo_user.py`` and its ``conf/`` (model, dataset groups)."""
    root = tmp_path_factory.mktemp("project")
    (root / "byo_user.py").write_text(USER_MODULE)
    for name, text in CONF.items():
        (root / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "conf" / name).write_text(text)
    return root


@pytest.fixture
def user_cfg(compose_cfg, project, monkeypatch):
    """A resolved config (plain data, as the Python API takes it) whose groups may be the user project's nodes."""
    monkeypatch.syspath_prepend(str(project))

    def _cfg(*overrides: str, model: str | dict | None = None, dataset: str | dict | None = None) -> dict:
        cfg = OmegaConf.to_container(
            compose_cfg("logger=none", "trainer.progress=none", "trainer.num_threads=1", *overrides), resolve=True
        )
        for group, node in (("model", model), ("dataset", dataset)):
            if isinstance(node, str):
                node = OmegaConf.to_container(OmegaConf.load(project / "conf" / group / f"{node}.yaml"))
            if node is not None:
                cfg[group] = node
        return cfg

    return _cfg


def _train(cfg: dict, tmp_path: Path) -> dict:
    from psbench.train import train
    from psbench.validate import validate

    validate(cfg)
    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    return train(cfg, run)


# --------------------------------------------------------------------------- bad input: one line, the same error
# (groups chosen from the user's conf, overrides, the key named, words the line holds)
BAD = {
    "model_not_importable": (
        ("model=tiny", "dataset=blobs"),
        ("model._target_=byo_user.Nope",),
        "model._target_",
        ["an importable callable", "Nope"],
    ),
    "model_module_missing": (
        ("model=tiny", "dataset=blobs"),
        ("model._target_=no_such_module.Net",),
        "model._target_",
        ["No module named 'no_such_module'"],
    ),
    "model_not_a_module": (
        ("model=tiny", "dataset=blobs"),
        ("model._target_=byo_user.not_a_network",),
        "model._target_",
        ["returning a torch.nn.Module (it returned str)"],
    ),
    "model_output_does_not_fit": (
        ("model=tiny", "dataset=blobs"),
        ("model._target_=byo_user.ThreeOutputs",),
        "model._target_",
        ["[4, 4] class scores", "it returned [4, 3]"],
    ),
    "model_wrong_keys": (
        ("model=tiny", "dataset=blobs"),
        ("+model.depth=3",),
        "model._target_",
        ["unexpected keyword argument 'depth'"],
    ),
    "data_not_importable": (
        ("model=tiny", "dataset=blobs"),
        ("dataset._target_=byo_user.nope",),
        "dataset._target_",
        ["an importable callable"],
    ),
    "data_not_datasets": (
        ("model=tiny", "dataset=blobs"),
        ("dataset._target_=byo_user.not_datasets",),
        "dataset._target_",
        ["(train, test)", "it returned list of 3"],
    ),
    "data_items_not_pairs": (
        ("model=tiny", "dataset=blobs"),
        ("dataset._target_=byo_user.dict_items",),
        "dataset._target_",
        ["train item 0 is a dict, not an (x, y) pair"],
    ),
    "data_shapes_differ": (
        ("model=tiny", "dataset=blobs"),
        ("dataset._target_=byo_user.ragged",),
        "dataset._target_",
        ["train item 3 has x of shape [5]", "the same shape"],
    ),
    "loss_not_per_sample": (
        ("model=regressor", "dataset=wave"),
        ("model.loss=byo_user.scalar_loss",),
        "model.loss",
        ["one value per sample [4]", "reduction='none'"],
    ),
    "loss_for_another_task": (
        ("model=tiny", "dataset=blobs"),
        ("+model.loss=mse",),
        "model.loss",
        ["a loss for integer class labels"],
    ),
}
#: what the command is run for (each one subprocess): one per kind of bad input; the Python API takes every case
CLI = (
    "model_not_importable",
    "model_not_a_module",
    "model_output_does_not_fit",
    "data_not_importable",
    "data_not_datasets",
    "data_items_not_pairs",
    "data_shapes_differ",
    "loss_not_per_sample",
)


def _override(cfg: dict, override: str) -> None:
    """Apply ``key=value`` / ``+key=value`` to a plain config (the API test's overrides)."""
    key, _, value = override.lstrip("+").partition("=")
    group, _, rest = key.partition(".")
    cfg[group][rest] = value if not value.lstrip("-").isdigit() else int(value)


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_target_is_a_config_error_from_the_python_api(user_cfg, tmp_path, case):
    groups, overrides, key, words = BAD[case]
    cfg = user_cfg(model=groups[0].split("=")[1], dataset=groups[1].split("=")[1])
    for o in overrides:
        _override(cfg, o)
    with pytest.raises(ConfigError) as err:
        _train(cfg, tmp_path)
    assert err.value.key == key, str(err.value)
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("case", CLI)
def test_a_bad_target_is_one_line_and_no_mlflow_run(run_psbench, mlflow_runs, psbench_root, project, case):
    groups, overrides, key, words = BAD[case]
    proc = run_psbench(
        "--config-dir",
        str(project / "conf"),
        *groups,
        *overrides,
        "trainer.progress=none",
        "learners=2",
        "batch_size=4",
        root=psbench_root,
        timeout=300,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[-1].startswith(f"psbench: error: {key}="), proc.stderr[-3000:]
    assert [ln for ln in lines if ln.startswith("psbench: error:")] == [lines[-1]]
    assert "is invalid: allowed" in lines[-1] and "Traceback" not in proc.stderr
    for w in words:
        assert w in lines[-1], (w, lines[-1])
    assert mlflow_runs(psbench_root) == []


def test_the_schema_takes_a_targets_keys_and_checks_psbenchs(user_cfg):
    """A ``_target_`` node's keys are its target's (any name passes); psbench's own keys are checked."""
    from psbench.validate import validate

    validate(
        user_cfg(
            model={"_target_": "byo_user.Tiny", "width": 8, "anything": [1, 2]},
            dataset={"_target_": "byo_user.blobs", "num_train": 40, "subset": 20},
        )
    )
    for model, key in (
        ({"_target_": "byo_user.Tiny", "loss": 5}, "model.loss"),
        ({"_target_": "not a path"}, "model._target_"),
        ({"_target_": "byo_user.Tiny", "name": ""}, "model.name"),
    ):
        with pytest.raises(ConfigError) as err:
            validate(user_cfg(model=model))
        assert err.value.key == key
    with pytest.raises(ConfigError) as err:
        validate(user_cfg(dataset={"_target_": "byo_user.blobs", "subset": 0}))
    assert err.value.key == "dataset.subset"


def test_an_override_of_a_key_the_file_lacks_says_how_to_give_it():
    """``model._target_=…`` on a built-in: a model of one's own is a node of its own; ``model.loss=…``: an optional
    key every model takes, added with ``+``."""
    from psbench.validate import unknown_override

    err = unknown_override("model._target_", "torch.nn.Linear")
    assert err.key == "model._target_" and "--config-dir ./conf model=mine" in err.allowed
    err = unknown_override("model.loss", "mse")
    assert err.key == "model.loss" and err.allowed.startswith("+model.loss=mse (an optional key")


# --------------------------------------------------------------------------- models by _target_
def test_a_target_naming_a_builtin_class_is_the_builtin_model(user_cfg, tmp_path):
    """``_target_: psbench.models.MLP`` (input_shape, num_classes passed by signature) trains to the weights of
    ``model=mlp``; ``psbench.models.CifarCNN`` builds the ``cifar_cnn`` network, seed for seed."""
    from psbench.models import build_model
    from psbench.models.net import build_net

    common = ("trainer.max_updates=6", "learners=2", "batch_size=8", "epochs=1")
    builtin = _train(user_cfg(*common, "model.hidden=[24]"), tmp_path / "a")
    target = _train(user_cfg(*common, model={"_target_": "psbench.models.MLP", "hidden": [24]}), tmp_path / "b")
    assert target["weights_sha256"] == builtin["weights_sha256"]
    assert target["test_error"] == builtin["test_error"] and target["updates_done"] == 6

    torch.manual_seed(3)
    a = build_model("cifar_cnn", (3, 32, 32), 10, init="caffe")
    torch.manual_seed(3)
    b = build_net({"_target_": "psbench.models.CifarCNN", "init": "caffe", "name": "cnn"}, (3, 32, 32), 10)
    assert type(a) is type(b) and a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_a_user_model_and_data_train_and_name_the_run(user_cfg, tmp_path):
    from psbench.tracking.run_info import run_name, run_tags

    cfg = user_cfg("learners=2", "batch_size=8", "epochs=2", "optimizer.lr=0.05", model="tiny", dataset="blobs")
    s = _train(cfg, tmp_path)
    assert s["status"] == "finished" and s["test_error"] < 0.5  # 4 separated blobs: well below chance (0.75)
    assert run_tags(cfg)["model"] == "tiny" and run_tags(cfg)["dataset"] == "blobs"
    assert "tiny-blobs" in run_name(cfg)
    cfg["model"].pop("name")
    assert run_tags(cfg)["model"] == "Tiny"  # a nameless target is named by its callable


def test_a_lightning_datamodule_gives_its_train_and_validation_sets(user_cfg, project):
    """A LightningDataModule with no test loader: its validation set is the test set, read as it serves it."""
    import byo_user  # the project is on sys.path (user_cfg)

    from psbench.data.target import load_target

    split = load_target({"_target_": "byo_user.BlobsModule"}, seed=0, data_dir=".")
    train, test = byo_user.blobs()
    assert split.num_classes == 4 and split.x_train.dtype == np.float32 and split.y_train.dtype == np.int64
    assert np.array_equal(split.x_train, train.tensors[0].numpy()) and np.array_equal(split.y_test, test.tensors[1])
    assert np.array_equal(split.x_test, test.tensors[0].numpy())


# --------------------------------------------------------------------------- regression
def _npz(path: Path, k: int) -> Path:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, k))
    x = rng.standard_normal((300, 5)).astype(np.float32)
    xt = rng.standard_normal((100, 5)).astype(np.float32)
    y, yt = (x @ w).astype(np.float32), (xt @ w).astype(np.float32)
    np.savez(path, x_train=x, y_train=y[:, 0] if k == 1 else y, x_test=xt, y_test=yt[:, 0] if k == 1 else yt)
    return path


@pytest.mark.parametrize(
    "k,how",
    [
        (1, ("protocol=hardsync",)),
        (2, ("protocol=async", "trainer.batching=vmap")),  # stacked snapshots: targets [R, s, k]
        (2, ("protocol=softsync", "protocol.n=1", "trainer.batching=grouped")),
        (2, ("protocol=agn", "protocol.local_steps=2")),  # local steps: targets [H, k, μ, 2]
    ],
)
def test_regression_on_arrays_trains_and_its_test_loss_falls(user_cfg, tmp_path, k, how):
    """Float targets ([N] or [N, k]) are a regression: mse by default, the test loss falls from the initial
    network's, no test error; every execution path runs it."""
    from psbench.assemble import build_run
    from psbench.models.evaluate import evaluate

    cfg = user_cfg(
        "dataset=arrays",
        f"dataset.path={_npz(tmp_path / 'reg.npz', k)}",
        "model.hidden=[32]",
        "learners=4",
        "batch_size=8",
        "epochs=3",
        "optimizer.lr=0.05",
        "optimizer.momentum=0.5",
        *how,
    )
    setup = build_run(cfg)
    assert setup.data.task == "regression" and setup.loss.name == "mse" and not setup.loss.classes
    before = evaluate(setup.net, setup.data.x_test, setup.data.y_test, loss=setup.loss)
    assert before[0] is None
    s = _train(cfg, tmp_path)
    assert s["status"] == "finished" and s["test_error"] is None
    assert s["test_loss"] < 0.5 * before[1], (s["test_loss"], before[1])


def test_a_users_per_sample_loss_and_a_target_loss_train(user_cfg, tmp_path):
    """``model.loss`` as a dotted path to a function and as a node with ``_target_`` (torch's HuberLoss, given the
    outputs [B, 1] in the targets' shape [B]: one loss per sample, not a [B, B] broadcast)."""
    from psbench.models.loss import build_loss

    huber = build_loss({"_target_": "torch.nn.HuberLoss", "reduction": "none", "delta": 0.5}, "regression")
    out, y = torch.randn(6, 1), torch.randn(6)
    assert torch.equal(huber(out, y), torch.nn.functional.huber_loss(out[:, 0], y, reduction="none", delta=0.5))
    path = ("model.loss=byo_user.absolute",)
    for loss in (path, ()):
        cfg = user_cfg("learners=2", "batch_size=8", "epochs=2", model="regressor", dataset="wave")
        if loss:
            _override(cfg, loss[0])
        else:
            cfg["model"]["loss"] = {"_target_": "torch.nn.HuberLoss", "reduction": "none", "delta": 0.5}
        s = _train(cfg, tmp_path / str(len(loss)))
        assert s["status"] == "finished" and s["test_error"] is None and s["test_loss"] > 0


def test_dist_replay_of_a_users_regression_reaches_the_simulators_weights(run_psbench, psbench_root, project):
    """The learner processes build the user's network from its ``_target_`` (imported from the PS's sys.path) and
    differentiate its loss (l1): the replay's weights are the simulator's, bit for bit."""
    common = (
        "--config-dir",
        str(project / "conf"),
        "model=regressor",
        "dataset=wave",
        "model.loss=l1",
        "learners=3",
        "batch_size=4",
        "epochs=1",
        "trainer.max_updates=8",
        "trainer.num_threads=1",
        "trainer.batching=loop",
        "protocol=async",
        "logger=none",
        "trainer.progress=none",
    )
    out = {}
    for engine in ("sim", "dist"):
        d = psbench_root / engine
        extra = ("engine=dist", "engine.mode=replay") if engine == "dist" else ()
        proc = run_psbench(*common, *extra, f"hydra.run.dir={d}", root=psbench_root, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[engine] = json.loads((d / "summary.json").read_text())
    assert out["dist"]["schedule_sha256"] == out["sim"]["schedule_sha256"]
    assert out["dist"]["weights_sha256"] == out["sim"]["weights_sha256"]
    assert out["dist"]["test_error"] is None and out["dist"]["test_loss"] == pytest.approx(out["sim"]["test_loss"])
