"""A protocol is declared once (:data:`psbench.ps.protocols.PROTOCOLS`): its config keys, checks and one label.

The ``protocol`` group's declaration, the run names, the local-step family and α0/n's protocols are derived from
it, and a new protocol is two files: its entry and its ``conf/protocol/<name>.yaml``.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from psbench.lr.policies import NOMINAL_PROTOCOLS
from psbench.ps import Protocol
from psbench.ps.local import ELASTIC, LOCAL_PROTOCOLS
from psbench.ps.options import PROTOCOL, build_protocol
from psbench.ps.protocols import PROTOCOLS
from psbench.tracking.run_info import protocol_label

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize(
    ("node", "label"),
    [
        ({"name": "hardsync"}, "hardsync"),
        ({"name": "softsync", "n": 4}, "4-softsync"),
        ({"name": "async"}, "async"),
        ({"name": "ssp", "staleness_bound": 2}, "ssp-s2"),
        ({"name": "agn", "local_steps": 10}, "agn-H10"),
        ({"name": "aeasgd", "local_steps": 10, "rho": 5.0}, "aeasgd-H10-ρ5"),
    ],
)
def test_one_label_for_the_summary_the_schedule_and_the_run_name(node, label):
    """summary.json and the schedule's metadata say ``Protocol.label``; the MLflow run name starts with the same."""
    protocol = build_protocol({"learners": 30, "protocol": node})
    assert protocol.label == protocol_label(node) == label


def test_the_group_and_the_families_are_derived_from_the_declarations():
    assert PROTOCOL.options == {name: dict(d.keys) for name, d in PROTOCOLS.items()}
    assert LOCAL_PROTOCOLS == ("downpour", "agn", "aeasgd", "dynsgd") and ELASTIC == ("aeasgd",)
    assert NOMINAL_PROTOCOLS == ("hardsync", "softsync", "async")
    p = Protocol("softsync", 30, n=4)
    assert (p.gradients_per_update, p.barrier, p.bound, p.splitting) == (7, False, None, 4)
    assert Protocol("hardsync", 30).barrier and Protocol("ssp", 30, staleness_bound=3).bound == 3


TOY = """
    # a toy: the PS updates after any 2 gradients (λ/2-softsync for any λ)
    "pairs": Declared(c=lambda p: min(2, p.learners), splitting=lambda p: max(1, p.learners // 2)),
"""


def test_a_new_protocol_is_its_declaration_and_its_yaml(tmp_path):
    """In a copy of the package, the toy protocol ``pairs`` is one entry of ``PROTOCOLS`` and one option file: the
    psbench command validates, simulates and labels it (run name included), and ``lr_policy=nominal_staleness``
    takes it (it declares n) — no other file changes."""
    copy = tmp_path / "src"
    shutil.copytree(SRC / "psbench", copy / "psbench", ignore=shutil.ignore_patterns("__pycache__"))
    protocols = copy / "psbench" / "ps" / "protocols.py"
    text = protocols.read_text()
    anchor = "PROTOCOLS: dict[str, Declared] = {\n"
    protocols.write_text(text.replace(anchor, anchor + TOY.lstrip("\n")))
    (copy / "psbench" / "conf" / "protocol" / "pairs.yaml").write_text(
        "# the PS updates after any 2 gradients\nname: pairs\n"
    )
    changed = _changed(SRC / "psbench", copy / "psbench")
    assert changed == ["conf/protocol/pairs.yaml", "ps/protocols.py"]

    env = {**os.environ, "PYTHONPATH": str(copy)}
    args = ["protocol=pairs", "learners=6", "batch_size=32", "epochs=2", "lr_policy=nominal_staleness"]
    proc = subprocess.run(
        [sys.executable, "-m", "psbench", *args, "schedule_only=true", "logger=none", f"hydra.run.dir={tmp_path}/run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["protocol"] == "pairs" and summary["gradients"] == 2 * summary["ps_updates"]
    assert summary["staleness_max"] >= 1  # not hardsync: stale gradients
    code = (
        "from psbench.tracking.run_info import run_name; import psbench, sys; "
        "print(psbench.__file__); print(run_name({'protocol': {'name': 'pairs'}, 'learners': 6}, {}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    where, name = out.stdout.split()
    assert where.startswith(str(copy)) and name == "pairs-λ6"


def _changed(a: Path, b: Path) -> list[str]:
    """The files that differ between two trees, or are in one only (relative paths, sorted)."""
    out: list[str] = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        out.extend(prefix + f for f in (*cmp.diff_files, *cmp.left_only, *cmp.right_only))
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(a, b, ignore=["__pycache__"]), "")
    return sorted(out)
