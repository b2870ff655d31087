"""Codecs: TernGrad unbiasedness and wire sizes, QSGD, error feedback, scaler sharing, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from psbench.compression import (
    QSGD,
    ErrorFeedback,
    RandomK,
    SignSGD,
    TernGrad,
    TopK,
    build_codec,
    learner_generator,
)
from psbench.compression.pipeline import LearnerCompression, last_layer
from psbench.errors import ConfigError


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_terngrad_is_unbiased_within_its_variance():
    """E[ternarize(g)] = g (TernGrad Eq 7): over T = 10⁵ draws, |mean − g| ≤ 4·√(|g|(s−|g|)/T) per element."""
    g = torch.randn(64, generator=gen(1))
    g[0], g[1] = 0.0, g.abs().max()  # the bound is 0 there: exact
    s, T, tg = float(g.abs().max()), 100_000, TernGrad(clip=None)
    total = torch.zeros(64, dtype=torch.float64)
    r = gen(2)
    for _ in range(T // 20_000):  # the draws as a batch: 20,000 copies per call share the scaler s
        p = tg.compress(g.repeat(20_000), generator=r, scaler=s)
        total += tg.decompress(p).view(-1, 64).double().sum(0)
    mean = total / T
    bound = 4 * torch.sqrt(g.abs().double() * (s - g.abs().double()) / T) + 1e-6 * s
    assert bool(((mean - g.double()).abs() <= bound).all()), float(((mean - g.double()).abs() - bound).max())
    # and it is not the identity: one draw is ternary
    assert set(tg.decompress(tg.compress(g, generator=r)).unique().tolist()) <= {0.0, s, -s}


def test_terngrad_clipping_is_eq_9_and_unbiased_for_the_clipped_gradient():
    g = torch.randn(4096, generator=gen(3))
    g[7] = 40.0  # an outlier
    tg = TernGrad(clip=2.5)
    bound = tg.bound(g)
    assert bound == pytest.approx(2.5 * float(g.std(correction=0)), rel=1e-5)
    assert tg.scaler(g) == bound
    f = tg.clipped(g)
    assert torch.equal(f, g.clamp(-bound, bound))
    T = 20_000
    x = f[:32]
    mean = TernGrad(clip=None).decompress(TernGrad(clip=None).compress(x.repeat(T), generator=gen(4), scaler=bound))
    mean = mean.view(T, 32).double().mean(0)
    assert bool(((mean - x.double()).abs() <= 4 * torch.sqrt(x.abs() * (bound - x.abs()) / T) + 1e-6).all())


def test_qsgd_is_unbiased_within_its_variance():
    q = QSGD(levels=2, bucket=32)
    g = torch.randn(96, generator=gen(5))
    var = q.variance(g).double()
    T, total, r = 100_000, torch.zeros(96, dtype=torch.float64), gen(6)
    for _ in range(T // 10_000):
        total += q.decompress(q.compress(g.repeat(10_000), generator=r)).view(-1, 96).double().sum(0)
    err = (total / T - g.double()).abs()
    assert bool((err <= 4 * torch.sqrt(var / T) + 1e-6).all()), float((err - 4 * torch.sqrt(var / T)).max())
    assert var.sum() > 0


CODECS = {
    "none": lambda: build_codec("none"),
    "fp16": lambda: build_codec("fp16"),
    "qsgd-4-512": lambda: QSGD(4, 512),
    "qsgd-1-3": lambda: QSGD(1, 3),
    "qsgd-7-2": lambda: QSGD(7, 2),
    "topk": lambda: TopK(0.3),
    "randomk": lambda: RandomK(0.5),
    "signsgd-l1": lambda: SignSGD("l1"),
    "signsgd-seide": lambda: SignSGD("seide"),
    "terngrad-2bit": lambda: TernGrad(2.5, "2bit"),
    "terngrad-base3": lambda: TernGrad(None, "base3"),
    "topk+ef": lambda: ErrorFeedback(TopK(0.1)),
    "terngrad+ef": lambda: ErrorFeedback(TernGrad()),
}


@pytest.mark.parametrize("name", list(CODECS))
@pytest.mark.parametrize("n", [1, 3, 5, 4097])
def test_expected_bytes_equal_the_serialized_payload(name, n):
    codec = CODECS[name]()
    g = torch.randn(n, generator=gen(n))
    p = codec.compress(g, "w", gen(1))
    assert codec.nbytes(p) == codec.expected_bytes(n) == len(p.to_bytes())
    assert codec.decompress(p).shape == g.shape


@pytest.mark.parametrize("wire", ["2bit", "base3"])
@pytest.mark.parametrize("learners", [1, 2, 3, 8])
@pytest.mark.parametrize("n", [1, 3, 5, 4097])
def test_terngrad_pull_bytes_equal_the_serialized_pull(wire, learners, n):
    tg = TernGrad(wire=wire)
    total = torch.randint(-learners, learners + 1, (n,), generator=gen(n))
    p = tg.encode_pull(total, 0.5, learners)
    assert tg.nbytes(p) == tg.expected_pull_bytes(n, learners) == len(p.to_bytes())
    assert torch.equal(tg.decode_pull(p), total)


def test_terngrad_wire_ratios_on_a_million_elements():
    """TernGrad §3.1: 2 bits → 16×, base-3 → 20× (bound 20.19×), scalers included."""
    g = torch.randn(1_000_000, generator=gen(7))
    for wire, target, tol in (("2bit", 16, 1e-3), ("base3", 20, 1e-2)):
        tg = TernGrad(wire=wire)
        p = tg.compress(g, generator=gen(8))
        ratio = 4 * g.numel() / tg.nbytes(p)
        assert abs(ratio / target - 1) < tol, (wire, ratio)
        assert ratio < 32 / math.log2(3)
        t = tg.ternary(p)  # the packing round-trips the ternary vector
        assert torch.equal(tg.decompress(p), t.float() * float(p.fields["scaler"]))


@pytest.mark.parametrize("name", ["terngrad", "topk", "randomk", "signsgd", "qsgd", "fp16"])
def test_error_feedback_identity_is_bit_exact(name):
    """g + m_before == decoded + m_after, bit for bit (float64 memory), over several steps."""
    opts = {"k": 0.05} if name in ("topk", "randomk") else {}
    ef = build_codec(name, {"error_feedback": True, **opts})
    assert isinstance(ef, ErrorFeedback)
    r = gen(9)
    for step in range(6):
        g = torch.randn(3001, generator=r) * (1 + step)
        before = ef.memory.get("w", torch.zeros(3001, dtype=torch.float64))
        p = ef.compress(g, "w", r)
        decoded = ef.inner.decompress(p).double()  # what the receiver decodes
        assert torch.equal(g.double() + before, decoded + ef.memory["w"])
    assert any(ef.memory["w"] != 0)
    state = ef.state_dict()
    other = build_codec(name, {"error_feedback": True, **opts})
    other.load_state_dict(state)
    assert torch.equal(other.memory["w"], ef.memory["w"])


@pytest.mark.parametrize("learners", [1, 2, 3, 8])
def test_scaler_sharing_leaves_at_most_2n_plus_1_levels(learners):
    """TernGrad §3.1: with a shared scaler the aggregated update has ≤ 2N + 1 levels (N contributors)."""
    shapes = {"w": torch.Size([2000])}
    grads = {"w": torch.stack([torch.randn(2000, generator=gen(l)) * (l + 1) for l in range(learners)])}
    ones = torch.ones(learners)

    def levels(share: bool) -> int:
        lc = LearnerCompression({"name": "terngrad", "clip": 2.5, "share_scalers": share}, shapes, seed=0)
        agg, _ = lc.aggregate(list(range(learners)), ones, grads)
        return agg["w"].unique().numel()

    assert levels(True) <= 2 * learners + 1
    if learners > 1:
        assert levels(False) > 2 * learners + 1  # without sharing the learners' scalers differ


def test_pipeline_bytes_match_the_measured_payloads_and_last_layer_stays_float():
    shapes = {
        "f.0.weight": torch.Size([30, 7]),
        "f.0.bias": torch.Size([30]),
        "head.weight": torch.Size([3, 30]),
        "head.bias": torch.Size([3]),
    }
    assert last_layer(list(shapes)) == ("head.weight", "head.bias")
    n = 3
    grads = {k: torch.randn(n, *s, generator=gen(1)) for k, s in shapes.items()}
    w = torch.full((n,), 1 / n)
    opts = {
        "name": "terngrad",
        "clip": 2.5,
        "wire": "base3",
        "share_scalers": True,
        "float_last_layer": True,
        "localize": True,
    }
    lc = LearnerCompression(opts, shapes, seed=3)
    agg, pushed = lc.aggregate([0, 4, 5], w, grads)
    assert pushed == n * lc.push_bytes()
    assert torch.allclose(agg["head.weight"], grads["head.weight"].mean(0))
    assert lc.pull_bytes(n) < lc.model_bytes
    plain = LearnerCompression({"name": "qsgd", "levels": 4, "bucket": 64}, shapes, seed=3)
    _, pushed = plain.aggregate([0, 1, 2], w, grads)
    assert pushed == n * plain.push_bytes() and plain.pull_bytes(n) == plain.model_bytes
    # same seed → same draws; another seed → other draws; each learner its own stream
    again, _ = LearnerCompression(opts, shapes, seed=3).aggregate([0, 4, 5], w, grads)
    other, _ = LearnerCompression(opts, shapes, seed=4).aggregate([0, 4, 5], w, grads)
    assert torch.equal(again["f.0.weight"], agg["f.0.weight"])
    assert not torch.equal(other["f.0.weight"], agg["f.0.weight"])
    a = torch.rand(4, generator=learner_generator(0, 1))
    assert not torch.equal(a, torch.rand(4, generator=learner_generator(0, 2)))


@pytest.mark.parametrize(
    ("name", "opts", "key"),
    [
        ("bogus", {}, "compression.name"),
        ("terngrad", {"clip": 0}, "compression.clip"),
        ("terngrad", {"clip": -2.5}, "compression.clip"),
        ("terngrad", {"wire": "3bit"}, "compression.wire"),
        ("qsgd", {"levels": 0}, "compression.levels"),
        ("qsgd", {"bucket": 0}, "compression.bucket"),
        ("topk", {"k": 0}, "compression.k"),
        ("topk", {"k": 1.5}, "compression.k"),
        ("randomk", {"k": -0.1}, "compression.k"),
        ("signsgd", {"scale": "max"}, "compression.scale"),
        ("fp16", {"k": 0.1}, "compression.k"),
    ],
)
def test_bad_codec_options_name_the_key(name, opts, key):
    with pytest.raises(ConfigError) as e:
        build_codec(name, opts)
    assert e.value.key == key
    assert key in str(e.value)


@pytest.mark.parametrize("wire", ["2bit", "base3"])
def test_terngrad_draws_follow_the_documented_16_bit_rule(wire):
    """b = 1 iff r + ½ < 2¹⁶·|f(g)|/s, r the 16-bit lanes of an SFC64 stream seeded by one draw from the
    generator, in element order — checked element by element over several blocks and a ragged tail, with clipping."""
    from psbench.compression import ternarize

    n = 2 * ternarize.BLOCK + 7
    g = torch.randn(n, generator=gen(11))
    g[5] = 30.0  # clipped
    tg = TernGrad(clip=2.5, wire=wire)
    s, bound = tg.scaler(g), tg.bound(g)
    assert s == bound < 30.0
    t = tg.ternary(tg.compress(g, generator=gen(12))).long()
    seed = int(torch.randint(0, 2**63 - 1, (1,), generator=gen(12)))
    words = np.random.SFC64(seed).random_raw(-(-n // 4))
    r = torch.from_numpy(words.view(np.uint16).astype(np.float64))[:n]
    a = g.double().abs().clamp(max=bound) * (2.0**16 / s)  # float64 reference of the float32 kernel
    b = r + 0.5 < a
    expect = torch.where(b, torch.sign(g).long(), 0)
    near = (r + 0.5 - a).abs() < 1e-2 * (1 + a * 1e-4)  # float32 rounding of the threshold may flip a tie
    assert bool(((t == expect) | near).all()) and int(near.sum()) < 20
    assert t[5] == 1  # the clipped outlier is exactly +s: P(b = 1) = 1


def test_batched_terngrad_update_equals_the_per_learner_codecs():
    """The pipeline ternarizes all learners of an update in one pass; the result is that of compress()
    per learner with its own generator and the shared scaler (codes equal, sum to float rounding)."""
    shapes = {"w": torch.Size([70, 300]), "b": torch.Size([70])}
    learners, seed = [3, 0, 5], 4
    grads = {
        k: torch.randn(len(learners), *s, generator=gen(2)) * torch.tensor([1.0, 3.0, 0.5]).view(-1, *[1] * len(s))
        for k, s in shapes.items()
    }
    for weights in (torch.full((3,), 1 / 3), torch.tensor([0.5, 0.3, 0.2])):
        for wire in ("2bit", "base3"):
            lc = LearnerCompression({"name": "terngrad", "wire": wire, "share_scalers": True}, shapes, seed=seed)
            agg, pushed = lc.aggregate(learners, weights, grads)
            assert pushed == len(learners) * lc.push_bytes()
            tg = TernGrad(wire=wire)
            gens = {l: learner_generator(seed, l) for l in learners}
            for k, g in grads.items():
                shared = max(tg.scaler(g[j]) for j in range(len(learners)))
                ref = sum(
                    tg.decompress(tg.compress(g[j], k, gens[l], scaler=shared)) * weights[j]
                    for j, l in enumerate(learners)
                )
                assert torch.allclose(agg[k], ref, rtol=0, atol=1e-6 * shared), (k, wire)


@pytest.mark.parametrize(
    "opts",
    [
        {"name": "terngrad", "share_scalers": True},
        {"name": "terngrad", "error_feedback": True},
        {"name": "randomk", "k": 0.1, "error_feedback": True},
    ],
)
def test_pipeline_state_dict_resumes_the_codec_streams_exactly(opts, tmp_path):
    """state_dict() (per-learner generator states, error-feedback memory, byte count) survives torch.save, and a
    fresh pipeline loaded from it continues exactly as the original would have."""
    shapes = {"w": torch.Size([40, 30]), "b": torch.Size([40])}
    r = gen(13)
    steps = [({k: torch.randn(2, *s, generator=r) for k, s in shapes.items()}, [i % 3, (i + 1) % 3]) for i in range(4)]
    w = torch.full((2,), 0.5)
    a = LearnerCompression(opts, shapes, seed=7)
    for grads, ls in steps[:2]:
        a.aggregate(ls, w, grads)
    torch.save(a.state_dict(), tmp_path / "codecs.pt")
    b = LearnerCompression(opts, shapes, seed=7)
    b.load_state_dict(torch.load(tmp_path / "codecs.pt"))
    fresh = LearnerCompression(opts, shapes, seed=7)  # without the state: other draws / memory
    for grads, ls in steps[2:]:
        x, y, z = (lc.aggregate(ls, w, grads)[0] for lc in (a, b, fresh))
        assert all(torch.equal(x[k], y[k]) for k in shapes)
        assert not all(torch.equal(x[k], z[k]) for k in shapes)
    assert a.bytes_pushed == b.bytes_pushed > fresh.bytes_pushed
