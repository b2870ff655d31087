"""Paper entries as data (issue 40, item 4): ``sweeps/entries.yaml`` lists every entry (preset, scales, resources, the
cost note); ``python -m sweeps <entry> scale=…`` runs one and ``sweeps.run_all`` iterates the same file; the docs'
entry table is generated from it. Every study resumes by its identity, so each entry's command line to psbench is
byte-identical to the one the per-entry scripts it replaces made (``tests/sweep_commands.json``, captured from them
at every scale, with and without ``--serial`` and a user override).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import _runner, entries  # noqa: E402
from sweeps.__main__ import main  # noqa: E402

from psbench.conf import CONF_DIR  # noqa: E402

GOLDEN = json.loads((Path(__file__).parent / "sweep_commands.json").read_text())


@pytest.fixture
def two_cores(monkeypatch):
    """The machine the commands were captured on: two usable cores, Hydra's joblib launcher installed."""
    monkeypatch.setattr(_runner, "usable_cores", lambda: 2)
    from psbench import launchers

    monkeypatch.setattr(launchers, "installed", lambda name: True)


@pytest.mark.parametrize("i", range(len(GOLDEN)), ids=[f"{g['entry']}-{'-'.join(g['args'])}" for g in GOLDEN])
def test_every_entry_makes_the_command_its_script_made(i, two_cores, tmp_path):
    """The same psbench command line, byte for byte: the same study (its name, sweep dir and overrides), so a study
    started by ``python sweeps/<name>.py scale=…`` resumes under ``python -m sweeps <name> scale=…``."""
    g = GOLDEN[i]
    scale, cmd = entries.get(g["entry"]).command(g["args"], root=tmp_path)
    got = ["PY" if a == sys.executable else a.replace(str(tmp_path), "{root}") for a in cmd]
    assert got == g["argv"]
    assert f"scale={scale}" in g["args"]


def test_every_entry_runs_a_preset_that_exists_at_scales_it_names():
    for e in entries.ENTRIES.values():
        assert e.what and e.scales and set(e.scales) <= {"ci", "small", "full", "paper_jpeg", "paper"}, e.name
        if e.module:
            continue
        presets = {e.preset} if isinstance(e.preset, str) else set(e.preset.values())
        for preset in presets:
            assert (CONF_DIR / "experiment" / f"{preset}.yaml").is_file(), (e.name, preset)
        if e.run_all:
            assert e.run_all[1] in e.scales, e.name
    # a scale may reuse another entry's overrides: Table 3 runs on Table 2's data, the Table 2 studies alike
    t2 = entries.get("rudra_table2").scales
    assert entries.get("rudra_table3").scales == t2
    assert entries.get("rudra_table2_nominal").scales["full"] == t2["full"]
    assert entries.get("rudra_table2_no_staleness").scales == {"full": t2["full"]}


def test_a_new_paper_table_is_one_entry(tmp_path):
    """A file with one more entry gives one more command, study and docs row; a key the file does not know is
    refused."""
    extra = tmp_path / "entries.yaml"
    extra.write_text(
        entries.FILE.read_text()
        + "\nmy_table:\n  what: My table\n  preset: rudra/table1\n  scales:\n    ci: [trainer.max_updates=5]\n"
    )
    mine = entries.load(extra)
    assert list(mine)[-1] == "my_table" and len(mine) == len(entries.ENTRIES) + 1
    _, cmd = mine["my_table"].command(["scale=ci", "--serial"])
    assert cmd[3:6] == ["-m", "experiment=rudra/table1", "trainer.max_updates=5"]
    assert "hydra.sweeper.study_name=my_table_ci" in cmd
    assert "| `python -m sweeps my_table scale=ci` | My table | — | — |" in entries.table_md(mine)
    extra.write_text(entries.FILE.read_text() + "\nbad:\n  wat: x\n  scales: {ci: []}\n")
    with pytest.raises(ValueError, match=r"bad: unknown keys \['wat'\]"):
        entries.load(extra)


def test_bad_entry_or_scale_is_one_line_and_exit_2(capsys):
    assert main(["rudra_fig4", "scale=huge"]) == 2
    assert (
        capsys.readouterr().err.strip() == "rudra_fig4: error: scale='huge' is invalid: allowed one of ci, small, paper"
    )
    assert main(["nosuch", "scale=ci"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sweeps: error: no entry 'nosuch': one of cifar_jpeg_cost, rudra_table1,") and "\n" not in err
    assert main(["--list"]) == 0 and "rudra_table2_nominal         full paper_jpeg" in capsys.readouterr().out


def test_the_docs_entry_table_is_generated_from_the_file():
    table = entries.table_md()
    for e in entries.ENTRIES.values():
        assert f"| `python -m sweeps {e.name} scale=" in table, e.name
    assert "| `python -m sweeps rudra_fig4 scale=paper` | Rudra Fig 4, staleness of 1/2/30-softsync" in table
    index = (REPO / "docs" / "papers" / "index.md").read_text()
    assert "<!-- psbench:paper-entries -->" in index and "| `python sweeps/" not in index


def test_python_m_sweeps_runs_from_the_repository_root_into_the_store(tmp_path):
    """The runner prints the psbench command and runs it in ``$PSBENCH_ROOT``: a launcher that does not exist stops
    it at once (exit 2), after the command is printed."""
    env = {"PSBENCH_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps", "zhang_fig1", "scale=paper", "hydra/launcher=nosuch"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    [cmd] = [line for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert "hydra.sweeper.study_name=zhang_fig1_paper" in cmd.split() and "resources=ci" in cmd.split()


def test_every_sweeps_command_the_docs_and_presets_show_names_an_entry_and_its_scale():
    """``python -m sweeps <entry> scale=<s>`` as the README, the docs, the analysis pages and the presets' comments
    write it: the entry exists and has the scale (no page points at a script that is gone)."""
    import re

    pages = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "analysis").rglob("*.py")]
    pages += [*(CONF_DIR / "experiment").rglob("*.yaml"), entries.FILE]
    seen = 0
    for page in pages:
        if page.name == "changelog.md":  # the record of what was run then, as it was run
            continue
        text = page.read_text().replace("\\_", "_")  # the generated verdicts page escapes underscores
        assert not re.search(r"python sweeps/\w+\.py", text), page
        for m in re.finditer(r"python -m sweeps ([a-z]\w*)(?: scale=(\w+))?", text):
            assert m[1] in entries.ENTRIES, (page, m[0])
            assert m[2] is None or m[2] in entries.ENTRIES[m[1]].scales, (page, m[0])
            seen += 1
    assert seen > 50
