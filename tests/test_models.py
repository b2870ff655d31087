"""psbench.models: the papers' architectures, parameter counts and vmap compatibility."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from psbench.errors import ConfigError
from psbench.models import (
    MODEL_NAMES,
    WithinChannelLRN,
    build_model,
    count_parameters,
    model_bytes,
)

CASES = [
    ("mlp", (1, 8, 8), {}),
    ("mlp", (1, 28, 28), {"hidden": (64, 32)}),
    ("lenet", (1, 28, 28), {}),
    ("cifar_cnn", (3, 32, 32), {}),
    ("cifar_cnn", (1, 28, 28), {}),
    ("cifar_cnn", (3, 32, 32), {"lrn": True}),
]


def _ids(case: tuple) -> str:
    name, shape, kw = case
    return f"{name}-{'x'.join(map(str, shape))}" + "".join(f"-{k}" for k in kw)


# --- architectures against the papers -------------------------------------------------------


def test_lenet_matches_caffe_lenet_param_count() -> None:
    """TernGrad §4.1 LeNet = Caffe lenet: 520 + 25,050 + 400,500 + 5,010 parameters."""
    model = build_model("lenet", (1, 28, 28), 10)
    assert count_parameters(model) == 431_080
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes == [(20, 1, 5, 5), (20,), (50, 20, 5, 5), (50,), (500, 800), (500,),
                      (10, 500), (10,)]  # fmt: skip


def test_cifar_cnn_matches_rudra_size() -> None:
    """Rudra §4.2: "~90 K" trainable parameters, "~350 kB" in 32-bit floats."""
    model = build_model("cifar_cnn", (3, 32, 32), 10)
    n = count_parameters(model)
    assert n == 89_578
    assert 85_000 <= n <= 95_000
    assert model_bytes(model) == 4 * n
    assert abs(model_bytes(model) - 350_000) <= 0.1 * 350_000
    assert model.fc.in_features == 64 * 4 * 4  # ceil-mode pooling 32 → 16 → 8 → 4


def test_cifar_cnn_caffe_pooling_shapes() -> None:
    model = build_model("cifar_cnn", (3, 32, 32), 10)
    sizes = []
    x = torch.zeros(1, 3, 32, 32)
    for layer in model.features:
        x = layer(x)
        if isinstance(layer, nn.MaxPool2d | nn.AvgPool2d):
            sizes.append(x.shape[-1])
    assert sizes == [16, 8, 4]


def test_cifar_cnn_adapts_to_mnist_shape() -> None:
    model = build_model("cifar_cnn", (1, 28, 28), 10)
    assert model.features.conv1.in_channels == 1
    assert model.fc.in_features == 64 * 3 * 3  # 28 → 14 → 7 → 3
    assert model(torch.randn(5, 1, 28, 28)).shape == (5, 10)


def test_mlp_hidden_sizes() -> None:
    assert count_parameters(build_model("mlp", (1, 28, 28), 10)) == 784 * 128 + 128 + 1290
    model = build_model("mlp", (3, 4), 7, hidden=[16, 8])
    assert [tuple(p.shape) for p in model.parameters()][::2] == [(16, 12), (8, 16), (7, 8)]
    assert count_parameters(build_model("mlp", (1, 8, 8), 10, hidden=())) == 650


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_shapes_and_no_bn_dropout_inplace(case: tuple) -> None:
    name, shape, kw = case
    model = build_model(name, shape, 10, **kw)
    out = model(torch.randn(4, *shape))
    assert out.shape == (4, 10) and torch.isfinite(out).all()
    for module in model.modules():
        assert not isinstance(module, nn.modules.batchnorm._BatchNorm | nn.Dropout)
        assert not getattr(module, "inplace", False)
    assert not list(model.buffers())


def test_lrn_is_caffe_within_channel_and_parameter_free() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 6) * 30
    lrn = WithinChannelLRN(local_size=3, alpha=5e-5, beta=0.75)
    # explicit Caffe formula: zero-padded 3×3 window, divide the sum of squares by 9
    padded = F.pad(x * x, (1, 1, 1, 1))
    window = sum(padded[..., i : i + 5, j : j + 6] for i in range(3) for j in range(3))
    expected = x / (1 + 5e-5 * window / 9) ** 0.75
    assert torch.allclose(lrn(x), expected, rtol=1e-5, atol=1e-6)
    torch.manual_seed(1)
    plain = build_model("cifar_cnn", (3, 32, 32), 10)
    torch.manual_seed(1)
    with_lrn = build_model("cifar_cnn", (3, 32, 32), 10, lrn=True)
    assert count_parameters(with_lrn) == count_parameters(plain)
    big = torch.randn(2, 3, 32, 32) * 50
    assert not torch.allclose(plain(big), with_lrn(big))
    with_lrn(big).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in with_lrn.parameters())


def test_lrn_hand_written_gradient_is_the_formulas_under_autograd_and_vmap() -> None:
    """The closed-form backward equals autograd's derivative of the formula (gradcheck in float64, with an α large
    enough that the window term matters), and torch.func's vmap over grad — the look-ahead's transform — gives
    each sample's gradient."""
    lrn = WithinChannelLRN(local_size=3, alpha=0.3, beta=0.75)

    def formula(x: torch.Tensor) -> torch.Tensor:  # the plain ops: autograd derives these
        window = F.avg_pool2d(x * x, 3, stride=1, padding=1, count_include_pad=True)
        return x * (1 + 0.3 * window) ** -0.75

    torch.manual_seed(0)
    x = (torch.randn(2, 3, 5, 6, dtype=torch.float64) * 2).requires_grad_()
    assert torch.autograd.gradcheck(lrn, (x,))
    g = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    ours = torch.autograd.grad(lrn(x), x, g)[0]
    theirs = torch.autograd.grad(formula(x), x, g)[0]
    assert torch.allclose(ours, theirs, rtol=1e-10, atol=1e-12) and float((ours - g).abs().max()) > 1e-2
    xs = torch.randn(4, 2, 3, 5, 6, dtype=torch.float64)
    each = torch.func.vmap(torch.func.grad(lambda t: (lrn(t) ** 2).sum()))(xs)
    ref = torch.stack([torch.autograd.grad((formula(t) ** 2).sum(), t)[0] for t in xs.clone().requires_grad_()])
    assert torch.allclose(each, ref, rtol=1e-10, atol=1e-12)
    # plain autograd takes the eager Function, torch.func the split one: the same gradient, bit for bit
    t = xs[0].clone().requires_grad_()
    eager = torch.autograd.grad((lrn(t) ** 2).sum(), t)[0]
    assert torch.equal(eager, torch.func.grad(lambda t: (lrn(t) ** 2).sum())(xs[0]))


# --- determinism and initialisation ---------------------------------------------------------


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_init_deterministic_given_manual_seed(name: str) -> None:
    shape = {"cifar_cnn": (3, 32, 32), "vgg_a": (3, 32, 32), "alexnet": (3, 64, 64)}.get(name, (1, 28, 28))

    def params(seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        return [p.detach().clone() for p in build_model(name, shape, 10).parameters()]

    a, b, c = params(7), params(7), params(8)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


def test_caffe_fillers() -> None:
    torch.manual_seed(0)
    cnn = build_model("cifar_cnn", (3, 32, 32), 10, init="caffe")
    assert abs(cnn.features.conv1.weight.std().item() - 1e-4) < 2e-5
    assert abs(cnn.features.conv2.weight.std().item() - 1e-2) < 1e-3
    assert torch.count_nonzero(cnn.fc.bias) == 0
    lenet = build_model("lenet", (1, 28, 28), 10, init="caffe")
    fc1 = lenet.classifier[0].weight
    assert fc1.abs().max() <= (3 / 800) ** 0.5 and torch.count_nonzero(lenet.classifier[0].bias) == 0


# --- torch.func compatibility (what the parameter server relies on) -------------------------


VMAP_CASES = [(*case, torch.float32) for case in CASES] + [("cifar_cnn", (3, 32, 32), {"lrn": True}, torch.float64)]


@pytest.mark.parametrize("case", VMAP_CASES, ids=lambda c: _ids(c[:3]) + ("-fp64" if c[3] == torch.float64 else ""))
def test_vmap_grad_functional_call_matches_separate(case: tuple) -> None:
    """vmap(grad(functional_call)) over 3 stacked parameter sets == 3 separate backward passes.

    In fp32 the batched and the plain conv kernels sum in different orders; an activation
    within ~1e-6 of a ReLU kink can then switch sides and move a gradient by ~1e-4, so fp32
    uses unit-scale inputs (whose activations here stay clear of the kinks). The fp64 LRN case
    uses 3× larger inputs, so that LRN is far from the identity.
    """
    name, shape, kw, dtype = case
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(build_model(name, shape, 10, **kw).to(dtype))
    base = models[0]
    stacked = {
        k: torch.stack([dict(m.named_parameters())[k].detach() for m in models]) for k, _ in base.named_parameters()
    }
    gen = torch.Generator().manual_seed(123)
    scale = 3.0 if dtype == torch.float64 else 1.0
    x = torch.randn(3, 4, *shape, generator=gen, dtype=dtype) * scale  # one batch per set
    y = torch.randint(0, 10, (3, 4), generator=gen)

    def loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(base, params, (xb,)), yb)

    batched = vmap(grad(loss))(stacked, x, y)
    for i, model in enumerate(models):
        model.zero_grad()
        F.cross_entropy(model(x[i]), y[i]).backward()
        for k, p in model.named_parameters():
            torch.testing.assert_close(batched[k][i], p.grad, atol=1e-5, rtol=1e-4)


# --- configuration errors -------------------------------------------------------------------


def test_config_errors() -> None:
    with pytest.raises(ConfigError) as err:
        build_model("resnet", (3, 32, 32), 10)
    assert err.value.key == "model.name" and "cifar_cnn" in err.value.allowed
    with pytest.raises(ConfigError, match=r"model\.lrn"):
        build_model("lenet", (1, 28, 28), 10, lrn=True)
    with pytest.raises(ConfigError, match=r"model\.init"):
        build_model("cifar_cnn", (3, 32, 32), 10, init="he")
    with pytest.raises(ConfigError, match=r"model\.input_shape"):
        build_model("lenet", (1, 8, 8), 10)  # too small for two 5×5 convs
    with pytest.raises(ConfigError, match=r"model\.input_shape"):
        build_model("cifar_cnn", (784,), 10)
    with pytest.raises(ConfigError, match=r"model\.num_classes"):
        build_model("mlp", (4,), 0)  # 1 is a regression's one target


#: aten ops whose CUDA kernels raise under ``torch.use_deterministic_algorithms(True)`` (torch's documentation of
#: that function lists them): ``trainer.deterministic`` (the default) makes a GPU run fail at its first gradient
CUDA_NONDETERMINISTIC = {
    "avg_pool3d_backward",
    "adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool2d_backward",
    "adaptive_avg_pool3d_backward",
    "_adaptive_avg_pool3d_backward",
    "max_pool3d_with_indices_backward",
    "adaptive_max_pool2d_backward",
    "fractional_max_pool2d_backward",
    "fractional_max_pool3d_backward",
    "max_unpool2d",
    "max_unpool3d",
    "upsample_linear1d_backward",
    "upsample_bilinear2d_backward",
    "upsample_bicubic2d_backward",
    "upsample_trilinear3d_backward",
    "reflection_pad1d_backward",
    "reflection_pad2d_backward",
    "reflection_pad3d_backward",
    "replication_pad1d_backward",
    "replication_pad2d_backward",
    "replication_pad3d_backward",
    "nll_loss2d_forward",
    "_ctc_loss_backward",
    "grid_sampler_2d_backward",
    "grid_sampler_3d_backward",
    "histc",
    "kthvalue",
}
#: every built-in model at a small input it accepts
SMALL = {
    "mlp": (1, 8, 8),
    "lenet": (1, 28, 28),
    "cifar_cnn": (3, 32, 32),
    "cifarnet": (3, 32, 32),
    "alexnet": (3, 67, 67),
    "googlenet": (3, 64, 64),
    "vgg_a": (3, 32, 32),
    "ssp_mlp": (100,),
    "agn_net": (1, 28, 28),
}


def test_no_built_in_model_needs_an_op_cuda_cannot_run_deterministically() -> None:
    """Every built-in model's forward and backward (with its LRN, BatchNorm and pooling options) dispatches no op
    whose CUDA kernel raises under ``torch.use_deterministic_algorithms``, checked on the CPU: AlexNet, CifarNet and
    GoogLeNet's across-channel LRN went through ``avg_pool3d``, so every GPU run of them failed at its first
    gradient under the default ``trainer.deterministic``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from psbench.models.options import MODEL_NAMES

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    assert set(SMALL) == set(MODEL_NAMES)
    options = {"cifar_cnn": [{}, {"lrn": True}], "alexnet": [{}, {"batchnorm": True}], "vgg_a": [{"batchnorm": True}]}
    torch.manual_seed(0)
    for name, shape in SMALL.items():
        for kw in options.get(name, [{}]):
            net = build_model(name, shape, 10, **kw)
            with Ops() as ops:
                F.cross_entropy(net(torch.randn(2, *shape)), torch.tensor([1, 2])).backward()
            assert "convolution_backward" in ops.seen or name in ("mlp", "ssp_mlp"), (name, kw)  # not vacuous
            assert not ops.seen & CUDA_NONDETERMINISTIC, (name, kw, ops.seen & CUDA_NONDETERMINISTIC)
