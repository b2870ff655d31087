"""A regular (not editable) install: the wheel carries the Hydra config, and ``psbench`` and
``python -m psbench`` run from a directory outside the repository.

The wheel is built from a copy of the sources (the build writes ``build/`` and ``*.egg-info``) and
installed with pip into a fresh venv; no network: its dependencies come from this environment's
site-packages through a ``.pth`` line (which does not process the ``.pth`` of this checkout's
editable install, so ``psbench`` is imported from the wheel only).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


def test_pip_install_dot_runs_psbench_and_python_m_psbench_outside_the_repo(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / name, tree / name)
    wheels = tmp_path / "wheels"
    build = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        wheels,
        tree,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("psbench-*.whl")

    venv = tmp_path / "venv"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    python = venv / "bin" / "python"
    (purelib,) = (venv / "lib").glob("python3.*/site-packages")
    (purelib / "_psbench_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = _run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path
    )
    assert install.returncode == 0, install.stderr[-3000:]
    assert (purelib / "psbench" / "conf" / "config.yaml").is_file()
    assert (purelib / "hydra_plugins" / "psbench_optuna_sweeper" / "sweeper.py").is_file()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PSBENCH_DATA", "PSBENCH_ROOT", "PYTHONPATH", "HYDRA_FULL_ERROR")
    }
    where = _run(python, "-c", "import psbench; print(psbench.__file__)", cwd=elsewhere, env=env)
    assert Path(where.stdout.strip()).is_relative_to(purelib), where.stdout + where.stderr

    train = _run(venv / "bin" / "psbench", "epochs=0.1", "logger=none", "trainer.progress=none", cwd=elsewhere, env=env)
    assert train.returncode == 0, train.stderr[-3000:]
    (summary_file,) = (elsewhere / "outputs").rglob("summary.json")
    assert json.loads(summary_file.read_text())["status"] == "finished"
    resolved = (summary_file.parent / "resolved_config.yaml").read_text()
    assert f"data_dir: {elsewhere / 'data'}" in resolved  # no repository around: <root>/data

    helped = _run(python, "-m", "psbench", "--help", cwd=elsewhere, env=env)
    assert helped.returncode == 0, helped.stderr[-3000:]
    assert "== Config groups" in helped.stdout and "rudra/fig5_30softsync" in helped.stdout

    bad = _run(python, "-m", "psbench", "protocol=foo", cwd=elsewhere, env=env)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("psbench: error: protocol='foo' is invalid: allowed one of")
    assert "hardsync" in bad.stderr  # the options are read from the installed conf/
