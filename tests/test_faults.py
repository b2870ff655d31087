"""The fault suite (``-m fault``; in the default selection): what a user brings and what fails under a run.

Each case runs the real ``psbench`` command in a subprocess on a real sqlite store and real files in their
standard formats — the user's own modules in the directory psbench starts from, a PNG folder, an ``.npz``, a joblib
worker killed with SIGKILL, a sweep process killed under its workers, a small tmpfs that fills up — and asserts what
the project promises (:func:`_outcome`): the exit code, the one line printed (``psbench: error: …`` or none), the
job's ``summary.json`` and its MLflow status. Bad input is exit 2 before any MLflow run exists; a run that fails is
exit 1 with its run FAILED; every job that started leaves a ``summary.json``; no MLflow run stays RUNNING.

The full disk is a real one: a tmpfs of a few KiB mounted over the run dir (or the artifact folder) in a private
mount namespace of the command (``unshare --user --map-root-user --mount``: no root needed, nothing of it outlives
the command), so writes fail with ``ENOSPC`` where the kernel says so — Hydra's ``.hydra/``, a plot, a checkpoint,
an artifact upload — not where a test decided. ``RLIMIT_FSIZE`` would fail with ``EFBIG`` on every file past the
limit (the MLflow store too) and ``/dev/full`` only where a test put a link; neither is a full disk. The cases that
need the namespace skip where the kernel refuses it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.fault

#: the user's own code, in the directory psbench is started from: ``faulty.py`` (models and losses)
FAULTY = '''
import os
import signal
import time
from pathlib import Path

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, input_shape, num_classes):
        super().__init__()
        self.fc = nn.Linear(int(torch.tensor(input_shape).prod()), num_classes)

    def forward(self, x):
        return self.fc(x.flatten(1))


class TrainBoom(Tiny):
    """Passes the one-batch check (eval mode), raises once it trains."""

    def forward(self, x):
        if self.training:
            raise RuntimeError("boom while training")
        return super().forward(x)


class Frozen(Tiny):
    def __init__(self, input_shape, num_classes):
        super().__init__(input_shape, num_classes)
        for p in self.parameters():
            p.requires_grad_(False)


class NoParameters(nn.Module):
    def __init__(self, input_shape, num_classes):
        super().__init__()
        self.k = num_classes

    def forward(self, x):
        return x.flatten(1)[:, : self.k] * 1.0


def detached(out, y):
    return torch.nn.functional.cross_entropy(out, y, reduction="none").detach()


def integer(out, y):
    return (out.argmax(1) != y).long()


class Fault(Tiny):
    """mode=die: its process SIGKILLs itself at its first training step, once ``flag`` exists; mode=wait: creates
    ``flag`` and sleeps until its worker is killed; mode=ok: trains."""

    def __init__(self, input_shape, num_classes, mode="ok", flag=""):
        super().__init__(input_shape, num_classes)
        self.mode, self.flag = mode, flag

    def forward(self, x):
        if self.training and self.mode == "wait":
            Path(self.flag).touch()
            time.sleep(600)
        if self.training and self.mode == "die":
            t0 = time.time()
            while not Path(self.flag).exists() and time.time() - t0 < 300:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().forward(x)
'''

MODELS = {
    "tiny": "_target_: faulty.Tiny\n",
    "boom": "_target_: faulty.TrainBoom\n",
    "frozen": "_target_: faulty.Frozen\n",
    "noparams": "_target_: faulty.NoParameters\n",
    "fault": "_target_: faulty.Fault\nmode: ok\nflag: ${paths.root_dir}/flag\n",
}
FAST = ["epochs=1", "trainer.progress=none"]


@pytest.fixture
def project(psbench_root: Path) -> Path:
    """The user's project in the launch directory: ``faulty.py`` and ``conf/model/<name>.yaml``."""
    (psbench_root / "faulty.py").write_text(FAULTY)
    models = psbench_root / "conf" / "model"
    models.mkdir(parents=True)
    for name, text in MODELS.items():
        (models / f"{name}.yaml").write_text(text)
    return psbench_root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env["PSBENCH_ROOT"] = str(root)
    return env


def _statuses(root: Path, run_dir: Path | None = None) -> list[str]:
    """The MLflow status of every job run (of ``run_dir``, if given) in ``root/mlflow.db``, read with sqlite."""
    db = root / "mlflow.db"
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as con:
        rows = con.execute(
            "select r.status, t.value from runs r left join tags t on t.run_uuid = r.run_uuid and t.key = 'run_dir'"
        ).fetchall()
    return [s for s, d in rows if d is not None and (run_dir is None or d == str(run_dir))]


def _parents(root: Path) -> list[str]:
    with sqlite3.connect(root / "mlflow.db", timeout=30) as con:
        return [
            s
            for (s,) in con.execute(
                "select r.status from runs r join tags t on t.run_uuid = r.run_uuid "
                "where t.key = 'psbench.sweep_parent' and t.value = 'true'"
            )
        ]


def _outcome(proc: subprocess.CompletedProcess, run_dir: Path | None) -> tuple[int, str | None, dict | None]:
    """(exit code, the one ``psbench:`` line on stderr or None, summary.json or None); no traceback anywhere."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "--- Logging error ---" not in out, out[-4000:]
    lines = [  # not the notice of a bounded wait (the store another job creates, learners joining)
        ln
        for ln in proc.stderr.splitlines()
        if ln.startswith("psbench: ") and ", waiting up to " not in ln and "; waiting up to " not in ln
    ]
    assert len(lines) <= 1, proc.stderr[-4000:]
    summary = None
    if run_dir is not None and (run_dir / "summary.json").is_file():
        summary = json.loads((run_dir / "summary.json").read_text())
    return proc.returncode, (lines[0] if lines else None), summary


def _failed_with_the_line(line: str | None, summary: dict | None) -> None:
    assert line is not None and line.startswith("psbench: error: "), line
    assert summary is not None and summary["status"] == "failed", summary
    assert line == f"psbench: error: {summary['failure_reason']}", (line, summary["failure_reason"])


# ------------------------------------------------------------------------------------------- the user's code
SHADOW = 'from pathlib import Path\nPath(__file__).with_suffix(".ran").touch()\nraise SystemExit("shadowed")\n'


def test_a_torch_py_in_the_launch_directory_is_never_imported(project, run_psbench):
    """``torch.py`` and ``PIL.py`` where psbench starts: the installed packages are imported, the user's own
    ``faulty.py`` there still is (``_target_``); both the ``psbench`` command and ``python -m psbench``."""
    for name in ("torch", "PIL"):
        (project / f"{name}.py").write_text(SHADOW)
    run_dir = project / "run"
    proc = run_psbench("--config-dir", "conf", "model=tiny", *FAST, f"hydra.run.dir={run_dir}", root=project)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 0 and line is None and summary["status"] == "finished", proc.stderr[-3000:]
    assert _statuses(project, run_dir) == ["FINISHED"]
    script = Path(sys.executable).with_name("psbench")  # the console script: sys.path[0] is its bin/ folder
    again = project / "again"
    proc = subprocess.run(
        [str(script), "schedule_only=true", "trainer.progress=none", f"hydra.run.dir={again}"],
        cwd=project,
        env=_env(project),
        capture_output=True,
        text=True,
        timeout=600,
    )
    rc, line, summary = _outcome(proc, again)
    assert rc == 0 and line is None and summary["status"] == "finished", proc.stderr[-3000:]
    assert _statuses(project, again) == ["FINISHED"]
    assert not list(project.glob("*.ran")), "a module of the launch directory shadowed an installed package"


def test_an_error_raised_only_in_training_is_one_line_naming_the_users_function(project, run_psbench):
    run_dir = project / "run"
    proc = run_psbench("--config-dir", "conf", "model=boom", *FAST, f"hydra.run.dir={run_dir}", root=project)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 1
    _failed_with_the_line(line, summary)
    assert "RuntimeError: boom while training (raised in your code: TrainBoom.forward (" in line
    assert f"{project / 'faulty.py'}:" in line and line.endswith(f"traceback in {run_dir / 'psbench.log'}")
    log = (run_dir / "psbench.log").read_text()
    assert "Traceback (most recent call last)" in log and 'raise RuntimeError("boom while training")' in log
    assert _statuses(project, run_dir) == ["FAILED"] and summary["mlflow_run_id"]


@pytest.mark.slow  # real learner processes: the fault suite's longest case (pytest -m fault runs it)
def test_a_dist_learner_whose_code_raises_is_named_with_its_log(project, run_psbench):
    """The user's model raises in a learner process (engine=dist): one line naming the learner, its error and its
    learner_N.log (it used to read as a lost connection), the run FAILED."""
    run_dir = project / "run"
    args = ["--config-dir", "conf", "model=boom", "engine=dist", "learners=2", "protocol=async"]
    proc = run_psbench(*args, *FAST, f"hydra.run.dir={run_dir}", root=project)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 1
    _failed_with_the_line(line, summary)
    assert line.startswith("psbench: error: learner rank ") and "exited with code 1: " in line, line
    assert "RuntimeError: boom while training (its output: " in line and line.endswith(".log)"), line
    log = Path(line.rpartition("(its output: ")[2].removesuffix(")"))
    assert log.parent == run_dir and 'raise RuntimeError("boom while training")' in log.read_text()
    assert _statuses(project, run_dir) == ["FAILED"]


USER_REFUSED = {
    "frozen_model": (["model=frozen"], "model._target_='faulty.Frozen'", "requires_grad=False: frozen"),
    "model_without_parameters": (["model=noparams"], "model._target_='faulty.NoParameters'", "(it has none"),
    "loss_detached_from_outputs": (["model=tiny", "+model.loss=faulty.detached"], "model.loss=", "does not depend"),
    "integer_loss": (["model=tiny", "+model.loss=faulty.integer"], "model.loss=", "torch.int64"),
}


@pytest.mark.parametrize("case", list(USER_REFUSED))
def test_user_code_that_would_train_nothing_is_refused_before_training(project, run_psbench, case):
    args, key, words = USER_REFUSED[case]
    run_dir = project / "run"
    proc = run_psbench("--config-dir", "conf", *args, *FAST, f"hydra.run.dir={run_dir}", root=project)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 2
    _failed_with_the_line(line, summary)
    assert line.startswith(f"psbench: error: {key}") and words in line, line
    assert _statuses(project) == [] and summary["mlflow_run_id"] is None


def test_a_yaml_syntax_error_names_file_and_line(project, run_psbench):
    (project / "conf" / "model" / "broken.yaml").write_text("_target_: faulty.Tiny\nhidden: [1, 2\nwidth: 3\n")
    run_dir = project / "run"
    proc = run_psbench("--config-dir", "conf", "model=broken", *FAST, f"hydra.run.dir={run_dir}", root=project)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 2 and summary is None and _statuses(project) == []
    assert line == (
        f"psbench: error: {project / 'conf' / 'model' / 'broken.yaml'}:3:6: not valid YAML: expected ',' or ']', "
        "but got ':' (while parsing a flow sequence that starts at line 2)"
    ), line


# ------------------------------------------------------------------------------------------- data files
def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header declares ``width`` × ``height`` pixels, with no pixel data (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def _folder(root: Path, classes=("cat", "dog"), mode: str = "RGB") -> Path:
    from data_files import write_image_folder

    folder = root / "images"
    write_image_folder(folder, {c: (6, 2) for c in classes}, mode=mode)
    return folder


def _npz(root: Path, **over) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.normal(size=(40, 4)).astype(np.float32),
        "y_train": np.arange(40) % 3,
        "x_test": rng.normal(size=(12, 4)).astype(np.float32),
        "y_test": np.arange(12) % 3,
        **over,
    }
    path = root / "mine.npz"
    np.savez(path, **arrays)
    return path


def _lying_npz(root: Path) -> Path:
    """An .npz whose x_train and y_train headers declare 2·10⁹ rows (32 GB of floats) over 640 and 320 bytes of
    data: consistent headers, so only the bytes behind them tell (numpy allocated what the header said)."""
    import io
    import zipfile

    path = _npz(root)
    with zipfile.ZipFile(path) as old:
        members = {n: old.read(n) for n in old.namelist()}
    for name, a in (("x_train", np.zeros((40, 4), np.float32)), ("y_train", np.arange(40) % 3)):
        header = np.lib.format.header_data_from_array_1_0(a)
        header["shape"] = (2_000_000_000, *a.shape[1:])
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        buf.write(a.tobytes())
        members[f"{name}.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as new:
        for n, data in members.items():
            new.writestr(n, data)
    return path


def _transparent(root: Path) -> Path:
    from PIL import Image

    folder = _folder(root)
    rgba = np.zeros((8, 6, 4), np.uint8)
    rgba[..., 3] = 128
    Image.fromarray(rgba, "RGBA").save(folder / "train" / "cat" / "0003.png")
    return folder


def _bomb(root: Path) -> Path:
    folder = _folder(root)
    _png_header_only(folder / "train" / "cat" / "0000.png", 100_000, 100_000)  # the first: read for the memory check
    return folder


# name: (setup(root) -> overrides, the file the line names (relative to root), words the line holds)
DATA_REFUSED = {
    "image_folder_of_one_class": (
        lambda r: ["dataset=image_folder", f"dataset.path={_folder(r, classes=('cat',))}"],
        "images",
        "one class folder (cat)",
    ),
    "image_with_transparent_pixels": (
        lambda r: ["dataset=image_folder", f"dataset.path={_transparent(r)}"],
        "images/train/cat/0003.png",
        "transparent pixels",
    ),
    "image_declaring_100000x100000_pixels": (
        lambda r: ["dataset=image_folder", f"dataset.path={_bomb(r)}"],
        "images/train/cat/0000.png",
        "declares more pixels",
    ),
    "npz_declaring_2e9_rows": (
        lambda r: ["dataset=arrays", f"dataset.path={_lying_npz(r)}"],
        "mine.npz",
        "x_train declares [2000000000, 4] float32 (32,000,000,000 bytes) but holds 640 bytes",
    ),
    "npz_label_2_pow_64_minus_1": (
        lambda r: ["dataset=arrays", f"dataset.path={_npz(r, y_train=np.full(40, 2**64 - 1, np.uint64))}"],
        "mine.npz",
        "labels 18446744073709551615..18446744073709551615",
    ),
    "npz_of_zero_features": (
        lambda r: [
            "dataset=arrays",
            f"dataset.path={_npz(r, x_train=np.zeros((40, 0), np.float32), x_test=np.zeros((12, 0), np.float32))}",
        ],
        "mine.npz",
        "no input features",
    ),
}


@pytest.mark.parametrize("case", list(DATA_REFUSED))
def test_a_data_file_that_lies_or_holds_garbage_is_refused_naming_it(psbench_root, run_psbench, case):
    setup, named, words = DATA_REFUSED[case]
    run_dir = psbench_root / "run"
    proc = run_psbench(*setup(psbench_root), *FAST, f"hydra.run.dir={run_dir}", root=psbench_root, timeout=300)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 2
    _failed_with_the_line(line, summary)
    assert str(psbench_root / named) in line and words in line, line
    assert _statuses(psbench_root) == [] and summary["mlflow_run_id"] is None


def test_a_16_bit_png_folder_trains_on_its_values_and_unseen_test_labels_are_said(psbench_root, run_psbench):
    """16-bit greyscale PNGs (they decoded to 99.6 % 255 and trained without a word) train on what they mean;
    an .npz whose test set holds a label the training set lacks trains, says so, and records it."""
    from PIL import Image

    folder = psbench_root / "grey16"
    rng = np.random.default_rng(0)
    for split, n in (("train", 6), ("test", 2)):
        for c in ("a", "b"):
            (folder / split / c).mkdir(parents=True)
            for k in range(n):
                pixels = rng.integers(0, 65536, size=(8, 6), dtype=np.uint16)
                Image.fromarray(pixels).save(folder / split / c / f"{k}.png")
    run_dir = psbench_root / "grey"
    args = ["dataset=image_folder", f"dataset.path={folder}", "batch_size=4", "learners=2"]
    proc = run_psbench(*args, *FAST, f"hydra.run.dir={run_dir}", root=psbench_root)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 0 and line is None and summary["status"] == "finished", proc.stderr[-3000:]
    assert _statuses(psbench_root, run_dir) == ["FINISHED"]
    (cache,) = psbench_root.rglob("image_folder-grey16-*.npz")  # what psbench decoded and trained on
    with np.load(cache) as decoded:
        pixels = decoded["x_train"]
    assert pixels.shape == (12, 1, 8, 6) and (pixels == 255).mean() < 0.05 and 100 < pixels.mean() < 155

    path = _npz(psbench_root, y_test=np.arange(12) % 4)  # label 3 only in the test set
    run_dir = psbench_root / "unseen"
    args = ["dataset=arrays", f"dataset.path={path}", "batch_size=4", "learners=2"]
    proc = run_psbench(*args, *FAST, f"hydra.run.dir={run_dir}", root=psbench_root)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 0 and line is None and summary["status"] == "finished", proc.stderr[-3000:]
    said = "3 of 12 test samples have labels never seen in training (3)"
    assert said in proc.stdout + proc.stderr and said in summary["data_warning"]
    assert _statuses(psbench_root, run_dir) == ["FINISHED"]


# ------------------------------------------------------------------------------------------- workers
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]


def test_a_killed_joblib_worker_ends_its_jobs_failed_and_the_sweep_says_which(project, run_psbench):
    """Job 0's worker SIGKILLs itself while job 1 trains in the other worker (loky then kills that one too): both
    end FAILED with summary.json naming their worker; job 2, not started then, runs in a fresh pool and finishes;
    the sweep's line counts the two, its parent run FAILED, nothing RUNNING."""
    sweep_dir = project / "sweep"
    proc = run_psbench(
        "-m",
        "--config-dir",
        "conf",
        "model=fault",
        "model.mode=die,wait,ok",
        *FAST,
        *JOBLIB,
        f"hydra.sweep.dir={sweep_dir}",
        root=project,
    )
    rc, line, _ = _outcome(proc, None)
    assert rc == 1 and line is not None and line.startswith("psbench: 2 of 3 jobs failed: job 0 [model.mode=die]: ")
    summaries = [json.loads((sweep_dir / str(j) / "summary.json").read_text()) for j in range(3)]
    assert [s["status"] for s in summaries] == ["failed", "failed", "finished"]
    for s in summaries[:2]:
        assert s["failure_reason"].startswith("its joblib worker (pid ") and "SIGKILL" in s["failure_reason"]
        assert s["mlflow_run_id"]
    assert "; job 1 [model.mode=wait]: its joblib worker (pid " in line
    assert [_statuses(project, sweep_dir / str(j)) for j in range(3)] == [["FAILED"], ["FAILED"], ["FINISHED"]]
    assert _parents(project) == ["FAILED"]


def test_a_sweep_killed_under_its_workers_ends_their_jobs_killed_and_they_exit(project):
    """SIGKILL of the sweep process while its joblib workers train: each worker ends its job KILLED at an update
    boundary (checkpoint, summary.json), ends the parent run KILLED, and exits (they used to finish under a RUNNING
    parent, then ignore SIGTERM)."""
    sweep_dir = project / "sweep"
    cmd = [sys.executable, "-m", "psbench.cli", "-m", "seed=0,1", "epochs=500", "trainer.progress=none"]
    sweep = subprocess.Popen(
        [*cmd, *JOBLIB, f"hydra.sweep.dir={sweep_dir}"],
        cwd=project,
        env=_env(project),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while _training(project) < 2:  # both jobs log their updates' metrics: they are training
            assert sweep.poll() is None and time.monotonic() < deadline, "the jobs did not start"
            time.sleep(1)
        with sqlite3.connect(project / "mlflow.db", timeout=30) as con:
            pids = [int(v) for (v,) in con.execute("select value from tags where key = 'psbench.pid'")]
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        deadline = time.monotonic() + 120
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert not [p for p in pids if _alive(p)], "a worker outlived its sweep"
    for j in (0, 1):
        s = json.loads((sweep_dir / str(j) / "summary.json").read_text())
        assert s["status"] == "killed" and "its sweep process (pid " in s["failure_reason"], s["failure_reason"]
        assert (sweep_dir / str(j) / "checkpoint.pt").is_file()
    assert _statuses(project) == ["KILLED", "KILLED"] and _parents(project) == ["KILLED"]


def _training(root: Path) -> int:
    """How many runs have logged an update's metric (their fit has begun)."""
    with sqlite3.connect(root / "mlflow.db", timeout=30) as con:
        return con.execute("select count(distinct run_uuid) from metrics where key = 'sim_time_s'").fetchone()[0]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


HOLD_DIR_LOCK = """
import fcntl, os, sys, time
os.makedirs(sys.argv[1], exist_ok=True)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("mode", ["run", "sweep"])
def test_a_dir_another_psbench_works_in_is_refused(psbench_root, run_psbench, mode):
    """Another process holds the run or sweep dir (psbench's lock: flock on the directory): one line, exit 2."""
    folder = psbench_root / mode
    holder = subprocess.Popen([sys.executable, "-c", HOLD_DIR_LOCK, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        args = ["-m", "seed=0,1"] if mode == "sweep" else []
        proc = run_psbench(*args, "schedule_only=true", *FAST[1:], f"hydra.{mode}.dir={folder}", root=psbench_root)
    finally:
        holder.kill()
        holder.wait()
    rc, line, summary = _outcome(proc, folder)
    assert rc == 2 and summary is None and _statuses(psbench_root) == []
    assert line == (
        f"psbench: error: hydra.{mode}.dir='{folder}' is invalid: allowed a directory no other psbench is working "
        "in: another psbench process is running in it now (wait for it to end, or choose another directory)"
    ), line


def test_a_reused_run_dir_is_refused_unless_resume_or_overwrite_says_so(psbench_root, run_psbench):
    run_dir = psbench_root / "run"
    first = run_psbench("schedule_only=true", *FAST[1:], f"hydra.run.dir={run_dir}", root=psbench_root)
    assert first.returncode == 0, first.stderr[-3000:]
    kept = {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    run_id = json.loads((run_dir / "summary.json").read_text())["mlflow_run_id"]

    proc = run_psbench("schedule_only=true", "seed=1", *FAST[1:], f"hydra.run.dir={run_dir}", root=psbench_root)
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 2 and line == (
        f"psbench: error: hydra.run.dir='{run_dir}' is invalid: allowed a directory that holds no run, or "
        "resume=auto (continue it, or report it done, if the config is the same) or overwrite=true (replace it): it "
        f"holds a finished run ({run_dir / 'summary.json'}, MLflow run {run_id})"
    ), line
    proc = run_psbench(
        "schedule_only=true", "seed=1", "resume=auto", *FAST[1:], f"hydra.run.dir={run_dir}", root=psbench_root
    )
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 2 and line.startswith("psbench: error: resume='auto' is invalid: ") and "seed (0 → 1)" in line
    assert {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == kept  # .hydra too
    assert _statuses(psbench_root, run_dir) == ["FINISHED"]

    proc = run_psbench(
        "schedule_only=true", "seed=1", "overwrite=true", *FAST[1:], f"hydra.run.dir={run_dir}", root=psbench_root
    )
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 0 and line is None and summary["status"] == "finished" and summary["mlflow_run_id"] != run_id
    assert _statuses(psbench_root, run_dir) == ["FINISHED", "FINISHED"]  # MLflow keeps both runs


def test_a_reused_sweep_dir_is_refused_unless_resume_or_overwrite_says_so(psbench_root, run_psbench):
    sweep_dir = psbench_root / "sweep"
    args = ["-m", "seed=0,1", "schedule_only=true", *FAST[1:], f"hydra.sweep.dir={sweep_dir}"]
    assert run_psbench(*args, root=psbench_root).returncode == 0
    kept = {p.relative_to(sweep_dir): p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()}
    proc = run_psbench(*args, root=psbench_root)
    rc, line, _ = _outcome(proc, None)
    assert (
        rc == 2
        and line.startswith(f"psbench: error: hydra.sweep.dir='{sweep_dir}' is invalid: ")
        and ("it holds 2 (e.g. 0/: a finished run" in line)
    ), line
    assert {p.relative_to(sweep_dir): p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()} == kept
    proc = run_psbench(*args, "resume=auto", root=psbench_root)  # each job reports its finished run done
    assert proc.returncode == 0 and proc.stderr.count("already finished (finished); not run again") == 2
    assert sorted(_statuses(psbench_root)) == ["FINISHED", "FINISHED"]


# ------------------------------------------------------------------------------------------- disks
def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(
    not _namespaces(), reason="needs a private mount namespace (unshare --user --map-root-user --mount)"
)


def _on_tmpfs(root: Path, mount: Path, size: str, args: list[str], keep: Path) -> subprocess.CompletedProcess:
    """``psbench args`` with a tmpfs of ``size`` over ``mount``, in a mount namespace of its own; what the tmpfs held
    when it ended is copied to ``keep`` (the tmpfs goes with the namespace)."""
    mount.mkdir(parents=True, exist_ok=True)
    keep.mkdir(parents=True)
    quoted = " ".join(f"'{a}'" for a in [sys.executable, "-m", "psbench.cli", *args])
    script = (
        f"mount -t tmpfs -o size={size} tmpfs '{mount}' || exit 99; {quoted}; rc=$?; "
        f"cp -a '{mount}/.' '{keep}/'; exit $rc"
    )
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


# size of the tmpfs over the run dir → the file the line names: Hydra's .hydra/ (before the job), a plot (before
# training; the summary does not fit either), the checkpoint (during training; the summary fits once its .tmp goes)
DISKS = {"hydra_files": ("4k", ""), "plots": ("48k", "timeline.png"), "checkpoint": ("160k", "checkpoint.pt")}


@needs_namespace
@pytest.mark.parametrize("case", list(DISKS))
def test_a_full_disk_ends_the_run_in_one_line_with_no_tmp_left(psbench_root, case):
    size, file = DISKS[case]
    run_dir, keep = psbench_root / "run", psbench_root / "kept"
    args = [*FAST, "trainer.checkpoint_every=3", f"hydra.run.dir={run_dir}"]
    proc = _on_tmpfs(psbench_root, run_dir, size, args, keep)
    assert proc.returncode != 99, proc.stderr
    rc, line, summary = _outcome(proc, keep)
    assert rc == 1 and line is not None and _leftovers(keep) == []
    assert line.startswith(f"psbench: error: no space left on device writing {run_dir / file}".rstrip("/")), line
    if case == "checkpoint":  # the summary where space allows, the run FAILED with the same line
        _failed_with_the_line(line, summary)
        assert _statuses(psbench_root, run_dir) == ["FAILED"]
    else:
        assert summary is None
        assert _statuses(psbench_root, run_dir) == ([] if case == "hydra_files" else ["FAILED"])


@needs_namespace
def test_an_artifact_store_that_fills_after_training_leaves_the_run_finished(psbench_root):
    """The artifact folder is full when the run's files are uploaded: the run still ends FINISHED, the failure in
    its tags and summary.json, one warning line, exit 0."""
    art, run_dir = psbench_root / "artifacts", psbench_root / "run"
    args = [*FAST, f"logger.artifact_location={art}", f"hydra.run.dir={run_dir}"]
    proc = _on_tmpfs(psbench_root, art, "8k", args, psbench_root / "kept")
    rc, line, summary = _outcome(proc, run_dir)
    assert rc == 0 and summary["status"] == "finished", proc.stderr[-3000:]
    assert line is not None and line.startswith("psbench: warning: the run finished, but its files were not logged")
    assert "No space left on device" in summary["artifacts_error"] and summary["artifacts_error"] in line
    assert _statuses(psbench_root, run_dir) == ["FINISHED"]
    with sqlite3.connect(psbench_root / "mlflow.db") as con:
        tags = dict(con.execute("select key, value from tags where key = 'artifacts_error'").fetchall())
    assert tags["artifacts_error"] == summary["artifacts_error"]
