"""The papers' remaining models: parameter counts against the papers, forward passes,
TF/Caffe layer semantics, vmap compatibility, one harness training step, and refusing BatchNorm training.

Large models (AlexNet, GoogLeNet, VGG-A, the ImageNet-63K MLP) are counted on the ``meta`` device here;
their real forward passes are ``slow``.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from fit_updates import fit_updates
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.models import build_model, count_parameters, model_bytes, uses_batchnorm
from psbench.models.layers import TFSameMaxPool2d
from psbench.ps import Protocol, Schedule, Simulator
from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches
from psbench.strategy.lookahead import Lookahead

warnings.filterwarnings("ignore", ".*does not have many workers.*")


def meta(name: str, shape: tuple[int, ...], classes: int, **kw) -> nn.Module:
    with torch.device("meta"):
        return build_model(name, shape, classes, **kw)


def n_bn(model: nn.Module) -> int:
    return sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())


# --- parameter counts against the papers (meta device: no memory, no FLOPs) -----------------


def test_cifarnet_is_the_tf_tutorial_net_on_24x24_crops() -> None:
    """TernGrad §4.1: TF CIFAR-10 tutorial net on 24×24 crops: conv 4,864 + 102,464, local3 2304·384 + 384,
    local4 73,920, softmax 1,930. A 32×32 input is centre-cropped, so the count is the same."""
    for shape in [(3, 24, 24), (3, 32, 32)]:
        model = meta("cifarnet", shape, 10)
        assert count_parameters(model) == 1_068_298
        assert [tuple(p.shape) for p in model.parameters()][::2] == [
            (64, 3, 5, 5),
            (64, 64, 5, 5),
            (384, 2304),
            (192, 384),
            (10, 192),
        ]
    whole = meta("cifarnet", (3, 32, 32), 10, crop=None)  # 32 → 16 → 8: 8·8·64 fc inputs
    assert whole.classifier[0].in_features == 4096 and count_parameters(whole) == 1_756_426


def test_alexnet_matches_rudra_size_and_terngrad_last_layer_share() -> None:
    """Rudra §4.2: "~72 million trainable parameters ... 289 MB" on 256×256 images; Caffe AlexNet there
    (ceil pooling: pool5 7×7) has 74.6 M, 3.3 % above both figures. On 227×227 crops it is 60,965,224,
    and fc8 is "6.7% in AlexNet" (TernGrad §4.2)."""
    rudra = meta("alexnet", (3, 256, 256), 1000)
    n = count_parameters(rudra)
    assert n == 74_596_712
    assert rudra.classifier.fc6.in_features == 256 * 7 * 7
    assert abs(n - 72e6) / 72e6 < 0.05
    assert abs(model_bytes(rudra) - 289e6) / 289e6 < 0.05
    crop = meta("alexnet", (3, 227, 227), 1000)
    n227 = count_parameters(crop)
    assert n227 == 60_965_224 and crop.classifier.fc6.in_features == 256 * 6 * 6
    fc8 = sum(p.numel() for p in crop.classifier.fc8.parameters())
    assert round(100 * fc8 / n227, 1) == 6.7
    assert count_parameters(meta("alexnet", (3, 227, 227), 1000, groups=1)) == 62_378_344  # no 2-GPU grouping
    convs = [m for m in crop.features if isinstance(m, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size[0], c.stride[0], c.groups) for c in convs] == [
        (96, 11, 4, 1),
        (256, 5, 1, 2),
        (384, 3, 1, 1),
        (384, 3, 1, 2),
        (256, 3, 1, 2),
    ]


def test_alexnet_batchnorm_is_terngrads_variant() -> None:
    """TernGrad §4.2: BN on the convolutional layers; BN's β replaces the 1,376 conv biases (+2·1,376 γ, β)."""
    bn = meta("alexnet", (3, 227, 227), 1000, batchnorm=True)
    assert n_bn(bn) == 5 and count_parameters(bn) == 60_965_224 + 1376
    assert all(m.bias is None for m in bn.features if isinstance(m, nn.Conv2d))
    assert n_bn(meta("alexnet", (3, 227, 227), 1000)) == 0
    assert uses_batchnorm("alexnet", {"batchnorm": True}) and not uses_batchnorm("alexnet", {})


def test_googlenet_without_auxiliary_classifiers() -> None:
    """TernGrad §4.2: GoogLeNet with no auxiliary classifiers: 57 convolutions, one fc, 6,998,552 parameters."""
    model = meta("googlenet", (3, 224, 224), 1000)
    assert count_parameters(model) == 6_998_552
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 1
    assert sum(isinstance(m, nn.Conv2d) for m in model.modules()) == 57
    assert model.fc.in_features == 1024
    bn = meta("googlenet", (3, 224, 224), 1000, batchnorm=True)
    assert n_bn(bn) == 57 and count_parameters(bn) == 6_998_552 + 7280  # 7,280 conv channels: +γ, β −bias


def test_vgg_a_is_vgg11() -> None:
    """TernGrad §5 / Fig 5 VggNet-A: 8 conv 3×3 + 3 fc; 7·7·512 fc inputs on 224×224, 132,863,336 parameters."""
    model = meta("vgg_a", (3, 224, 224), 1000)
    assert count_parameters(model) == 132_863_336
    assert [m.out_channels for m in model.features if isinstance(m, nn.Conv2d)] == [
        64,
        128,
        256,
        256,
        512,
        512,
        512,
        512,
    ]
    assert model.classifier[0].in_features == 7 * 7 * 512
    assert meta("vgg_a", (3, 32, 32), 10).classifier[0].in_features == 512  # CIFAR-sized input


def test_ssp_mlps_match_the_papers_about_counts() -> None:
    """SSP-DNN §5: TIMIT 360 → 6 × 2048 sigmoid → 2001, "about 24 million" (25.8 M as stated, +7.6 %);
    ImageNet-63K 21504 → 5000 → 3000 → 2000 → 1000, "about 132 million" (130.5 M, −1.1 %)."""
    timit = meta("ssp_mlp", (360,), 2001)
    n = count_parameters(timit)
    assert n == 360 * 2048 + 2048 + 5 * (2048 * 2048 + 2048) + 2048 * 2001 + 2001 == 25_821_137
    assert abs(n - 24e6) / 24e6 < 0.10
    assert [m.out_features for m in timit.modules() if isinstance(m, nn.Linear)] == [2048] * 6 + [2001]
    assert sum(isinstance(m, nn.Sigmoid) for m in timit.modules()) == 6
    big = meta("ssp_mlp", (21504,), 1000, variant="imagenet63k")
    assert count_parameters(big) == 130_531_000 and abs(count_parameters(big) - 132e6) / 132e6 < 0.02
    small = meta("ssp_mlp", (360,), 2001, hidden=[64, 32], activation="relu")  # a ci-scale member of the family
    assert count_parameters(small) == 360 * 64 + 64 + 64 * 32 + 32 + 32 * 2001 + 2001
    assert sum(isinstance(m, nn.ReLU) for m in small.modules()) == 2


def test_agn_net_is_dist_keras_mnist_convnet() -> None:
    """AGN §4 names no model; dist-keras' MNIST example: 320 + 9,248 + 4608·225 + 225 + 2,260 parameters."""
    model = meta("agn_net", (1, 28, 28), 10)
    assert count_parameters(model) == 1_048_853
    assert model.classifier[0].in_features == 12 * 12 * 32


# --- TF / Caffe layer semantics ---------------------------------------------------------------


@pytest.mark.parametrize("size", [24, 12, 7])
def test_tf_same_max_pool_windows(size: int) -> None:
    """TF SAME 3/2 pooling: ⌈n/2⌉ outputs; the pad cell goes at the end (even n) or one each side (odd n)."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, size, size)
    out = TFSameMaxPool2d(3, 2)(x)
    n_out = -(-size // 2)
    total = max((n_out - 1) * 2 + 3 - size, 0)
    before = total // 2
    assert out.shape[-2:] == (n_out, n_out)
    for i in range(n_out):
        for j in range(n_out):
            r0, c0 = max(2 * i - before, 0), max(2 * j - before, 0)
            window = x[..., r0 : 2 * i - before + 3, c0 : 2 * j - before + 3]
            assert torch.equal(out[..., i, j], window.amax(dim=(-2, -1)))


def test_cifarnet_lrn_is_tf_lrn() -> None:
    """tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75): x / (1 + α·Σ_{|d'−d|≤4} x²)^β."""
    torch.manual_seed(0)
    x = torch.randn(2, 12, 5, 5) * 10
    lrn = build_model("cifarnet", (3, 24, 24), 10).features[3]
    sq = F.pad(x * x, (0, 0, 0, 0, 4, 4))
    window = torch.stack([sq[:, d : d + 9].sum(1) for d in range(12)], 1)
    expected = x / (1 + 0.001 / 9 * window) ** 0.75
    assert torch.allclose(lrn(x), expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(lrn(x), x, rtol=1e-2)  # not the identity at this scale


def test_cifarnet_center_crop() -> None:
    torch.manual_seed(0)
    model = build_model("cifarnet", (3, 32, 32), 10)
    x = torch.randn(2, 3, 32, 32)
    inner = x[..., 4:28, 4:28]
    assert torch.equal(model(x), model(inner))
    y = x.clone()
    y[..., :4, :] = 100.0  # outside the crop: no effect
    assert torch.equal(model(x), model(y))


# --- real forward passes of the small ones ----------------------------------------------------

SMALL = [
    ("cifarnet", (3, 32, 32), 10, {}),
    ("cifarnet", (3, 24, 24), 10, {"crop": None}),
    ("agn_net", (1, 28, 28), 10, {}),
    ("ssp_mlp", (360,), 2001, {"hidden": [64, 64, 64]}),
]


@pytest.mark.parametrize("case", SMALL, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}")
def test_small_models_forward_and_are_vmap_safe_by_construction(case) -> None:
    name, shape, classes, kw = case
    torch.manual_seed(0)
    model = build_model(name, shape, classes, **kw)
    out = model(torch.randn(3, *shape))
    assert out.shape == (3, classes) and torch.isfinite(out).all()
    assert not list(model.buffers())
    for m in model.modules():
        assert not isinstance(m, nn.modules.batchnorm._BatchNorm | nn.Dropout)
        assert not getattr(m, "inplace", False)
    torch.manual_seed(0)
    again = build_model(name, shape, classes, **kw)
    torch.manual_seed(1)
    other = build_model(name, shape, classes, **kw)
    pairs = list(zip(model.parameters(), again.parameters(), other.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b, _ in pairs) and not all(torch.equal(a, c) for a, _, c in pairs)


@pytest.mark.parametrize("case", SMALL[:1] + SMALL[2:], ids=lambda c: c[0])
def test_vmap_grad_matches_separate_backward(case) -> None:
    """vmap(grad(functional_call)) over 3 stacked weight sets == 3 plain backward passes (fp64)."""
    name, shape, classes, kw = case
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(build_model(name, shape, classes, **kw).double())
    base = models[0]
    stacked = {
        k: torch.stack([dict(m.named_parameters())[k].detach() for m in models]) for k, _ in base.named_parameters()
    }
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, *shape, generator=gen, dtype=torch.float64) * 3
    y = torch.randint(0, classes, (3, 4), generator=gen)
    batched = vmap(grad(lambda p, xb, yb: F.cross_entropy(functional_call(base, p, (xb,)), yb)))(stacked, x, y)
    for i, model in enumerate(models):
        model.zero_grad()
        F.cross_entropy(model(x[i]), y[i]).backward()
        for k, p in model.named_parameters():
            torch.testing.assert_close(batched[k][i], p.grad, atol=1e-10, rtol=1e-8)


# --- one step through the harness' gradient path (cifarnet) -----------------------------------

COST = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.3)


def test_cifarnet_trains_through_the_parameter_server_strategy() -> None:
    """4-softsync, λ = 8, μ = 2 on random 3×32×32 images: grouped and vmap gradients equal the per-learner
    loop, and a Trainer run of the strategy applies every update and moves the weights."""
    lam, mu, updates = 8, 2, 16
    proto = Protocol("softsync", lam, n=4)
    sched = Schedule.collect(Simulator(proto, COST, Topology(), mu, updates * proto.gradients_per_update, 0).run())
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 3, 32, 32, generator=gen), torch.randint(0, 10, (64,), generator=gen)
    batches = UpdateBatches(sched, x, y, mu, LRPolicy(), mu, lam, 0)
    torch.manual_seed(0)
    net = build_model("cifarnet", (3, 32, 32), 10)
    snaps = {
        t: {k: v.detach() + 0.01 * torch.randn_like(v) for k, v in net.named_parameters()}
        for t in range(sched.num_updates + 1)
    }
    multi = [i for i in range(sched.num_updates) if len(batches[i].groups) >= 2]
    assert multi, "the schedule has no update reading two snapshots"

    def gradient(mode: str) -> tuple[dict, torch.Tensor]:  # update multi[0]'s, on θ_i = snaps[i]
        ahead = Lookahead(sched, batches, net, ClassifierModule.loss, mode=mode)
        return [ahead.update_gradient(i, snaps[i]) for i in range(multi[0] + 1)][-1]

    ref, ref_loss = gradient("loop")
    for mode in ("grouped", "vmap"):
        got, loss = gradient(mode)
        assert torch.allclose(loss, ref_loss, atol=1e-6)
        for k in ref:
            assert torch.allclose(got[k], ref[k], atol=1e-5, rtol=1e-4), (mode, k)

    before = [p.detach().clone() for p in net.parameters()]
    strategy = ParameterServerStrategy(sched, "vmap")
    fit_updates(strategy, ClassifierModule(net, {"name": "sgd", "lr": 0.01, "momentum": 0.9}), batches)
    assert strategy.updates_done == sched.num_updates and not strategy.diverged
    assert all(torch.isfinite(p).all() for p in net.parameters())
    assert max(float((p.detach() - b).abs().max()) for p, b in zip(net.parameters(), before, strict=True)) > 1e-6


# --- configuration ----------------------------------------------------------------------------


def test_option_errors_name_the_key() -> None:
    cases = [
        ("cifarnet", (3, 16, 16), {}, "model.input_shape"),  # smaller than the 24×24 crop
        ("cifarnet", (3, 32, 32), {"crop": 0}, "model.crop"),
        ("alexnet", (3, 227, 227), {"groups": 3}, "model.groups"),
        ("alexnet", (3, 227, 227), {"batchnorm": "yes"}, "model.batchnorm"),
        ("alexnet", (3, 227, 227), {"lrn": True}, "model.lrn"),
        ("vgg_a", (3, 16, 16), {}, "model.input_shape"),  # five 2×2 pools need ≥ 32
        ("ssp_mlp", (360,), {"variant": "mnist"}, "model.variant"),
        ("ssp_mlp", (360,), {"activation": "gelu"}, "model.activation"),
        ("ssp_mlp", (360,), {"hidden": [64, 0]}, "model.hidden"),
        ("agn_net", (1, 28, 28), {"hidden": [8]}, "model.hidden"),
        ("agn_net", (784,), {}, "model.input_shape"),
    ]
    for name, shape, kw, key in cases:
        with pytest.raises(ConfigError) as err:
            with torch.device("meta"):
                build_model(name, shape, 10, **kw)
        assert err.value.key == key, (name, kw, str(err.value))


def test_batchnorm_trains_in_the_simulator_and_is_refused_where_no_rule_keeps_its_statistics(compose_cfg) -> None:
    """BN trains under engine=sim (psbench.strategy.batchnorm); the dist engine and local-step protocols are refused
    naming model.batchnorm; schedule-only runs may use it anywhere."""
    from psbench.validate import validate

    for model in ("alexnet", "googlenet", "vgg_a"):
        validate(compose_cfg(f"model={model}", "model.batchnorm=true"))
        with pytest.raises(ConfigError) as err:
            validate(compose_cfg(f"model={model}", "model.batchnorm=true", "engine=dist"))
        assert err.value.key == "model.batchnorm" and "engine=sim" in str(err.value)
    validate(compose_cfg("model=alexnet", "model.batchnorm=true", "engine=dist", "schedule_only=true"))
    with pytest.raises(ConfigError, match=r"model\.batchnorm"):
        validate(compose_cfg("model=alexnet", "model.batchnorm=1"))


def test_batchnorm_under_vmap_needs_buffers_of_its_own() -> None:
    """Why the learners get fresh buffers (psbench.strategy.batchnorm): BN's running-statistics update is an in-place
    write to a module buffer, which torch.func's grad/vmap over stacked snapshots rejects (GoogLeNet-BN on
    3×32×32); with stacked fresh buffers passed through functional_call it runs."""
    from psbench.strategy.batchnorm import BatchStats

    torch.manual_seed(0)
    net = build_model("googlenet", (3, 32, 32), 10, batchnorm=True)
    stacked = {k: torch.stack([v.detach(), v.detach() + 0.01]) for k, v in net.named_parameters()}
    x, y = torch.randn(2, 4, 3, 32, 32), torch.randint(0, 10, (2, 4))
    with pytest.raises(RuntimeError, match="in-place"):
        vmap(grad(lambda p, xb, yb: F.cross_entropy(functional_call(net, p, (xb,)), yb)))(stacked, x, y)
    bn = BatchStats(net)
    with bn.capturing():
        g = vmap(grad(lambda p, b, xb, yb: F.cross_entropy(functional_call(net, (p, b), (xb,)), yb)))(
            stacked, bn.fresh(2), x, y
        )
    assert all(torch.isfinite(v).all() for v in g.values())


def test_ssp_family_from_config(compose_cfg) -> None:
    """A ci-scale SSP sweep config: synthetic TIMIT-shaped data (360 features, 2001 classes), smaller hidden layers."""
    from psbench.assemble import build_data_and_model
    from psbench.validate import validate

    cfg = compose_cfg(
        "model=ssp_mlp",
        "model.hidden=[32,32]",
        "dataset=synthetic",
        "dataset.shape=[360]",
        "dataset.num_classes=2001",
        "dataset.num_train=64",
        "dataset.num_test=16",
    )
    validate(cfg)
    _, net = build_data_and_model(cfg)
    assert [m.out_features for m in net.modules() if isinstance(m, nn.Linear)] == [32, 32, 2001]
    assert net.net[0].in_features == 360 and isinstance(net.net[1], nn.Sigmoid)


# --- real forward passes of the large ones (slow) ---------------------------------------------

LARGE = [
    ("alexnet", (3, 227, 227), 1000, {}),
    ("alexnet", (3, 256, 256), 1000, {}),
    ("alexnet", (3, 227, 227), 1000, {"batchnorm": True}),
    ("googlenet", (3, 224, 224), 1000, {}),
    ("googlenet", (3, 224, 224), 1000, {"batchnorm": True}),
    ("vgg_a", (3, 224, 224), 1000, {}),
    ("ssp_mlp", (21504,), 1000, {"variant": "imagenet63k"}),
    ("ssp_mlp", (360,), 2001, {}),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", LARGE, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}" + "".join(c[3]))
def test_large_models_forward_and_backward(case) -> None:
    name, shape, classes, kw = case
    torch.manual_seed(0)
    model = build_model(name, shape, classes, **kw)
    with torch.device("meta"):
        assert count_parameters(model) == count_parameters(build_model(name, shape, classes, **kw))
    x = torch.randn(2, *shape)
    out = model(x)
    assert out.shape == (2, classes) and torch.isfinite(out).all()
    F.cross_entropy(out, torch.tensor([0, 1])).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model(x[:1])).all()


@pytest.mark.parametrize("name", ["alexnet", "googlenet", "vgg_a", "ssp_mlp"])
def test_large_models_without_batchnorm_have_nothing_vmap_cannot_batch(name: str) -> None:
    """No buffers, dropout or in-place ops: the same functional_call + vmap path as the small ones works."""
    model = meta(name, (3, 224, 224), 1000)
    assert not list(model.buffers())
    assert not any(
        isinstance(m, nn.modules.batchnorm._BatchNorm | nn.Dropout) or getattr(m, "inplace", False)
        for m in model.modules()
    )
