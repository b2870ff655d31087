"""The CIFAR entry points of Rudra and Zhang run ≥ 3 seeds at ci and small (issue 17, "scales that decide").

The report decides a learning claim only with ≥ 3 seeds per configuration (analysis.core.MIN_SEEDS), so a scale
that runs one seed can only say "not measured". Each test composes the sweep's whole config (the preset, then the
scale's overrides, ``hydra.*`` included, as ``sweeps/_runner.command`` passes them) and reads the seed space the
sweeper builds from it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.core import MIN_SEEDS  # noqa: E402
from sweeps import rudra_fig5, rudra_fig6_7, rudra_table2, rudra_table3, zhang_fig3  # noqa: E402
from sweeps._runner import command  # noqa: E402

ENTRY = {"rudra/table2": rudra_table2, "rudra/table3": rudra_table3, "rudra/fig5": rudra_fig5,
         "rudra/fig6_7": rudra_fig6_7, "zhang/fig3": zhang_fig3}


def sweep_seeds(preset: str, scale: str, tmp_path: Path) -> tuple[int, ...]:
    """The seeds the sweeper of ``python sweeps/<entry>.py scale=<scale>`` runs: the composed
    ``hydra.sweeper.params.seed`` (the preset's, unless the scale overrides it), parsed as the sweeper does."""
    from hydra import compose, initialize_config_dir

    import psbench.cli
    from hydra_plugins.psbench_optuna_sweeper._search_space import parse

    mod = ENTRY[preset]
    cmd = command(Path(mod.__file__).stem, preset, mod.SCALES[scale], scale)
    overrides = [a for a in cmd[cmd.index("psbench.cli") + 2:] if not a.startswith("resources=")]
    with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[f"paths.root_dir={tmp_path}", *overrides])
    params = {k: str(v) for k, v in cfg.hydra.sweeper.params.items()}
    space, _ = parse(params, [])
    return tuple(space["seed"].choices)


@pytest.mark.parametrize("scale", ["ci", "small", "paper"])
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
