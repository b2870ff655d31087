"""dataset=arrays: a user's .npz of x_train, y_train, x_test, y_test — classification and regression recognised,
pixels scaled like images, every malformed file refused in one line naming it (before any run, through the CLI)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from psbench.data import build_datamodule
from psbench.data.arrays import read_header
from psbench.data.checksum import md5_file
from psbench.errors import ConfigError, DataError
from test_cli import assert_one_line_error


def arrays(n: int = 12, m: int = 5, x_dtype=np.float32, y=None, seed: int = 0, **extra) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(x_dtype) == np.uint8:
        x = {k: rng.integers(0, 256, size=(s, 1, 4, 4), dtype=np.uint8) for k, s in (("x_train", n), ("x_test", m))}
    else:
        x = {k: rng.normal(size=(s, 6)).astype(x_dtype) for k, s in (("x_train", n), ("x_test", m))}
    labels = y or {"y_train": np.arange(n) % 3, "y_test": np.arange(m) % 3}
    return {**x, **labels, **extra}


def save(tmp_path: Path, name: str = "mine.npz", **a: np.ndarray) -> Path:
    path = tmp_path / name
    np.savez(path, **a)
    return path


def load(path: Path, **kw):
    dm = build_datamodule("arrays", path.parent, path=str(path), **kw)
    dm.setup()
    return dm


def test_float_features_are_taken_as_they_are(tmp_path):
    a = arrays()
    dm = load(save(tmp_path, **a))
    assert dm.task == "classification" and dm.num_classes == dm.output_size == 3 and dm.input_shape == (6,)
    assert torch.equal(dm.x_train, torch.from_numpy(a["x_train"])) and dm.y_train.dtype == torch.int64
    assert dm.num_train == 12 and dm.num_test == 5
    centred = load(save(tmp_path, **a), preprocess="unit_mean")  # an explicit option applies
    assert torch.allclose(centred.x_train, torch.from_numpy(a["x_train"] - a["x_train"].mean(0)), atol=1e-6)
    assert load(save(tmp_path, **a), subset=4).num_train == 4


def test_uint8_pixels_are_scaled_like_images(tmp_path):
    a = arrays(x_dtype=np.uint8)
    dm = load(save(tmp_path, **a))
    x = a["x_train"] / 255.0
    assert dm.input_shape == (1, 4, 4)
    assert torch.allclose(dm.x_train, torch.from_numpy(x - x.mean(0)).float(), atol=1e-6)  # unit_mean, as cifar10
    assert torch.allclose(dm.pixel_mean, torch.from_numpy(x.mean(0)).float(), atol=1e-6)


def test_num_classes_sets_the_output_size(tmp_path):
    path = save(tmp_path, **arrays())
    assert load(path, num_classes=7).output_size == 7
    with pytest.raises(DataError, match=r"y_train has labels 0\.\.2: class labels must be in 0\.\.1"):
        load(path, num_classes=2)


@pytest.mark.parametrize(("shape", "k"), [((), 1), ((3,), 3)])
def test_float_targets_are_regression(tmp_path, shape, k):
    rng = np.random.default_rng(1)
    y = {"y_train": rng.normal(size=(12, *shape)), "y_test": rng.normal(size=(5, *shape))}
    path = save(tmp_path, **arrays(y=y))
    assert read_header(path).task == "regression"
    dm = load(path)
    assert dm.task == "regression" and dm.output_size == k and dm.num_classes == 0
    assert dm.y_train.dtype == torch.float32 and torch.allclose(dm.y_train.double(), torch.from_numpy(y["y_train"]))
    with pytest.raises(ConfigError, match=r"dataset\.num_classes=4 is invalid: allowed null with float targets"):
        load(path, num_classes=4)


def test_md5(tmp_path):
    path = save(tmp_path, **arrays())
    assert load(path, md5=md5_file(path)).num_train == 12
    with pytest.raises(DataError, match=str(path) + r" md5 [0-9a-f]{32} != expected 0{32}"):
        load(path, md5="0" * 32)


def _truncated(tmp_path: Path) -> Path:
    path = save(tmp_path, "truncated.npz", **arrays())
    path.write_bytes(path.read_bytes()[:300])
    return path


def _corrupt(tmp_path: Path) -> Path:
    path = save(tmp_path, "corrupt.npz", **arrays(n=400))
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("x_train.npy")
    raw = bytearray(path.read_bytes())
    raw[info.header_offset + 200 + info.compress_size // 2] ^= 0xFF  # inside x_train's data: its CRC fails
    path.write_bytes(bytes(raw))
    return path


BAD = {
    "missing": (lambda p: save(p, **{k: v for k, v in arrays().items() if k != "y_test"}), "lacks y_test"),
    "length": (
        lambda p: save(p, **arrays(y={"y_train": np.arange(11) % 3, "y_test": np.arange(5) % 3})),
        "y_train is [11] for 12 samples",
    ),
    "x_1d": (
        lambda p: save(p, **{**arrays(), "x_train": np.zeros(12), "x_test": np.zeros(5)}),
        "x_train is float64 [12]: expected",
    ),
    "x_bool": (lambda p: save(p, **{**arrays(), "x_train": np.zeros((12, 2), bool)}), "x_train is bool"),
    "x_shapes": (
        lambda p: save(p, **{**arrays(), "x_test": np.zeros((5, 7), np.float32)}),
        "x_train samples are [6] but x_test's are [7]",
    ),
    "x_pixels": (
        lambda p: save(p, **{**arrays(), "x_test": np.zeros((5, 6), np.uint8)}),
        "both uint8 (pixels) or neither",
    ),
    "y_text": (
        lambda p: save(p, **arrays(y={"y_train": np.array(["a"] * 12), "y_test": np.array(["b"] * 5)})),
        "y_train is <U1: expected integer class labels or float regression targets",
    ),
    "y_object": (
        lambda p: save(p, **arrays(y={"y_train": np.array([None] * 12), "y_test": np.arange(5)})),
        "y_train is object",
    ),
    "y_mixed": (
        lambda p: save(p, **arrays(y={"y_train": np.arange(12) % 3, "y_test": np.zeros(5)})),
        "y_train is int64 but y_test is float64",
    ),
    "labels_2d": (
        lambda p: save(p, **arrays(y={"y_train": np.zeros((12, 2), int), "y_test": np.zeros((5, 2), int)})),
        "y_train is [12, 2] for 12 samples",
    ),
    "negative": (
        lambda p: save(p, **arrays(y={"y_train": np.arange(12) % 3 - 1, "y_test": np.arange(5) % 3})),
        "y_train has labels -1..1: class labels must be in 0..2147483646",
    ),
    "one_class": (
        lambda p: save(p, **arrays(y={"y_train": np.zeros(12, int), "y_test": np.zeros(5, int)})),
        "hold one class (0) only",
    ),
    "nan": (lambda p: save(p, **{**arrays(), "x_test": np.full((5, 6), np.nan, np.float32)}), "x_test holds NaN"),
    "empty": (
        lambda p: save(p, **{**arrays(), "x_test": np.zeros((0, 6), np.float32), "y_test": np.zeros(0, int)}),
        "x_test has no samples",
    ),
    "not_npz": (lambda p: (p / "text.npz").write_text("x_train,y_train\n1,2\n") and p / "text.npz", "cannot read"),
    "truncated": (_truncated, "cannot read"),
    "corrupt": (_corrupt, "cannot read"),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_a_malformed_file_is_one_line_naming_it(tmp_path, kind):
    make, needle = BAD[kind]
    path = make(tmp_path)
    with pytest.raises(DataError) as err:
        load(path)
    msg = str(err.value)
    assert msg.startswith(f"arrays: {path}") or f"cannot read {path}" in msg, msg
    assert needle in msg and "\n" not in msg, msg


@pytest.mark.parametrize("kind", ["truncated", "y_text"])
def test_cli_refuses_a_bad_file_before_any_run(run_psbench, mlflow_runs, psbench_root, tmp_path, kind):
    path = BAD[kind][0](tmp_path)
    proc = run_psbench(
        "dataset=arrays",
        f"dataset.path={path}",
        "model=mlp",
        "learners=2",
        "batch_size=2",
        "trainer.progress=none",
        root=psbench_root,
    )
    assert_one_line_error(proc, psbench_root, mlflow_runs, str(path), BAD[kind][1])
    assert mlflow_runs(psbench_root) == []


def test_validate_takes_regression_targets_but_no_classes_for_them(compose_cfg, tmp_path):
    """Float y train since models take a regression loss (tests/test_user_target.py); classes make no sense."""
    from psbench.validate import validate

    path = save(tmp_path, **arrays(y={"y_train": np.zeros(12), "y_test": np.zeros(5)}))
    validate(compose_cfg("dataset=arrays", f"dataset.path={path}"))
    with pytest.raises(ConfigError, match=r"dataset\.num_classes=3 is invalid: allowed null with float targets"):
        validate(compose_cfg("dataset=arrays", f"dataset.path={path}", "dataset.num_classes=3"))
    validate(compose_cfg("dataset=arrays", f"dataset.path={save(tmp_path, 'ok.npz', **arrays())}"))
    with pytest.raises(ConfigError, match=r"dataset\.path=.*nowhere\.npz.* is invalid: allowed an existing \.npz"):
        validate(compose_cfg("dataset=arrays", f"dataset.path={tmp_path / 'nowhere.npz'}"))
