"""The pieces behind the fault suite (``tests/test_faults.py``), one by one and in-process: where a user's modules go
on ``sys.path``, how image modes decode, what an ``.npz``/IDX header may claim, which user code trains nothing, where
an error was raised in the user's code, atomic writes on a full disk, what a run dir holds and who holds it, empty
environment variables, the timeline tool's arguments and the progress of a long schedule."""

from __future__ import annotations

import errno
import gzip
import io
import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from psbench.errors import ConfigError, DataError


# ------------------------------------------------------------------------------------- sys.path and python -m
def test_user_folders_go_after_the_installed_packages(tmp_path, monkeypatch):
    from psbench.target import add_to_sys_path

    monkeypatch.setattr(sys, "path", [str(tmp_path), "/env/site-packages", "/env/lib"])
    add_to_sys_path([str(tmp_path), "/proj"])
    assert sys.path == ["/env/site-packages", "/env/lib", str(tmp_path), "/proj"]


@pytest.mark.parametrize(
    "argv, module",
    [
        (["python", "-m", "psbench.cli", "x=1"], True),
        (["python", "-X", "dev", "-mpsbench"], True),
        (["python", "-m", "mytool"], False),
        (["python", "script.py", "-m", "psbench"], False),
        (["python", "-c", "import psbench"], False),
    ],
)
def test_only_python_m_psbench_moves_the_working_directory(argv, module):
    import psbench

    assert psbench._launched_as_module(argv) is module


# ------------------------------------------------------------------------------------- image modes
def _folder(root: Path, make) -> Path:
    """A two-class folder of 8×6 images, each ``make(rng)`` (a PIL image)."""
    rng = np.random.default_rng(0)
    for split, n in (("train", 2), ("test", 1)):
        for c in ("a", "b"):
            (root / split / c).mkdir(parents=True, exist_ok=True)
            for k in range(n):
                make(rng).save(root / split / c / f"{k}.png")
    return root


def test_16_bit_greyscale_decodes_to_what_it_means(tmp_path):
    """Pillow's convert('L') clipped 16-bit PNGs: 99.6 % of the pixels were 255."""
    from PIL import Image

    from psbench.data.image_folder import load_image_folder

    seen = []

    def grey16(rng):
        a = rng.integers(0, 65536, size=(8, 6), dtype=np.uint16)
        seen.append(a)
        return Image.fromarray(a)

    d = load_image_folder(_folder(tmp_path / "g16", grey16))
    assert d.x_train.shape == (4, 1, 8, 6) and d.x_train.dtype == np.uint8
    first = d.train_files.index("train/a/0.png")
    expected = np.round(seen[0].astype(np.float64) * 255 / 65535)
    assert np.abs(d.x_train[first, 0].astype(int) - expected).max() <= 1
    assert (d.x_train == 255).mean() < 0.05


def test_palette_and_opaque_alpha_decode_and_transparency_is_refused(tmp_path):
    from PIL import Image

    from psbench.data.image_folder import load_image_folder

    def palette(rng):
        return Image.fromarray(rng.integers(0, 256, size=(8, 6, 3), dtype=np.uint8)).convert("P")

    d = load_image_folder(_folder(tmp_path / "p", palette))
    assert d.x_train.shape == (4, 3, 8, 6)

    def opaque(rng):
        a = np.concatenate([rng.integers(0, 256, size=(8, 6, 3), dtype=np.uint8), np.full((8, 6, 1), 255, np.uint8)], 2)
        return Image.fromarray(a, "RGBA")

    d = load_image_folder(_folder(tmp_path / "rgba", opaque))
    assert d.x_train.shape == (4, 3, 8, 6)

    def grey_alpha(rng):
        return Image.fromarray(rng.integers(0, 256, size=(8, 6, 2), dtype=np.uint8), "LA")

    with pytest.raises(DataError, match=r"0.png has transparent pixels \(mode LA"):
        load_image_folder(_folder(tmp_path / "la", grey_alpha))


def test_float_pixels_are_refused_and_an_image_bomb_is_refused_at_its_header(tmp_path):
    from PIL import Image

    from psbench.data.image_folder import check_source, load_image_folder

    def floats(rng):
        return Image.fromarray(rng.normal(size=(8, 6)).astype(np.float32), "F")

    folder, rng = tmp_path / "f", np.random.default_rng(0)
    for split, n in (("train", 2), ("test", 1)):  # PNG holds no float mode: a TIFF does
        for c in ("a", "b"):
            (folder / split / c).mkdir(parents=True)
            for k in range(n):
                floats(rng).save(folder / split / c / f"{k}.tif")
    with pytest.raises(DataError, match="floating-point pixels"):
        load_image_folder(folder)
    bomb = _folder(tmp_path / "bomb", lambda rng: Image.new("RGB", (6, 8)))
    from test_faults import _png_header_only

    _png_header_only(bomb / "train" / "a" / "0.png", 100_000, 100_000)
    with pytest.raises(DataError, match=r"train/a/0.png declares more pixels than an image psbench decodes"):
        check_source(bomb)


def test_one_class_is_refused_and_unseen_test_labels_are_said(tmp_path, caplog):
    from PIL import Image

    from psbench.data.datamodule import _check_labels
    from psbench.data.image_folder import check_source

    folder = tmp_path / "one"
    for split in ("train", "test"):
        (folder / split / "cat").mkdir(parents=True)
        Image.new("RGB", (6, 8)).save(folder / split / "cat" / "0.png")
    with pytest.raises(DataError, match=r"train/ has one class folder \(cat\)"):
        check_source(folder)
    with pytest.raises(DataError, match=r"holds one class only \(label 2\) \(dataset.subset=3"):
        _check_labels("digits", torch.tensor([2, 2, 2]), torch.tensor([1, 2]), 3)
    note = _check_labels("mine", torch.tensor([0, 1, 0, 1]), torch.tensor([0, 1, 2, 2, 5]), None)
    assert note == (
        "3 of 5 test samples have labels never seen in training (2, 5): the model cannot learn them, and they count "
        "as errors"
    )


# ------------------------------------------------------------------------------------- what headers claim
def _npz_with(path: Path, name: str, shape: tuple[int, ...], payload: bytes, dtype=np.float32) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.normal(size=(6, 2)).astype(np.float32),
        "y_train": np.arange(6) % 2,
        "x_test": rng.normal(size=(4, 2)).astype(np.float32),
        "y_test": np.arange(4) % 2,
    }
    np.savez(path, **arrays)
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype))
    header["shape"] = shape
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members[f"{name}.npy"] = buf.getvalue() + payload
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)


def test_an_npz_header_that_declares_more_than_the_file_holds_is_refused_before_loading(tmp_path):
    from psbench.data.arrays import check_file
    from psbench.data.cifar import load_cifar10_subset

    path = tmp_path / "lies.npz"
    _npz_with(path, "x_train", (2_000_000_000, 2), np.zeros((6, 2), np.float32).tobytes())
    with pytest.raises(DataError, match=r"x_train declares \[2000000000, 2\] float32 .* but holds 48 bytes"):
        check_file(path)
    subset = tmp_path / "subset.npz"
    _npz_with(subset, "x_test", (10**9, 3, 32, 32), b"", dtype=np.uint8)
    with pytest.raises(DataError, match=r"cifar10_subset: .* x_test declares"):
        load_cifar10_subset(subset)


def test_an_honest_npz_larger_than_half_the_memory_is_refused_before_loading(tmp_path, monkeypatch):
    from psbench.data import arrays

    path = tmp_path / "honest.npz"
    x, y = np.zeros((64, 8), np.float32), np.arange(64) % 2
    np.savez(path, x_train=x, y_train=y, x_test=x[:8], y_test=y[:8])
    monkeypatch.setattr("psbench.machine.physical_memory", lambda: 4096)
    with pytest.raises(DataError, match=r"holds 72 samples of \[8\] .* more than half this machine's memory"):
        arrays.check_file(path)


def test_labels_past_the_bound_name_the_file_and_zero_features_are_refused(tmp_path):
    from psbench.data.arrays import check_file, load_arrays

    path = tmp_path / "big.npz"
    x = np.zeros((4, 2), np.float32)
    np.savez(path, x_train=x, y_train=np.array([0, 1, 2, 2**64 - 1], np.uint64), x_test=x[:2], y_test=np.arange(2))
    with pytest.raises(DataError, match=rf"{path} y_train has labels 0..18446744073709551615: class labels must be"):
        load_arrays(path)
    x = np.zeros((4, 0), np.float32)
    np.savez(path, x_train=x, y_train=np.arange(4) % 2, x_test=x[:2], y_test=np.arange(2))
    with pytest.raises(DataError, match="no input features"):
        check_file(path)


def test_an_idx_gzip_that_would_inflate_past_memory_is_refused_before_inflating(tmp_path):
    from psbench.data.idx import read_idx

    path = tmp_path / "bomb-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(struct.pack(">BBBBIII", 0, 0, 8, 3, 2_000_000_000, 28, 28) + b"\0" * 64))
    with pytest.raises(DataError, match=r"declares shape \(2000000000, 28, 28\) \(1.46e\+03 GiB\)"):
        read_idx(path)


def test_a_model_too_large_only_for_its_classes_names_the_data():
    from psbench.assemble import _check_model_memory

    with pytest.raises(DataError, match=r"^mine: its 10,000,000,000 classes"):
        _check_model_memory({"name": "mlp", "hidden": [128]}, (1, 8, 8), 10**10, "mine")
    with pytest.raises(ConfigError, match=r"^model.hidden="):
        _check_model_memory({"name": "mlp", "hidden": [10**9]}, (1, 8, 8), 10, "mine")


# ------------------------------------------------------------------------------------- user code that trains nothing
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


@pytest.mark.parametrize("case", ["frozen", "detached", "integer", "no_parameters", "unused_outputs"])
def test_the_one_batch_check_refuses_what_would_train_nothing(case):
    from psbench.models.loss import SampleLoss, build_loss, check_fit

    net: torch.nn.Module = _Net()
    loss = build_loss(None, "classification")
    if case == "frozen":
        for p in net.parameters():
            p.requires_grad_(False)
    elif case == "detached":
        loss = SampleLoss(
            "mine.detached", lambda o, y: torch.nn.functional.cross_entropy(o, y, reduction="none").detach(), True
        )
    elif case == "integer":
        loss = SampleLoss("mine.integer", lambda o, y: (o.argmax(1) != y).long(), True)
    elif case == "no_parameters":
        net = torch.nn.Identity()
    else:
        net.forward = lambda x: torch.zeros(len(x), 3) + 0 * x.sum()  # type: ignore[method-assign]
    x, y = torch.randn(4, 4 if case != "no_parameters" else 3), torch.tensor([0, 1, 2, 0])
    words = {
        "frozen": "requires_grad=False: frozen",
        "detached": "does not depend on them",
        "integer": "torch.int64",
        "no_parameters": "(it has none",
        "unused_outputs": "its forward returns a tensor without a gradient",
    }[case]
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        check_fit(net, loss, x, y, 3, "model._target_", "mine.Net")


# ------------------------------------------------------------------------------------- where the user's code raised
def test_the_users_frame_is_named_and_psbenchs_own_are_not(tmp_path, monkeypatch):
    """The innermost frame of the user's code, past psbench's (and installed packages') frames below it."""
    from psbench.errors import crash_line, user_frame

    (tmp_path / "users_code.py").write_text(
        "from psbench.errors import require\n\ndef step(x):\n    require(x > 0, 'k', x, '> 0')\n"
        "\ndef helper(x):\n    raise ValueError(x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import users_code

    with pytest.raises(ConfigError) as caught:
        users_code.step(-1)
    assert user_frame(caught.value) == f"step ({tmp_path / 'users_code.py'}:4)"  # not psbench.errors.require
    with pytest.raises(ValueError) as raised:
        users_code.helper("bad value")
    where = f"helper ({tmp_path / 'users_code.py'}:7)"
    assert crash_line(raised.value) == f"ValueError: bad value (raised in your code: {where})"


# ------------------------------------------------------------------------------------- writes on a full disk
def test_a_failed_write_leaves_no_tmp_and_a_full_disk_names_the_file(tmp_path):
    from psbench.files import DiskFull, disk_full, write_atomic

    def full(fh):
        fh.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFull, match=rf"^no space left on device writing {tmp_path / 'summary.json'} \("):
        write_atomic(tmp_path / "summary.json", full)
    with pytest.raises(ZeroDivisionError):
        write_atomic(tmp_path / "x.bin", lambda fh: 1 / 0)
    assert list(tmp_path.iterdir()) == []
    assert disk_full(RuntimeError("unrelated")) is False
    wrapped = RuntimeError("while saving")
    wrapped.__cause__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert disk_full(wrapped)


# ------------------------------------------------------------------------------------- run dirs
def _record(run_dir: Path, status: str, run_id: str | None, config: dict | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps({"status": status, "mlflow_run_id": run_id}))
    if config is not None:
        import yaml

        (run_dir / "resolved_config.yaml").write_text(yaml.safe_dump(config))


def test_what_a_run_dir_holds_and_when_it_may_be_reused(tmp_path):
    from psbench.run_dir import RunDirTaken, clear, held_run, reuse_refusal, sweep_refusal

    d = tmp_path / "run"
    assert held_run(d) is None
    _record(d, "failed", None)  # bad input refused before anything ran: nothing to lose
    assert held_run(d) is None and reuse_refusal("hydra.run.dir", d, None, False, None) is None
    # killed before training (no MLflow run, no update, no resolved_config.yaml): resume=auto starts it afresh
    (d / "summary.json").write_text(json.dumps({"status": "killed", "mlflow_run_id": None, "updates_done": 0}))
    assert held_run(d) is None and reuse_refusal("resume", d, "auto", False, {"seed": 0}) is None
    (d / "summary.json").write_text(json.dumps({"status": "killed", "mlflow_run_id": None, "updates_done": 3}))
    assert held_run(d) == f"a killed run ({d / 'summary.json'})"  # it trained: refused unless the config matches
    cfg = {"seed": 0, "learners": 4, "resume": None, "paths": {"output_dir": str(d)}}
    _record(d, "finished", "abc", cfg)
    assert held_run(d) == f"a finished run ({d / 'summary.json'}, MLflow run abc)"
    refused = reuse_refusal("hydra.run.dir", d, None, False, None)
    assert isinstance(refused, RunDirTaken) and refused.key == "hydra.run.dir"
    assert reuse_refusal("hydra.run.dir", d, None, True, None) is None  # overwrite=true
    assert reuse_refusal("hydra.run.dir", d, "auto", False, {**cfg, "resume": "auto"}) is None  # the same config
    other = reuse_refusal("hydra.run.dir", d, "auto", False, {**cfg, "seed": 1})
    assert other is not None and other.key == "resume" and "seed (0 → 1)" in str(other)
    (d / "notes.txt").write_text("mine")
    (d / "weights.pt").write_bytes(b"w")
    assert sorted(clear(d)) == ["resolved_config.yaml", "summary.json", "weights.pt"] and (d / "notes.txt").exists()
    sweep = tmp_path / "sweep"
    _record(sweep / "1", "killed", "def")
    err = sweep_refusal("hydra.sweep.dir", sweep, None, False)
    assert err is not None and "it holds 1 (e.g. 1/: a killed run" in str(err)
    assert sweep_refusal("hydra.sweep.dir", sweep, "auto", False) is None


def test_a_dir_is_held_by_one_process(tmp_path):
    from psbench import run_dir

    d = tmp_path / "held"
    run_dir.hold("hydra.run.dir", d)
    try:
        run_dir.hold("hydra.run.dir", d)  # this process again: fine
        other = subprocess.run(
            [sys.executable, "-c", f"from psbench import run_dir; run_dir.hold('hydra.run.dir', {str(d)!r})"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert other.returncode == 1 and "another psbench process is running in it now" in other.stderr
    finally:
        run_dir.release(d)
    again = subprocess.run(
        [sys.executable, "-c", f"from psbench import run_dir; run_dir.hold('hydra.run.dir', {str(d)!r})"], timeout=120
    )
    assert again.returncode == 0


# ------------------------------------------------------------------------------------- the rest
def test_an_empty_environment_variable_is_an_unset_one(monkeypatch):
    from psbench.conf import CONF_DIR
    from psbench.paths import env_or

    for empty in ("", "  "):
        monkeypatch.setenv("PSBENCH_ROOT", empty)
        assert env_or("PSBENCH_ROOT", "/launch") == "/launch"
    monkeypatch.setenv("PSBENCH_ROOT", "/mine")
    assert env_or("PSBENCH_ROOT", "/launch") == "/mine"
    text = (CONF_DIR / "paths" / "default.yaml").read_text()
    assert "${psbench_env:PSBENCH_ROOT," in text and "${psbench_env:PSBENCH_DATA," in text and "oc.env" not in text


@pytest.mark.parametrize(
    "args, line",
    [
        (["--learners", "0"], "--learners=0 is invalid: allowed an integer in [4, 64]"),
        (["--batch-size", "-1"], "--batch-size=-1 is invalid: allowed an integer in [1, 4096]"),
        (["--seed", "-3"], "--seed=-3 is invalid"),
    ],
)
def test_the_timeline_tool_refuses_odd_arguments_in_one_line(tmp_path, args, line):
    proc = subprocess.run(
        [sys.executable, "-m", "psbench.ps.timeline", "--out", str(tmp_path / "pics"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"python -m psbench.ps.timeline: error: {line}"), lines


def test_a_long_simulation_says_what_follows_its_last_line(capsys, monkeypatch, tmp_path):
    from types import SimpleNamespace

    from psbench import job
    from psbench.cluster import CostModel, Topology
    from psbench.ps import Protocol, Schedule, Simulator, plan

    sim = Simulator(Protocol("async", 4), CostModel.from_profile("laptop", 1000), Topology(), 8, 400, 0)
    ended: list[float] = []
    monkeypatch.setattr(plan, "PROGRESS_AFTER_S", 0.0)
    schedule = Schedule.collect(plan.with_progress(sim.run(), sim.total_gradients, "plain", ended))
    err = capsys.readouterr().err
    assert "psbench: simulated the schedule: 400 gradients in 0 s; collecting it" in err and ended
    monkeypatch.setattr(job, "LONG_SCHEDULE", 100)
    job._say_writing(SimpleNamespace(schedule=schedule, trainer=SimpleNamespace(progress="auto")), tmp_path)
    assert capsys.readouterr().err == f"psbench: writing the schedule (400 gradients) and its plots to {tmp_path}\n"


def test_a_zip_member_that_would_inflate_past_any_image_is_refused_before_reading(tmp_path, monkeypatch):
    from data_files import write_image_folder, zip_folder
    from psbench.data import image_folder

    write_image_folder(tmp_path / "f", {"a": (2, 1), "b": (2, 1)})
    path = zip_folder(tmp_path / "f", tmp_path / "f.zip")
    monkeypatch.setattr(image_folder, "MAX_IMAGE_BYTES", 16)  # every member of this zip is larger
    with pytest.raises(DataError, match=r"f.zip:train/a/0000.png declares .* bytes uncompressed, more than an image"):
        image_folder.load_image_folder(path)
