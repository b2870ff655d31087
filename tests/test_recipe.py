"""The cifar10_full recipe of Rudra §4.2 / Zhang §4.1 against Caffe's published files, and the data layers.

Reference values, copied from BVLC/caffe ``examples/cifar10/cifar10_full_train_test.prototxt`` and
``cifar10_full_solver.prototxt`` (and its ``_lr1``/``_lr2`` continuations):

* data layer: ``transform_param { mean_file: "examples/cifar10/mean.binaryproto" }`` — no ``scale``;
* conv1 32@5×5 pad 2, gaussian std 0.0001, params ``lr_mult: 1`` / ``lr_mult: 2``; pool1 MAX 3/2; relu1;
  norm1 LRN ``local_size: 3 alpha: 5e-05 beta: 0.75 norm_region: WITHIN_CHANNEL``;
* conv2 32@5×5, std 0.01, ``lr_mult`` 1 / 2; relu2; pool2 AVE 3/2; norm2 as norm1;
* conv3 64@5×5, std 0.01, no ``param`` blocks (lr_mult = decay_mult = 1); relu3; pool3 AVE 3/2;
* ip1 10 outputs, std 0.01, params ``{lr_mult: 1 decay_mult: 250}`` / ``{lr_mult: 2 decay_mult: 0}``;
  every ``bias_filler`` is ``constant`` (0);
* solver: ``base_lr: 0.001 momentum: 0.9 weight_decay: 0.004``, 60,000 iterations of 100 (120 epochs),
  then ÷10 for 5,000 (``_lr1``), ÷10 again (``_lr2``): the papers' "÷10 after epochs 120 and 130, 140 epochs".
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from data_files import REAL_DATA, needs_real, write_cifar_subset
from psbench.data import build_datamodule, sources
from psbench.data.checksum import KNOWN_MD5, md5_file
from psbench.data.preprocess import ArraySplit, preprocess
from psbench.errors import ConfigError
from psbench.models import build_model
from psbench.models.cifar_cnn import CAFFE_MULT, CAFFE_STD
from psbench.models.layers import WithinChannelLRN
from psbench.optimizer.build import configure, param_groups, scale_weight_decay

CONF = Path(__file__).resolve().parents[1] / "src" / "psbench" / "conf" / "experiment"
#: prototxt values (module docstring): filler std and (lr_mult, decay_mult) of weight and bias per layer
PROTOTXT = {
    "features.conv1": (1e-4, (1, 1), (2, 1)),
    "features.conv2": (1e-2, (1, 1), (2, 1)),
    "features.conv3": (1e-2, (1, 1), (1, 1)),
    "fc": (1e-2, (1, 250), (2, 0)),
}
SOLVER = {"lr": 0.001, "momentum": 0.9, "weight_decay": 0.004, "milestones": [120, 130], "gamma": 0.1}


def _recipe_net(seed: int = 0, **kw) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("cifar_cnn", (3, 32, 32), 10, **{"lrn": True, "init": "caffe", "multipliers": "caffe", **kw})


# --- the data layer ---------------------------------------------------------------------------------------


@pytest.fixture
def tiny_cifar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, np.ndarray]]:
    arrays = write_cifar_subset(tmp_path, n_train=20, n_test=10, seed=5)
    key = f"{sources.CIFAR10_SUBSET_DIR}/{sources.CIFAR10_SUBSET_FILE}"
    monkeypatch.setitem(KNOWN_MD5, key, md5_file(tmp_path / key))
    return tmp_path, arrays


def test_caffe_mean_layer_subtracts_the_train_mean_from_raw_pixels_without_scaling(tiny_cifar) -> None:
    root, arrays = tiny_cifar
    dm = build_datamodule("cifar10_subset", root, preprocess="mean")
    dm.setup()
    raw_train = torch.from_numpy(arrays["x_train"]).double()
    mean = raw_train.mean(0)  # Caffe's compute_image_mean over the training set: per pixel and channel
    assert torch.allclose(dm.pixel_mean.double(), mean, atol=1e-4)
    assert torch.allclose(dm.x_train.double(), raw_train - mean, atol=1e-4)
    assert torch.allclose(dm.x_test.double(), torch.from_numpy(arrays["x_test"]).double() - mean, atol=1e-4)
    assert dm.x_train.abs().max() > 100  # the 0–255 scale: 255× the [0, 1] default's inputs
    unit = build_datamodule("cifar10_subset", root)  # the default data layer, unchanged
    unit.setup()
    assert torch.allclose(unit.x_train * 255, dm.x_train, atol=1e-3)


def test_the_mean_of_raw_integer_pixels_is_the_float64_mean_bit_for_bit() -> None:
    """``preprocess=mean`` sums the uint8 pixels as int64 (exact) instead of reducing float32 pixels in float64:
    the same float32 mean, bit for bit, on pixels whose float32 running sum would round (4,097 images of 255s)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(4097, 3, 4, 4), dtype=np.uint8)
    x[:, 0] = 255
    got = preprocess(_split(x, x[:3], scale=None), "mean").pixel_mean
    want = torch.from_numpy(x.astype(np.float32)).mean(dim=0, dtype=torch.float64).to(torch.float32)
    assert torch.equal(got, want)


def _split(x_train: np.ndarray, x_test: np.ndarray, scale: float | None = 255.0) -> ArraySplit:
    return ArraySplit(x_train, np.zeros(len(x_train), np.int64), x_test, np.zeros(len(x_test), np.int64), scale)


def test_default_layer_is_bit_identical_to_the_old_scale_then_centre() -> None:
    rng = np.random.default_rng(0)
    x, xt = rng.integers(0, 256, (7, 3, 4, 4), dtype=np.uint8), rng.integers(0, 256, (3, 3, 4, 4), dtype=np.uint8)
    t = preprocess(_split(x, xt))
    old = torch.from_numpy(x.astype(np.float32)).mul_(1.0 / 255.0)
    mean = old.mean(dim=0, dtype=torch.float64).to(torch.float32)
    assert torch.equal(t.x_train, old - mean)
    assert torch.equal(t.x_test, torch.from_numpy(xt.astype(np.float32)).mul_(1.0 / 255.0) - mean)


def test_the_other_papers_data_layers() -> None:
    """TernGrad LeNet: x/255·2−1; TernGrad CifarNet: TF per_image_standardization; dist-keras (AGN): x/250."""
    rng = np.random.default_rng(1)
    x, xt = rng.integers(0, 256, (5, 1, 6, 6), dtype=np.uint8), rng.integers(0, 256, (2, 1, 6, 6), dtype=np.uint8)
    xf = x.astype(np.float64)
    sym = preprocess(_split(x, xt), "symmetric")
    assert np.allclose(sym.x_train.numpy(), xf / 255 * 2 - 1, atol=1e-6) and sym.x_train.min() >= -1
    assert not sym.pixel_mean.any()
    per = preprocess(_split(x, xt), "per_image").x_train.numpy().reshape(5, -1)
    u = xf.reshape(5, -1) / 255
    want = (u - u.mean(1, keepdims=True)) / np.maximum(u.std(1, keepdims=True), 1 / math.sqrt(u.shape[1]))
    assert np.allclose(per, want, atol=1e-5)
    assert np.allclose(preprocess(_split(x, xt), "minmax250").x_train.numpy(), xf / 250, atol=1e-6)
    flat = np.zeros((2, 1, 6, 6), np.uint8)  # a constant image: std 0, the 1/√N floor keeps it finite
    assert torch.isfinite(preprocess(_split(flat, flat), "per_image").x_train).all()
    with pytest.raises(ConfigError, match=r"dataset\.preprocess"):
        preprocess(_split(x, xt), "scale")


# --- the network ------------------------------------------------------------------------------------------


def test_caffe_fillers_measured_on_a_built_model() -> None:
    net = _recipe_net(seed=3)
    params = dict(net.named_parameters())
    for layer, (std, _, _) in PROTOTXT.items():
        w = params[f"{layer}.weight"].detach()
        assert w.std().item() == pytest.approx(std, rel=0.06), layer  # ≥ 640 draws each: 3 SE < 6 %
        assert abs(w.mean().item()) < 4 * std / math.sqrt(w.numel()), layer
        assert not params[f"{layer}.bias"].detach().any(), layer  # constant filler, value 0
    assert CAFFE_STD == {"conv1": 1e-4, "conv2": 1e-2, "conv3": 1e-2, "fc": 1e-2}


def test_layer_order_and_lrn_parameters_are_the_prototxts() -> None:
    net = _recipe_net()
    names = [n for n, _ in net.features.named_children()]
    assert names == ["conv1", "pool1", "relu1", "norm1", "conv2", "relu2", "pool2", "norm2", "conv3", "relu3", "pool3"]
    assert isinstance(net.features.pool1, torch.nn.MaxPool2d) and isinstance(net.features.pool2, torch.nn.AvgPool2d)
    for norm in (net.features.norm1, net.features.norm2):
        assert isinstance(norm, WithinChannelLRN)
        assert (norm.local_size, norm.alpha, norm.beta) == (3, 5e-05, 0.75)
    assert sum(p.numel() for p in net.parameters()) == 89578  # "~90 K" (Rudra §4.2)


def test_within_channel_lrn_is_caffes_formula() -> None:
    """Caffe WITHIN_CHANNEL: x / (1 + α/n · Σ_{k×k window} x²)^β, n = k², zero padding counted."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64) * 40
    lrn = WithinChannelLRN(3, 5e-05, 0.75)
    got = lrn(x)
    pad = torch.nn.functional.pad(x, (1, 1, 1, 1))
    want = torch.empty_like(x)
    for c in range(2):
        for i in range(5):
            for j in range(5):
                s = (pad[0, c, i : i + 3, j : j + 3] ** 2).sum()
                want[0, c, i, j] = x[0, c, i, j] / (1 + 5e-05 / 9 * s) ** 0.75
    assert torch.allclose(got, want, rtol=1e-12)


# --- the solver: lr and decay multipliers ------------------------------------------------------------------


def test_param_groups_carry_the_prototxts_lr_and_decay_multipliers() -> None:
    net = _recipe_net()
    opt, sched = configure(param_groups(net), {"name": "sgd", **SOLVER}, updates_per_epoch=10)
    by_param = {id(p): g for g in opt.param_groups for p in g["params"]}
    for name, p in net.named_parameters():
        layer, kind = name.rsplit(".", 1)
        lr_mult, decay_mult = PROTOTXT[layer][1 if kind == "weight" else 2]
        g = by_param[id(p)]
        assert (g["lr"], g["weight_decay"]) == pytest.approx((0.001 * lr_mult, 0.004 * decay_mult)), name
        assert g["momentum"] == 0.9
    assert opt.param_groups[0]["params"][0] is net.features.conv1.weight  # the reported lr is the base lr
    for _ in range(120 * 10):  # past the first milestone: every group ÷10, the ratios kept
        opt.step()
        sched.step()
    assert by_param[id(net.fc.bias)]["lr"] == pytest.approx(2 * 0.0001)
    assert by_param[id(net.fc.weight)]["lr"] == pytest.approx(0.0001)
    assert set(CAFFE_MULT) < {n for n, _ in net.named_parameters()}


def test_two_sgd_steps_follow_caffes_update_rule() -> None:
    """Caffe SGDSolver: v ← m·v + lr·lr_mult·(g + wd·decay_mult·w); w ← w − v (constant lr)."""
    net = _recipe_net(seed=1)
    opt, _ = configure(param_groups(net), {"name": "sgd", **SOLVER, "milestones": []}, updates_per_epoch=1)
    w = {n: p.detach().clone().double() for n, p in net.named_parameters()}
    v = {n: torch.zeros_like(t) for n, t in w.items()}
    torch.manual_seed(2)
    for _ in range(2):
        grads = {n: torch.randn_like(p) for n, p in net.named_parameters()}
        for n, p in net.named_parameters():
            p.grad = grads[n].clone()
            layer, kind = n.rsplit(".", 1)
            lm, dm = PROTOTXT[layer][1 if kind == "weight" else 2]
            v[n] = 0.9 * v[n] + 0.001 * lm * (grads[n].double() + 0.004 * dm * w[n])
            w[n] = w[n] - v[n]
        opt.step()
    for n, p in net.named_parameters():
        assert torch.allclose(p.detach().double(), w[n], rtol=1e-5, atol=1e-9), n


def test_without_multipliers_the_optimizer_is_todays() -> None:
    """No multipliers: one group, the same trajectory as ``torch.optim.SGD(net.parameters())``."""
    torch.manual_seed(0)
    a = build_model("cifar_cnn", (3, 32, 32), 10)
    b = build_model("cifar_cnn", (3, 32, 32), 10)
    b.load_state_dict(a.state_dict())
    assert isinstance(param_groups(a), list) and not isinstance(param_groups(a)[0], dict)
    opt_a, _ = configure(param_groups(a), {"name": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 0.004}, 1)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.01, momentum=0.9, weight_decay=0.004)
    assert len(opt_a.param_groups) == 1
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    for net, opt in ((a, opt_a), (b, opt_b)):
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_the_step_runs_fused_on_a_gpu_and_foreach_on_the_cpu(monkeypatch, name) -> None:
    """SGD and Adam on a :data:`FUSED_DEVICES` device step ``fused`` (one kernel per group and step on a GPU), on the
    CPU as before (SGD ``foreach``: the CPU's weights bit for bit); the fused step gives the same weights to float
    tolerance. The GPU's branch is driven on the CPU by naming the CPU a fused device."""
    from psbench.optimizer import build

    torch.manual_seed(0)
    net = _recipe_net()
    cfg = {"name": name, "lr": 0.01, "momentum": 0.9, "weight_decay": 0.004}
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    start = {k: v.clone() for k, v in net.state_dict().items()}

    def trained() -> tuple[torch.optim.Optimizer, list[torch.Tensor]]:
        net.load_state_dict(start)
        opt = build.build_optimizer(param_groups(net), cfg)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
        return opt, [p.detach().clone() for p in net.parameters()]

    cpu, want = trained()
    assert not cpu.defaults.get("fused") and cpu.defaults["foreach"] is (True if name == "sgd" else None)
    monkeypatch.setattr(build, "FUSED_DEVICES", ("cpu",))
    fused, got = trained()
    assert fused.defaults["fused"] is True and not fused.defaults["foreach"]
    # Adam divides by √v + ε: where a gradient component is near ε, the last bits by which the fused and foreach
    # kernels differ grow to a small fraction of lr (7.1e-7 after 3 steps at lr 0.01 on an AMD EPYC VM, 2026-11-29)
    atol = 1e-7 if name == "sgd" else 1e-3 * cfg["lr"]
    assert all(torch.allclose(a, b, rtol=1e-5, atol=atol) for a, b in zip(got, want, strict=True))
    assert not build._fused([torch.zeros(2, dtype=torch.int64)])  # only floating-point weights


def test_multipliers_must_name_the_models_parameters() -> None:
    net = _recipe_net()
    net.param_mult = {"fc.weights": (1.0, 250.0)}
    with pytest.raises(ConfigError, match=r"model\.multipliers"):
        param_groups(net)
    with pytest.raises(ConfigError, match=r"model\.multipliers"):
        build_model("cifar_cnn", (3, 32, 32), 10, multipliers="cuda-convnet")


def test_the_lr_policy_scales_the_updates_weight_decay_like_caffes_lr() -> None:
    """α = α0·w multiplies g + wd·θ in Caffe's solver: the decay of an update is wd·decay_mult·w̄."""
    net = _recipe_net()
    opt, _ = configure(param_groups(net), {"name": "sgd", **SOLVER}, 1)
    for factor in (1 / 30, 0.5, 1.0):  # repeated calls do not compound
        scale_weight_decay(opt, factor)
        decays = sorted({g["weight_decay"] for g in opt.param_groups})
        assert decays == pytest.approx([0.0, 0.004 * factor, 1.0 * factor])  # ip1 bias 0, others 1, ip1 250
    plain = torch.optim.SGD(build_model("mlp", (1, 8, 8), 10).parameters(), lr=0.1)
    scale_weight_decay(plain, 0.5)
    assert plain.param_groups[0]["weight_decay"] == 0  # no decay configured: untouched


@pytest.mark.slow
def test_both_engines_apply_the_recipes_groups_and_scaled_decay_bit_for_bit(compose_cfg, run_psbench, tmp_path):
    """engine=dist (replay) and the simulator: cifar10_full multipliers, decay 0.004 scaled by α0/τ (Zhang Eq 3)."""
    from test_dist_engine import _replay_against_sim

    sim, dist = _replay_against_sim(
        compose_cfg,
        run_psbench,
        tmp_path,
        "model=cifar_cnn",
        "model.init=caffe",
        "model.multipliers=caffe",
        "dataset=synthetic",
        "dataset.shape=[3,32,32]",
        "dataset.num_train=48",
        "dataset.num_test=8",
        "dataset.preprocess=mean",
        "learners=3",
        "batch_size=4",
        "epochs=1",
        "trainer.max_updates=9",
        "protocol=softsync",
        "protocol.n=3",
        "lr_policy=per_gradient",
        "optimizer.lr=0.01",
        "optimizer.weight_decay=0.004",
        "trainer.num_threads=1",
        "trainer.batching=loop",
        "logger=none",
    )
    assert sim["ps_updates"] == 9 and dist["weights_sha256"] == sim["weights_sha256"]


# --- the presets ---------------------------------------------------------------------------------------------


def _presets(*papers: str) -> list[str]:
    return [f"{paper}/{f.stem}" for paper in papers for f in sorted((CONF / paper).glob("*.yaml"))]


def test_every_rudra_and_zhang_cifar_preset_uses_the_recipe(compose_cfg, compose_preset) -> None:
    checked = []
    for preset in _presets("rudra", "zhang"):
        if compose_cfg(f"experiment={preset}").dataset.name == "imagenet":  # AlexNet; tests/test_imagenet.py
            continue
        cfg = compose_preset(preset)
        if cfg.model.name != "cifar_cnn":
            continue
        checked.append(preset)
        if preset == "zhang/fig2":  # schedule-only speed-ups whose ImageNet rows switch to an MLP
            assert cfg.schedule_only
            continue
        m = OmegaConf.to_container(cfg.model)
        assert (m["lrn"], m["init"], m["multipliers"]) == (True, "caffe", "caffe"), preset
        assert cfg.dataset.preprocess == "mean", preset
        if not cfg.schedule_only:
            o = cfg.optimizer
            got = {
                "lr": o.lr,
                "momentum": o.momentum,
                "weight_decay": o.weight_decay,
                "milestones": list(o.milestones),
                "gamma": o.gamma,
            }
            assert got == SOLVER, preset
    assert {"rudra/fig5", "rudra/fig5_4softsync", "rudra/fig6_7", "rudra/table2", "rudra/table3", "zhang/fig3"} <= set(
        checked
    )


@pytest.mark.parametrize(
    ("preset", "layer"),
    [
        ("terngrad/fig3", "symmetric"),
        ("terngrad/table1", "per_image"),
        ("agn/table1", "minmax250"),
        ("agn/table1_ci", "minmax250"),
        ("agn/fig7a", "minmax250"),
        ("ssp/fig2_4", "unit_mean"),
    ],
)
def test_the_other_papers_presets_use_their_codes_data_layer(compose_preset, preset: str, layer: str) -> None:
    assert compose_preset(preset).dataset.preprocess == layer


def test_the_plain_model_option_keeps_todays_defaults(compose_cfg) -> None:
    cfg = compose_cfg("model=cifar_cnn", "dataset=cifar10_subset")
    assert (cfg.model.lrn, cfg.model.init, cfg.model.multipliers) == (False, "torch", None)
    assert cfg.dataset.preprocess == "unit_mean" and cfg.optimizer.weight_decay == 0.0


# --- the published reference (real data, slow) -------------------------------------------------------------


@pytest.mark.slow
@needs_real("CIFAR-10 subset", f"{sources.CIFAR10_SUBSET_DIR}/{sources.CIFAR10_SUBSET_FILE}")
def test_single_learner_cifar10_full_learns_on_the_subset(run_psbench, psbench_root) -> None:
    """One learner, the recipe, the papers' α0 = 0.001 on cifar10_subset (5,085 of CIFAR-10's 50,000 images).

    Published reference: Rudra §4.2's baseline (σ, μ, λ) = (0, 128, 1) reaches 17.9 % test error after
    140 epochs of the full training set (Zhang §4.3.1: "~18 %"); Caffe's example states no accuracy for
    cifar10_full. Neither the data (10 % of it) nor the budget (140 epochs) exists here, so this test does
    NOT match that number; it checks what the subset allows. After 6 epochs of μ = 128 (240 updates) the
    recipe must be at most 70 % test error (chance: 90 %; measured here 63.8 %), and the pre-recipe setting
    at the same α0 — inputs in [0, 1], torch init, no LRN/multipliers/decay — must still be within 5 points
    of chance (measured here 90.9 %): the 255× input scale is what made α0 = 0.001 a different step.
    """
    common = [
        "learners=1",
        "batch_size=128",
        "epochs=6",
        "dataset=cifar10_subset",
        "model=cifar_cnn",
        "optimizer.lr=0.001",
        "optimizer.momentum=0.9",
        "trainer.progress=plain",
        "logger=none",
        "trainer.num_threads=1",
    ]
    recipe = [
        "model.lrn=true",
        "model.init=caffe",
        "model.multipliers=caffe",
        "dataset.preprocess=mean",
        "optimizer.weight_decay=0.004",
    ]
    errors = {}
    for label, extra in (("recipe", recipe), ("unit", [])):
        out = psbench_root / label
        proc = run_psbench(
            *common, *extra, f"paths.data_dir={REAL_DATA}", f"hydra.run.dir={out}", root=psbench_root, timeout=1800
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        errors[label] = json.loads((out / "summary.json").read_text())["test_error"]
    assert errors["recipe"] <= 0.70, errors
    assert errors["unit"] >= 0.85, errors


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_a_loaded_optimizer_state_keeps_the_devices_own_step(monkeypatch, name) -> None:
    """:func:`load_optimizer_state` (what a resumed run loads): state written by the CPU's step loads into a
    :data:`FUSED_DEVICES` device's optimizer as fused, with Adam's step count where a fused step keeps it, and
    continues to the weights of a run that never stopped, to float tolerance; torch's ``load_state_dict`` would
    take the CPU's ``foreach``."""
    from psbench.optimizer import build

    torch.manual_seed(0)
    net = _recipe_net()
    cfg = {"name": name, "lr": 0.01, "momentum": 0.9, "weight_decay": 0.004}
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))

    def steps(opt: torch.optim.Optimizer, k: int) -> None:
        for _ in range(k):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

    cpu = build.build_optimizer(param_groups(net), cfg)
    steps(cpu, 2)
    state, mid = copy.deepcopy(cpu.state_dict()), {k: v.clone() for k, v in net.state_dict().items()}
    monkeypatch.setattr(build, "FUSED_DEVICES", ("cpu",))
    fused = build.build_optimizer(param_groups(net), cfg)
    build.load_optimizer_state(fused, state)
    assert all(g["fused"] is True and not g["foreach"] for g in fused.param_groups)
    if name == "adam":
        assert all(s["step"].item() == 2 for s in fused.state.values())
    steps(fused, 1)
    got = [p.detach().clone() for p in net.parameters()]
    net.load_state_dict(mid)
    steps(cpu, 1)
    for a, b in zip(got, net.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_state_of_another_number_of_groups_is_refused_as_torch_refuses_it() -> None:
    from psbench.optimizer import build

    two = build.build_optimizer(
        [{"params": [torch.nn.Parameter(torch.ones(2))]}, {"params": [torch.nn.Parameter(torch.ones(3))]}],
        {"name": "sgd", "lr": 0.1, "momentum": 0.9},
    )
    one = build.build_optimizer([torch.nn.Parameter(torch.ones(2))], {"name": "sgd", "lr": 0.1, "momentum": 0.9})
    with pytest.raises(ValueError, match="different number of parameter groups"):
        build.load_optimizer_state(one, two.state_dict())
