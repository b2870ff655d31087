"""sweeps entries zhang_fig*, ssp_fig*: three scales, presets that compose and validate, the papers' cases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from psbench.cli import CONF_DIR

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.pages import ssp_paper, zhang_paper  # noqa: E402
from analysis.pages.zhang import fig2_case  # noqa: E402
from sweeps._runner import SCALES, command  # noqa: E402

from sweep_entry import entry  # noqa: E402

WITH_PAPER_JPEG = ("ci", "small", "full", "paper_jpeg", "paper")
ssp_fig2_4, ssp_fig3_5 = entry("ssp_fig2_4"), entry("ssp_fig3_5")
zhang_fig1, zhang_fig2, zhang_fig3 = entry("zhang_fig1"), entry("zhang_fig2"), entry("zhang_fig3")

ENTRY = {
    "zhang/fig1": zhang_fig1,
    "zhang/fig2": zhang_fig2,
    "zhang/fig3": zhang_fig3,
    "ssp/fig2_4": ssp_fig2_4,
    "ssp/fig3_5": ssp_fig3_5,
}


def _cases(preset: str) -> dict:
    return yaml.safe_load((CONF_DIR / f"experiment/{preset}.yaml").read_text())["hydra"]["sweeper"]["cases"]


@pytest.mark.parametrize("preset", sorted(ENTRY))
def test_entry_points_have_their_scales_a_fixed_study_and_compose_at_each(preset, compose_preset, jpeg_data_dir):
    mod = ENTRY[preset]
    assert tuple(mod.SCALES) == (WITH_PAPER_JPEG if preset == "zhang/fig3" else SCALES)
    name = mod.NAME
    for scale in mod.SCALES:
        cmd = command(name, preset, mod.SCALES[scale], scale)
        assert f"hydra.sweeper.study_name={name}_{scale}" in cmd and f"++tags.scale={scale}" in cmd
        cfg = compose_preset(preset, *mod.SCALES[scale], jpeg_data_dir)
        assert cfg.tags.paper == preset.split("/")[0]
    assert (mod.__doc__ or "").count("min") + (mod.__doc__ or "").count(" h") >= 1  # says what it costs here


def test_zhang_fig1_is_1_15_30_softsync_at_lambda_30_mu_4(compose_preset):
    cfg = compose_preset("zhang/fig1")
    assert (cfg.learners, cfg.batch_size, cfg.schedule_only, cfg.hardware.name) == (30, 4, True, "p775")
    assert {k: v["protocol.n"] for k, v in _cases("zhang/fig1").items()} == {
        k: s["n"] for k, s in zhang_paper.FIG1.items()
    }


def test_zhang_fig2_cases_cover_every_lambda_protocol_and_benchmark_and_each_validates(compose_preset):
    cases = _cases("zhang/fig2")
    want = {fig2_case("cifar", mu, "hardsync", 1) for mu in (4, 128)} | {fig2_case("imagenet", 16, "hardsync", 1)}
    packings = ((4, zhang_paper.FIG2_LAMBDAS[1:]), (6, (8, 16, 30)))  # Zhang §2.3: 4 or 6 learners per node
    want |= {
        fig2_case(b, mu, p, lam, per_node)
        for b, mu in (("cifar", 4), ("cifar", 128), ("imagenet", 16))
        for p in zhang_paper.FIG2_PROTOCOLS
        for per_node, lams in packings
        for lam in lams
    }
    assert set(cases) == want and len(want) == 75
    for label in (
        "cifar_mu4_async_lam30",
        "imagenet_mu16_s1_lam30",
        "cifar_mu128_hardsync_lam16",
        "imagenet_mu16_s1_lam30_pn6",
    ):
        c = cases[label]
        over = [f"{k}={'[' + ','.join(map(str, v)) + ']' if isinstance(v, list) else v}" for k, v in c.items()]
        cfg = compose_preset("zhang/fig2", *over)
        assert (cfg.learners, cfg.batch_size) == (
            int(label.split("lam")[1].split("_")[0]),
            int(label.split("_")[1][2:]),
        )
        assert cfg.topology.learners_per_node == (6 if label.endswith("_pn6") else 4)


def test_zhang_fig2_models_have_the_papers_sizes():
    """CIFAR10 ~350 kB (§4.1: ~90 K parameters); the ImageNet stand-in ~300 MB (Fig 2b; AlexNet 289 MB)."""
    import torch

    from psbench.models import build_model, model_bytes

    with torch.device("meta"):
        cifar = build_model("cifar_cnn", (3, 32, 32), 10)
        imnet = build_model(
            "mlp", (3, 32, 32), 10, hidden=_cases("zhang/fig2")["imagenet_mu16_s1_lam2"]["model.hidden"]
        )
    assert 300e3 < model_bytes(cifar) < 400e3
    assert 289e6 <= model_bytes(imnet) <= 300e6


def test_zhang_fig3_cases_are_the_figures_curves_and_each_validates(compose_preset):
    cases = _cases("zhang/fig3")
    assert set(cases) == set(zhang_paper.FIG3)
    for label, c in cases.items():
        n, lr, _ = zhang_paper.FIG3[label]
        assert c.get("protocol.n", 0) == n
        assert c["lr_policy"] == {"α0": "constant", "α0/τ": "per_gradient"}[lr]
        cfg = compose_preset("zhang/fig3", *(f"{k}={v}" for k, v in c.items()))
        assert (cfg.learners, cfg.batch_size, cfg.optimizer.lr, cfg.optimizer.momentum) == (30, 4, 0.001, 0.9)


@pytest.mark.parametrize(("preset", "key"), [("ssp/fig2_4", "timit"), ("ssp/fig3_5", "imagenet63k")])
def test_ssp_presets_have_the_papers_shapes_and_settings(preset, key, compose_preset):
    ds = ssp_paper.DATASETS[key]
    cfg = compose_preset(preset)
    assert cfg.dataset.name == "synthetic" and list(cfg.dataset.shape) == [ds["features"]]
    assert cfg.dataset.num_classes == ds["classes"]
    assert (cfg.protocol.name, cfg.protocol.staleness_bound) == ("ssp", ds["staleness"])
    assert (cfg.batch_size, cfg.optimizer.lr, cfg.optimizer.momentum) == (ds["batch"], ds["lr"], 0.0)
    assert cfg.tags.dataset_stand_in == key and "synthetic" in cfg.tags.data_note
    assert sorted(int(c["learners"]) for c in _cases(preset).values()) == list(ssp_paper.MACHINES)


@pytest.mark.parametrize("mod", [ssp_fig2_4, ssp_fig3_5])
def test_ssp_compute_per_sample_is_6_flop_per_parameter_at_the_assumed_rate_at_every_scale(mod, compose_preset):
    """The SSP scales shrink the net; the compute time must shrink with it (6·P/1e11 s), or the speed-up changes."""
    import torch
    from omegaconf import OmegaConf

    from psbench.models import build_model

    preset = mod.PRESET
    for scale in SCALES:
        cfg = compose_preset(preset, *mod.SCALES[scale])
        m = OmegaConf.to_container(cfg.model, resolve=True)
        with torch.device("meta"):
            net = build_model(m.pop("name"), tuple(cfg.dataset.shape), cfg.dataset.num_classes, **m)
        params = sum(p.numel() for p in net.parameters())
        assert cfg.hardware.compute.per_sample_s == pytest.approx(6 * params / 1e11, rel=2e-3), scale
        assert cfg.hardware.compute.overhead_s == 0.0
