"""sweeps entries terngrad_*: three scales, presets that compose and validate, the paper's cases and iterations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from psbench.cli import CONF_DIR

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.pages import terngrad_paper  # noqa: E402
from sweeps.__main__ import main as sweep  # noqa: E402
from sweeps._runner import CIFAR_SCALES, SCALES, command  # noqa: E402

from sweep_entry import entry  # noqa: E402

terngrad_fig3, terngrad_table1 = entry("terngrad_fig3"), entry("terngrad_table1")
ENTRY = {"terngrad/fig3": terngrad_fig3, "terngrad/table1": terngrad_table1}


def _cases(preset: str) -> dict:
    return yaml.safe_load((CONF_DIR / f"experiment/{preset}.yaml").read_text())["hydra"]["sweeper"]["cases"]


def _case_overrides(body: dict) -> list[str]:
    return [f"{k}={'null' if v is None else v}" for k, v in body.items()]


def _kept(preset: str, scale_overrides: list[str]) -> set[str]:
    """The cases a scale runs: those its sweeper constraints (if any) let through."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.psbench_optuna_sweeper._search_space import case_overrides, case_values, evaluate

    exprs: list[str] = []
    for o in scale_overrides:
        if o.startswith("hydra.sweeper.constraints="):
            exprs = list(OverridesParser.create().parse_overrides([o])[0].value())
    cases = case_overrides(_cases(preset))
    return {
        label for label, over in cases.items() if all(evaluate(e, {**case_values(over), "case": label}) for e in exprs)
    }


def _updates(cfg, num_train: int) -> int:
    from psbench.assemble import total_gradients
    from psbench.ps import Protocol

    g = total_gradients(cfg, num_train, Protocol("hardsync", int(cfg.learners)))
    return g // int(cfg.learners)


@pytest.mark.parametrize("preset", sorted(ENTRY))
def test_entry_points_have_their_scales_a_fixed_study_and_compose_at_each(preset, compose_preset, jpeg_data_dir):
    mod = ENTRY[preset]
    assert tuple(mod.SCALES) == (CIFAR_SCALES if preset == "terngrad/table1" else SCALES)  # CifarNet: also `full`
    name = mod.NAME
    for scale in mod.SCALES:
        cmd = command(name, preset, mod.SCALES[scale], scale)
        assert f"hydra.sweeper.study_name={name}_{scale}" in cmd and f"++tags.scale={scale}" in cmd
        cfg = compose_preset(preset, *mod.SCALES[scale], jpeg_data_dir)
        assert cfg.tags.paper == "terngrad"
        assert (scale == "paper") != ("data_note" in cfg.tags)  # every substitution is labelled
    assert "min" in (mod.__doc__ or "")  # says what it costs here


def test_fig3_cases_are_both_panels_every_n_total_batch_64(compose_preset):
    cases = _cases("terngrad/fig3")
    ns = (2, 4, 8, 16, 32, 64)
    want = {f"{p}_{g}_n{n}" for p in ("momentum", "vanilla") for g in ("fp32", "terngrad") for n in ns}
    assert set(cases) == want | {f"momentum_noclip_n{n}" for n in ns}
    for label, c in cases.items():
        assert c["learners"] * c["batch_size"] == 64, label
        assert (c["optimizer.lr"], c["optimizer.momentum"]) == (
            (0.01, 0.9) if label.startswith("momentum") else (0.1, 0.0)
        )
        assert c["compression"] == ("none" if "_fp32_" in label else "terngrad")
        assert ("compression.clip" in c) == ("_noclip_" in label) and c.get("compression.clip") is None
    cfg = compose_preset("terngrad/fig3", *_case_overrides(cases["vanilla_terngrad_n64"]))
    assert (cfg.learners, cfg.batch_size, cfg.compression.name, cfg.compression.clip) == (64, 1, "terngrad", 2.5)
    assert (cfg.model.name, cfg.dataset.name, cfg.protocol.name, cfg.optimizer.weight_decay) == (
        "lenet",
        "mnist",
        "hardsync",
        0.0005,
    )
    assert cfg.optimizer.poly_power == 0.5 and cfg.optimizer.poly_epochs == cfg.epochs
    noclip = compose_preset("terngrad/fig3", *_case_overrides(cases["momentum_noclip_n8"]))
    assert noclip.compression.clip is None


@pytest.mark.parametrize(
    ("scale", "updates", "kept"),
    [
        (
            "ci",
            300,
            {
                "momentum_fp32_n2",
                "momentum_terngrad_n2",
                "momentum_noclip_n2",
                "momentum_fp32_n8",
                "momentum_terngrad_n8",
            },
        ),
        (
            "small",
            2000,
            {f"{p}_{g}_n{n}" for p in ("momentum", "vanilla") for g in ("fp32", "terngrad") for n in (2, 8, 32)}
            | {f"momentum_noclip_n{n}" for n in (2, 8, 32)},
        ),
        ("paper", 10_000, None),
    ],
)
def test_fig3_scales_run_their_sub_grid_for_their_iterations(compose_preset, scale, updates, kept):
    """Paper: "maximum iteration is 10K" for every N (μ = 64/N on MNIST's 60,000 images)."""
    over = terngrad_fig3.SCALES[scale]
    got = _kept("terngrad/fig3", over)
    assert got == (kept if kept is not None else set(_cases("terngrad/fig3")))
    for n in (2, 8, 64) if scale == "paper" else (2, 8):
        cfg = compose_preset("terngrad/fig3", *over, f"learners={n}", f"batch_size={64 // n}")
        assert _updates(cfg, 60_000) == updates


def test_table1_cases_are_the_papers_rows_with_the_same_epochs(compose_preset):
    cases = _cases("terngrad/table1")
    assert set(cases) == {f"{g}_n{n}" for g in ("fp32", "terngrad", "noclip") for n in (2, 16)}
    for n, (total, iterations, _, _) in terngrad_paper.TABLE1.items():
        c = cases[f"terngrad_n{n}"]
        assert c["learners"] == n and c["learners"] * c["batch_size"] == total
        cfg = compose_preset("terngrad/table1", *_case_overrides(c))
        assert (cfg.model.name, cfg.dataset.name, cfg.optimizer.name, cfg.optimizer.lr) == (
            "cifarnet",
            "cifar10",
            "adam",
            0.0002,
        )
        assert _updates(cfg, 50_000) == float(iterations.rstrip("K")) * 1000
    assert _kept("terngrad/table1", terngrad_table1.SCALES["ci"]) == set(cases) - {"noclip_n16"}
    ci = compose_preset("terngrad/table1", *terngrad_table1.SCALES["ci"])
    assert (ci.dataset.name, ci.dataset.subset) == ("cifar10_subset", 2560)


def test_fig5_entry_point_refuses_an_unknown_scale(capsys):
    assert sweep(["terngrad_fig5", "scale=huge"]) == 2
    assert "scale='huge' is invalid: allowed one of ci, small, paper" in capsys.readouterr().err
