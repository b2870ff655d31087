"""sweeps/: entry points per paper table/figure (``sweeps/entries.yaml``), their scales and fixed study names.

The long runs are slow tests: Fig 4 and Table 1 at scale=paper (< 5 min each is the acceptance).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from psbench.cli import CONF_DIR

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps.__main__ import main  # noqa: E402
from sweeps._runner import CIFAR_SCALES, SCALES, command  # noqa: E402
from sweeps.entries import get  # noqa: E402


@pytest.mark.parametrize(
    ("name", "scales"), [("rudra_table1", SCALES), ("rudra_fig4", SCALES), ("rudra_table2", CIFAR_SCALES)]
)
def test_every_entry_point_has_its_scales(name, scales):
    assert tuple(get(name).scales) == scales  # the CIFAR ones also `full`: all 60,000 images


def test_command_has_a_fixed_study_name_per_scale_and_tags_the_scale():
    cmd = command("rudra_table2", "rudra/table2", get("rudra_table2").scales["ci"], "ci")
    assert cmd[3:5] == ["-m", "experiment=rudra/table2"]
    assert "hydra.sweeper.study_name=rudra_table2_ci" in cmd and "++tags.scale=ci" in cmd
    assert "dataset=cifar10_subset" in cmd  # the substitution, labelled by tags.data_note
    assert any(a.startswith("++tags.data_note=") for a in cmd)


def test_bad_scale_is_one_line_and_exit_2(capsys):
    assert main(["rudra_fig4", "scale=huge"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rudra_fig4: error: scale='huge' is invalid: allowed one of ci, small, paper"


def test_table2_preset_has_all_23_rows_as_cases(compose_cfg):
    from analysis.pages.rudra_paper import TABLE2, case_label

    cfg = compose_cfg("experiment=rudra/table2")
    cases = cfg.hydra.sweeper.cases if "hydra" in cfg else None
    if cases is None:  # the compose API drops the hydra node: read the yaml
        import yaml

        cases = yaml.safe_load((CONF_DIR / "experiment/rudra/table2.yaml").read_text())["hydra"]["sweeper"]["cases"]
    want = {case_label(s, mu, lam): (s, mu, lam) for rows in TABLE2.values() for s, mu, lam, _, _ in rows}
    assert set(cases) == set(want) and len(want) == 23
    for label, (s, mu, lam) in want.items():
        c = cases[label]
        assert (c["batch_size"], c["learners"]) == (mu, lam)
        assert c.get("protocol.n", 0) == s


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rudra_fig4", "rudra_table1"])
def test_simulation_sweeps_run_at_paper_scale_in_under_5_minutes(name, psbench_root, mlflow_runs):
    import time

    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "sweeps", name, "scale=paper"],
        cwd=REPO,  # `-m sweeps` from the repository root; the runner works in PSBENCH_ROOT
        env={**__import__("os").environ, "PSBENCH_ROOT": str(psbench_root)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert time.perf_counter() - t0 < 300
    runs = [r for r in mlflow_runs(psbench_root) if r["status"] == "FINISHED"]
    assert len(runs) == 3 and {r["tags"]["scale"] for r in runs} == {"paper"}


def test_every_paper_study_takes_the_shared_grid_settings_and_restates_none(tmp_path):
    """What every paper study shares (the psbench_optuna sweeper, a grid sampler, the whole grid, the sweep dir
    ``<root>/sweeps/<study_name>``) is stated once, in ``conf/hydra/study/grid.yaml``: every preset that composes a
    psbench_optuna study gets those values and none restates them in its own file."""
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    shared = yaml.safe_load((CONF_DIR / "hydra" / "study" / "grid.yaml").read_text())["hydra"]
    presets = CONF_DIR / "experiment"
    studies = []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for path in sorted(presets.rglob("*.yaml")):
            preset = path.relative_to(presets).with_suffix("").as_posix()
            cfg = compose("config", [f"paths.root_dir={tmp_path}", f"experiment={preset}"], return_hydra_config=True)
            own = yaml.safe_load(path.read_text())
            mine = own.get("hydra") or {}
            assert "sweep" not in mine and not {"sampler", "n_trials"} & set(mine.get("sweeper") or {}), preset
            assert "override /hydra/sweeper" not in str(own.get("defaults")), preset
            if cfg.hydra.runtime.choices["hydra/sweeper"] != "psbench_optuna":
                continue
            studies.append(preset)
            hydra = OmegaConf.to_container(cfg.hydra, resolve=False)
            assert hydra["sweep"]["dir"] == shared["sweep"]["dir"], preset
            assert {k: hydra["sweeper"]["sampler"][k] for k in shared["sweeper"]["sampler"]} == shared["sweeper"][
                "sampler"
            ] and hydra["sweeper"]["n_trials"] is None, preset
    assert {"rudra/table2", "rudra/fig5", "zhang/fig3", "ssp/fig2_4", "terngrad/table1"} <= set(studies)


def test_agn_fig7_is_one_entry_per_panel():
    """AGN Fig 7's two panels are two entries (two studies, as the one script with ``--panel`` ran them)."""
    for panel in "ab":
        _, cmd = get(f"agn_fig7{panel}").command(["scale=ci"])
        assert f"experiment=agn/fig7{panel}" in cmd and f"hydra.sweeper.study_name=agn_fig7{panel}_ci" in cmd
