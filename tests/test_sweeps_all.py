"""sweeps/run_all.py iterates sweeps/entries.yaml: every entry at each scale it has, the schedule-only ones at their
paper scale, the JPEG cost first at ``full``."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import run_all  # noqa: E402
from sweeps.entries import ENTRIES  # noqa: E402


def test_every_entry_point_is_run_at_the_scales_it_has():
    for scale in run_all.RUN_ALL_SCALES:
        got = dict(run_all.commands(scale))
        for name, e in ENTRIES.items():
            along, at = e.run_all or (tuple(e.scales), scale)
            assert (name in got) == (scale in along), (name, scale)
            if name in got:
                assert got[name][1:5] == ["-m", "sweeps", name, f"scale={at}"], (name, scale)


def test_commands_per_scale_and_filter(capsys):
    ci = dict(run_all.commands("ci"))
    assert ci["agn_fig7a"][-1] == "scale=ci" and "agn_fig7b" in ci
    assert ci["rudra_table2"][-1] == "scale=ci"
    for name in run_all.SIMULATION_ONLY:  # schedules run their paper scale whatever run_all's scale
        assert ci[name][-1] == "scale=paper", name
        assert dict(run_all.commands("small"))[name][-1] == "scale=paper", name
    assert "rudra_fig4_lambda" in run_all.SIMULATION_ONLY
    assert not [n for n, _ in run_all.commands("small") if n.startswith("agn")]  # AGN has ci and paper only
    assert [n for n, _ in run_all.commands("ci", ["terngrad"])] == ["terngrad_fig3", "terngrad_table1", "terngrad_fig5"]
    full = run_all.commands("full")  # the JPEG cost first, the CIFAR entry points at full, schedules at paper
    assert full[0] == ("cifar_jpeg_cost", full[0][1]) and full[0][1][-1] == "scale=ci"
    assert {n for n, a in full if a[-1] == "scale=full"} == {
        "rudra_table2",
        "rudra_table3",
        "rudra_fig5",
        "rudra_fig6_7",
        "zhang_fig3",
        "terngrad_table1",
        "terngrad_adam_pace",
        "rudra_table2_no_staleness",
        "rudra_table2_nominal",
    }
    assert {n for n, a in full if a[-1] == "scale=paper"} == set(run_all.SIMULATION_ONLY)
    assert [n for n, _ in run_all.commands("paper_jpeg")] == ["rudra_fig5", "zhang_fig3", "rudra_table2_nominal"]
    assert "cifar_jpeg_cost" not in dict(run_all.commands("ci")) | dict(run_all.commands("paper"))
    assert run_all.main(["scale=huge"]) == 2
    assert "scale='huge' is invalid" in capsys.readouterr().err
