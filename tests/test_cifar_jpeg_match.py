"""python -m psbench.data.cifar_jpeg match-subset: the JPEG counterparts of cifar10_subset's images, found by nearest
pixels, written in dataset=arrays' format; ambiguous or misnamed matches refused. On tiny files the test writes, and
on the real ones where they are (slow; skipped without them)."""

from __future__ import annotations

import errno
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from data_files import REAL_DATA, needs_real
from psbench.data import build_datamodule, cifar_jpeg, sources
from psbench.data.checksum import KNOWN_MD5, md5_file
from psbench.data.cifar_jpeg import main, match_split, nearest_two

SUBSET_KEY, ZIP_KEY = sources.DATASET_FILES["cifar10_subset"][0], sources.DATASET_FILES["cifar10_jpeg"][0]


def smooth_images(rng: np.random.Generator, n: int) -> np.ndarray:
    """uint8 [n, 3, 32, 32] images with structure (a colour gradient, a blob, mild noise): JPEG keeps them close."""
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    out = np.empty((n, 3, 32, 32), np.uint8)
    for i in range(n):
        a, b, c = rng.uniform(0, 1, size=(3, 3, 1, 1))
        cy, cx = rng.uniform(5, 27, size=2)
        blob = np.exp(-((yy * 31 - cy) ** 2 + (xx * 31 - cx) ** 2) / 40.0)
        img = 40 + 120 * (a * yy + b * xx) + 90 * c * blob + rng.normal(0, 3, size=(3, 32, 32))
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def jpeg(img: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img.transpose(1, 2, 0)).save(buf, format="JPEG", quality=75)
    return buf.getvalue()


def write_pair(data: Path, seed: int = 0, duplicate: bool = False) -> dict[str, np.ndarray]:
    """A tiny cifar10-subset .npz and a cifar10-jpeg.zip holding its images' JPEGs (named NNNN = rank in class, as
    the real ones are) among others of the same classes; ``duplicate``: one zip image twice (an ambiguous match)."""
    rng = np.random.default_rng(seed)
    n_train, n_test, extra = 30, 10, 3
    sub = {
        "x_train": smooth_images(rng, n_train),
        "y_train": np.arange(n_train) % 10,
        "x_test": smooth_images(rng, n_test),
        "y_test": np.arange(n_test) % 10,
    }
    (data / sources.CIFAR10_SUBSET_DIR).mkdir(parents=True)
    np.savez(data / SUBSET_KEY, **sub)
    (data / sources.CIFAR10_JPEG_DIR).mkdir(parents=True)
    with zipfile.ZipFile(data / ZIP_KEY, "w", zipfile.ZIP_STORED) as zf:
        for split in ("train", "test"):
            x, y = sub[f"x_{split}"], sub[f"y_{split}"]
            for c, name in enumerate(sources.CIFAR10_CLASSES):
                mine = x[y == c]
                others = smooth_images(rng, extra)  # images the subset does not hold, after its own
                if duplicate and split == "train" and c == 0:
                    others[0] = mine[0]
                for r, img in enumerate([*mine, *others]):
                    zf.writestr(f"{split}/{name}/{r:04d}.jpg", jpeg(img))
    return sub


@pytest.fixture
def registered(monkeypatch):
    def _register(data: Path) -> None:
        for key in (SUBSET_KEY, ZIP_KEY):
            monkeypatch.setitem(KNOWN_MD5, key, md5_file(data / key))

    return _register


def test_nearest_two_is_exact_and_ordered():
    rng = np.random.default_rng(3)
    pool = rng.integers(0, 256, size=(50, 3, 4, 4), dtype=np.uint8)
    queries = np.clip(pool[[7, 3, 7]].astype(int) + rng.integers(-2, 3, size=(3, 3, 4, 4)), 0, 255).astype(np.uint8)
    idx, dist = nearest_two(queries, pool, chunk=2)
    brute = ((queries[:, None].astype(np.int64) - pool[None].astype(np.int64)) ** 2).reshape(3, 50, -1).sum(-1)
    assert idx[:, 0].tolist() == [7, 3, 7]
    np.testing.assert_array_equal(idx, np.argsort(brute, axis=1, kind="stable")[:, :2])
    np.testing.assert_array_equal(dist, np.sort(brute, axis=1)[:, :2])


def test_a_duplicate_in_the_pool_is_an_ambiguous_match():
    rng = np.random.default_rng(4)
    pool = smooth_images(rng, 6)
    pool[5] = pool[2]
    st = match_split(
        pool[[2, 4]],
        np.zeros(2, int),
        pool,
        np.zeros(6, int),
        [f"train/airplane/{i:04d}.jpg" for i in range(6)],
        named=0,
    )
    assert st["unambiguous"] == 1 and st["ratio"][0] == 1.0 and st["ratio"][1] == 0.0


def test_match_subset_writes_the_jpeg_counterparts_as_arrays(tmp_path, registered, capsys):
    data = tmp_path / "data"
    sub = write_pair(data)
    registered(data)
    out = tmp_path / "subset-jpeg.npz"
    assert main(["match-subset", "--out", str(out), "--data-dir", str(data), "--root-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "train: 30 images matched" in printed and "unambiguous 30/30" in printed and "30/30 agree" in printed
    assert "test: 10 images matched" in printed and "10/10 agree with their NNNN name" in printed
    with np.load(out, allow_pickle=False) as npz:
        got = {k: npz[k] for k in npz.files}
    np.testing.assert_array_equal(got["y_train"], sub["y_train"])  # the subset's order and labels
    assert got["x_train"].shape == sub["x_train"].shape and got["x_train"].dtype == np.uint8
    mad = np.abs(got["x_train"].astype(int) - sub["x_train"]).mean()
    assert 0 < mad < 4  # the JPEG of the same image, not another
    assert got["train_files"][:2].tolist() == ["train/airplane/0000.jpg", "train/automobile/0000.jpg"]
    dm = build_datamodule("arrays", tmp_path, path=str(out))  # dataset=arrays reads it as cifar10_subset's shape
    dm.setup()
    assert (dm.num_train, dm.num_test, dm.input_shape, dm.num_classes) == (30, 10, (3, 32, 32), 10)


def test_match_subset_refuses_an_ambiguous_match(tmp_path, registered, capsys):
    data = tmp_path / "data"
    write_pair(data, duplicate=True)
    registered(data)
    out = tmp_path / "subset-jpeg.npz"
    assert main(["match-subset", "--out", str(out), "--data-dir", str(data), "--root-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "1 train matches are ambiguous" in err and "not written" in err
    assert not out.exists()


def test_match_subset_on_a_full_disk_leaves_no_file_and_says_so(tmp_path, registered, capsys, monkeypatch):
    data = tmp_path / "data"
    write_pair(data)
    registered(data)
    out = tmp_path / "subset-jpeg.npz"

    def savez_then_full(fh, **arrays):  # half the bytes reach the disk, then the kernel says ENOSPC
        fh.write(b"PK" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cifar_jpeg.np, "savez", savez_then_full)
    assert main(["match-subset", "--out", str(out), "--data-dir", str(data), "--root-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(out) in err and "no space left on device writing" in err
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow
@needs_real("CIFAR-10 subset and JPEG zip", SUBSET_KEY, ZIP_KEY)
def test_match_subset_on_the_real_files(tmp_path, capsys):
    out = tmp_path / "subset-jpeg.npz"
    assert main(["match-subset", "--out", str(out), "--data-dir", str(REAL_DATA), "--root-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "unambiguous 5085/5085" in printed and "1017/1017 agree" in printed and "5085 distinct" in printed
    with np.load(out, allow_pickle=False) as npz:
        assert npz["x_train"].shape == (5085, 3, 32, 32) and npz["x_test"].shape == (1017, 3, 32, 32)
