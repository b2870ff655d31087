"""sweeps/run_all.py covers every entry point of sweeps/ at each scale it has."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import run_all  # noqa: E402


def test_every_entry_point_is_run_at_the_scales_it_has():
    names = {p.stem for p in (REPO / "sweeps").glob("*.py") if not p.stem.startswith("_") and p.stem != "run_all"}
    assert set(run_all.ENTRY_POINTS) == names
    for name, scales in run_all.ENTRY_POINTS.items():
        mod = importlib.import_module(f"sweeps.{name}")
        assert tuple(getattr(mod, "SCALES", None) or run_all.ENTRY_POINTS[name]) == scales, name


def test_commands_per_scale_and_filter(capsys):
    ci = dict(run_all.commands("ci"))
    assert ci["agn_fig7 7a"][-2:] == ["scale=ci", "--panel=a"] and "agn_fig7 7b" in ci
    assert ci["rudra_table2"][-1] == "scale=ci"
    for name in run_all.SIMULATION_ONLY:  # schedules run their paper scale whatever run_all's scale
        assert ci[name][-1] == "scale=paper", name
        assert dict(run_all.commands("small"))[name][-1] == "scale=paper", name
    assert not [n for n, _ in run_all.commands("small") if n.startswith("agn")]  # AGN has ci and paper only
    assert [n for n, _ in run_all.commands("ci", ["terngrad"])] == ["terngrad_fig3", "terngrad_table1", "terngrad_fig5"]
    full = run_all.commands("full")  # the JPEG cost first, the CIFAR entry points at full, schedules at paper
    assert full[0] == ("cifar_jpeg_cost", full[0][1]) and full[0][1][-1] == "scale=ci"
    assert {n for n, a in full if a[-1] == "scale=full"} == {
        *run_all.CIFAR,
        "terngrad_adam_pace",
        "rudra_table2_no_staleness",
        "rudra_table2_nominal",
    }
    assert {n for n, a in full if a[-1] == "scale=paper"} == set(run_all.SIMULATION_ONLY)
    assert "cifar_jpeg_cost" not in dict(run_all.commands("ci")) | dict(run_all.commands("paper"))
    assert run_all.main(["scale=huge"]) == 2
    assert "scale='huge' is invalid" in capsys.readouterr().err
