"""Every training entry point runs ≥ 3 seeds at the scales where the report must decide.

The report decides a learning claim only with ≥ 3 seeds per configuration (analysis.verdicts.MIN_SEEDS), so a scale
that runs one seed can only say "not measured". Each test composes the sweep's whole config (the preset, then the
scale's overrides, ``hydra.*`` included, as ``sweeps._runner.command`` passes them) and reads the seed space the
sweeper builds from it. The CIFAR entry points of Rudra and Zhang run 3 seeds at every scale; TernGrad, SSP and AGN
at ``ci`` and ``small``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.verdicts import MIN_SEEDS  # noqa: E402
from sweeps._runner import command  # noqa: E402
from sweeps.entries import get  # noqa: E402

from sweep_entry import entry  # noqa: E402

ENTRY = {
    "rudra/table2": entry("rudra_table2"),
    "rudra/table3": entry("rudra_table3"),
    "rudra/fig5": entry("rudra_fig5"),
    "rudra/fig6_7": entry("rudra_fig6_7"),
    "zhang/fig3": entry("zhang_fig3"),
}


def _sweep_space(tmp_path: Path, cmd: list[str]) -> dict:
    """The Optuna search space the sweeper builds from a composed ``psbench -m`` command (its params + arguments)."""
    from hydra import compose, initialize_config_dir

    import psbench.cli
    from hydra_plugins.psbench_optuna_sweeper._search_space import parse

    overrides = cmd[cmd.index("psbench.cli") + 2 :]
    with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"paths.root_dir={tmp_path}", *overrides], return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=False)
    return parse({k: str(v) for k, v in params.items()}, [])[0]


def _study(tmp_path: Path, cmd: list[str]) -> tuple[list[str], str]:
    """The case labels and the ``hydra.sweep.dir`` (where the study and its trials' dirs live) of a composed
    ``psbench -m`` command."""
    from hydra import compose, initialize_config_dir

    import psbench.cli

    overrides = cmd[cmd.index("psbench.cli") + 2 :]
    with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"paths.root_dir={tmp_path}", *overrides], return_hydra_config=True)
    return list(cfg.hydra.sweeper.cases or []), str(cfg.hydra.sweep.dir)


def sweep_seeds(preset: str, scale: str, tmp_path: Path) -> tuple[int, ...]:
    """The seeds the sweeper of ``python -m sweeps <entry> scale=<scale>`` runs: the composed
    ``hydra.sweeper.params.seed`` (the preset's, unless the scale overrides it), parsed as the sweeper does."""
    mod = ENTRY[preset]
    cmd = command(mod.NAME, preset, mod.SCALES[scale], scale)
    return tuple(_sweep_space(tmp_path, cmd)["seed"].choices)


@pytest.mark.parametrize("scale", ["ci", "small", "full", "paper"])
@pytest.mark.parametrize("preset", sorted(ENTRY))
def test_every_scale_runs_at_least_three_seeds(preset, scale, tmp_path):
    seeds = sweep_seeds(preset, scale, tmp_path)
    assert len(set(seeds)) >= MIN_SEEDS == 3, seeds
    assert set(seeds) >= {0, 1, 2}


def test_a_preset_left_at_its_one_seed_is_caught(tmp_path):
    """The check reads the composed space: without the scale's seed override the preset's single seed shows."""
    mod = ENTRY["zhang/fig3"]
    saved = mod.SCALES["ci"]
    try:
        mod.SCALES["ci"] = [a for a in saved if not a.startswith("hydra.sweeper.params.seed=")]
        assert sweep_seeds("zhang/fig3", "ci", tmp_path) == (0,)
    finally:
        mod.SCALES["ci"] = saved


OPTUNA = {
    "terngrad/fig3": entry("terngrad_fig3"),
    "terngrad/table1": entry("terngrad_table1"),
    "ssp/fig2_4": entry("ssp_fig2_4"),
    "ssp/fig3_5": entry("ssp_fig3_5"),
}


@pytest.mark.parametrize(
    ("preset", "scale"), [(p, s) for p in sorted(OPTUNA) for s in OPTUNA[p].SCALES if s != "paper"]
)
def test_optuna_entry_points_sweep_three_seeds_below_paper_scale(tmp_path, preset, scale):
    mod = OPTUNA[preset]
    space = _sweep_space(tmp_path, command(mod.NAME, preset, mod.SCALES[scale], scale))
    assert sorted(space["seed"].choices) == [0, 1, 2] and len(space["seed"].choices) >= MIN_SEEDS


def test_agn_table1_ci_multirun_sweeps_three_seeds(tmp_path):
    """AGN Table 1 at ci: both optimizers' cells with seeds 0, 1, 2, in the scale's own study dir (a re-run resumes
    the study and adds only the missing (cell, seed) trials)."""
    _, cmd = get("agn_table1").command(["scale=ci"])
    space, (cases, sweep_dir) = _sweep_space(tmp_path, cmd), _study(tmp_path, cmd)
    assert sorted(space["seed"].choices) == [0, 1, 2] and len(space["seed"].choices) >= MIN_SEEDS
    assert {c.split("_")[0] for c in cases} == {"agn", "aeasgd"}
    assert sweep_dir == str(tmp_path / "sweeps" / "agn_table1_ci")


def test_agn_fig7_ci_runs_each_optimizer_with_three_seeds_in_their_own_dirs(tmp_path):
    dirs = set()
    for panel in "ab":
        _, cmd = get(f"agn_fig7{panel}").command(["scale=ci"])
        space, (cases, sweep_dir) = _sweep_space(tmp_path, cmd), _study(tmp_path, cmd)
        assert sorted(space["seed"].choices) == [0, 1, 2] and len(set(space["seed"].choices)) >= MIN_SEEDS
        assert set(cases) == {"agn", "aeasgd", "dynsgd"}
        dirs.add(sweep_dir)
    assert dirs == {str(tmp_path / "sweeps" / f"agn_fig7{p}_ci") for p in "ab"}
