"""sweeps entries for Rudra Tables 3–4 and Figs 5–8: scales, presets' cases vs the paper, sub-grids."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from psbench.cli import CONF_DIR

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.pages import rudra_paper as P  # noqa: E402
from sweeps._runner import CIFAR_SCALES, SCALES, command  # noqa: E402

from sweep_entry import entry  # noqa: E402

WITH_PAPER_JPEG = ("ci", "small", "full", "paper_jpeg", "paper")
rudra_fig5, rudra_fig6_7, rudra_fig8 = entry("rudra_fig5"), entry("rudra_fig6_7"), entry("rudra_fig8")
rudra_table2, rudra_table3, rudra_table4 = entry("rudra_table2"), entry("rudra_table3"), entry("rudra_table4")

PRESETS = CONF_DIR / "experiment/rudra"


def cases(name: str) -> dict:
    return yaml.safe_load((PRESETS / f"{name}.yaml").read_text())["hydra"]["sweeper"]["cases"]


@pytest.mark.parametrize("mod", [rudra_table3, rudra_table4, rudra_fig5, rudra_fig6_7, rudra_fig8])
def test_every_new_entry_point_has_its_scales_and_a_docstring_with_costs(mod):
    trains = mod in (rudra_table3, rudra_fig5, rudra_fig6_7)  # on CIFAR-10: also `full`
    assert tuple(mod.SCALES) == (WITH_PAPER_JPEG if mod is rudra_fig5 else CIFAR_SCALES if trains else SCALES)
    for scale in mod.SCALES:
        assert f"``{scale}``" in mod.__doc__
    assert all(any(a.startswith("++tags.data_note=") for a in mod.SCALES[s]) for s in mod.SCALES if s != "paper")


def test_table3_runs_on_table2_data_so_the_report_can_rank_them_together():
    assert rudra_table3.SCALES == rudra_table2.SCALES  # sweeps/entries.yaml: rudra_table2.<scale>
    cmd = command("rudra_table3", "rudra/table3", rudra_table3.SCALES["ci"], "ci")
    assert "experiment=rudra/table3" in cmd and "hydra.sweeper.study_name=rudra_table3_ci" in cmd


def test_table3_preset_runs_the_two_hardsync_rows_of_the_paper(compose_cfg):
    want = {P.case_label(s, mu, lam): (mu, lam) for s, mu, lam, *_ in P.TABLE3 if s == 0}
    got = cases("table3")
    assert set(got) == set(want) == {"s0_mu8_lam30", "s0_mu4_lam30"}
    for label, (mu, lam) in want.items():
        assert (got[label]["batch_size"], got[label]["learners"]) == (mu, lam)
    cfg = compose_cfg("experiment=rudra/table3")
    assert (cfg.protocol.name, cfg.lr_policy.name, cfg.lr_policy.reference_batch) == ("hardsync", "sqrt_scaling", 128)
    assert cfg.tags.table == "3" and cfg.optimizer.lr == 0.001


def test_fig5_preset_has_the_four_curves_on_the_single_run_presets(compose_cfg):
    got = cases("fig5")
    assert set(got) == set(P.FIG5)
    for label, (n, rule) in P.FIG5.items():
        assert got[label]["protocol.n"] == n
        assert got[label]["lr_policy"] == ("constant" if rule == "α0" else "mean_staleness")
    cfg = compose_cfg("experiment=rudra/fig5")
    assert (cfg.learners, cfg.batch_size, cfg.protocol.name, cfg.tags.figure) == (30, 128, "softsync", "5")


def _family(s: int, lam: int) -> str:
    return "hardsync" if s == 0 else "λ-softsync" if s == lam else "1-softsync"


def test_fig6_7_preset_is_the_paper_grid_with_each_protocols_learning_rate_rule():
    got = cases("fig6_7")
    assert len(got) == 6 * 6 + 5 * 6 + 5 * 6
    keys = {P.parse_case(label) for label in got}
    for s, mu, lam in keys:
        assert mu in P.MUS and lam in P.LAMBDAS and s in (0, 1, lam)
        c = got[P.case_label(s, mu, lam)]
        assert (c["batch_size"], c["learners"]) == (mu, lam)
        if s == 0:
            assert (c["protocol"], c["lr_policy"]) == ("hardsync", "sqrt_scaling")  # §5.2: α0·√(μλ/128)
        else:
            assert (c["protocol"], c["protocol.n"], c["lr_policy"]) == ("softsync", s, "mean_staleness")  # Eq 6
    for fam in ("hardsync", "λ-softsync", "1-softsync"):  # every family has the whole λ × μ grid (λ = 1 shared)
        pts = {(mu, lam) for s, mu, lam in keys if lam == 1 or _family(s, lam) == fam}
        assert len(pts) == 36, fam


@pytest.mark.parametrize(("scale", "n"), [("ci", 14), ("small", 48), ("full", 14), ("paper", 96)])
def test_fig6_7_scales_keep_a_sub_grid_through_the_sweepers_constraint(scale, n):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.psbench_optuna_sweeper._search_space import case_overrides, case_values, evaluate

    constraints: list[str] = []
    for o in OverridesParser.create().parse_overrides(rudra_fig6_7.SCALES[scale]):
        if o.get_key_element() == "hydra.sweeper.constraints":
            constraints = list(o.value())
    kept = [
        label
        for label, ov in case_overrides(cases("fig6_7")).items()
        if all(evaluate(c, {**case_values(ov), "case": label}) for c in constraints)
    ]
    assert len(kept) == n
    if scale == "ci":  # every kept case has at least one update in one epoch of the 5,085-image subset
        assert "epochs=1" in rudra_fig6_7.SCALES[scale] and "dataset=cifar10_subset" in rudra_fig6_7.SCALES[scale]
        assert all(P.parse_case(k)[1] * P.parse_case(k)[2] <= 5_085 for k in kept)


def test_fig8_preset_is_simulation_only_for_mu_4_and_128():
    got = cases("fig8")
    keys = {P.parse_case(label) for label in got}
    assert len(keys) == 2 * (6 + 5 + 5)
    assert {mu for _, mu, _ in keys} == {4, 128} and {lam for *_, lam in keys} == set(P.LAMBDAS)
    assert yaml.safe_load((PRESETS / "fig8.yaml").read_text())["schedule_only"] is True


def test_table4_preset_has_the_papers_four_configurations_and_an_alexnet_sized_model(compose_cfg):
    import torch

    from psbench.models import build_model, model_bytes

    got = cases("table4")
    assert len(got) == len(P.TABLE4)
    for name, arch, mu, lam, proto, *_ in P.TABLE4:
        c = got[name.replace("*", "_star")]
        assert (c["topology"], c["batch_size"], c["learners"]) == (arch, mu, lam)
        assert c["protocol"] == ("hardsync" if proto == "Hardsync" else "softsync")
        assert c.get("protocol.n", 1) == 1
    cfg = compose_cfg("experiment=rudra/table4")
    assert cfg.schedule_only and cfg.model.name == "alexnet"
    with torch.device("meta"):
        net = build_model("alexnet", list(cfg.dataset.shape), cfg.dataset.num_classes)
    assert abs(model_bytes(net) / 1e6 - P.IMAGENET["model_mb"]) / P.IMAGENET["model_mb"] < 0.05  # 298 vs 289 MB
    c = cfg.hardware.compute  # fitted: the baseline (μ, λ) = (256, 1) takes the paper's 54 h per epoch
    hours = (c.overhead_s + c.per_sample_s * 256) * P.IMAGENET["train_images"] / 256 / 3600
    assert hours == pytest.approx(P.IMAGENET["baseline_hours_per_epoch"], rel=0.01)
