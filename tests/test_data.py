"""psbench.data: readers, md5 checks and downloads on tiny files in the standard formats (any clone), and
the real offline files where they are (``$PSBENCH_DATA`` or ``../shared/datasets``; never copied in)."""

from __future__ import annotations

import gzip
import io
import pickle
import re
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data_files import (
    REAL_DATA,
    TinyData,
    build_tiny_data,
    needs_real,
    needs_real_mnist,
    write_cifar_batches,
    write_idx,
)
from psbench.data import DATASET_NAMES, build_datamodule, make_synthetic, sources
from psbench.data.checksum import KNOWN_MD5, md5_file, verify_md5
from psbench.data.cifar import read_cifar_batch
from psbench.data.download import _extract_cifar10, download_url, ensure_files
from psbench.data.idx import parse_idx, read_idx
from psbench.errors import ConfigError, DataError
from psbench.models import build_model


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TinyData:
    """Tiny copies of every file-backed data set under ``tmp_path/data``, their md5s registered as known."""
    data = build_tiny_data(tmp_path / "data")
    for key, md5 in data.md5.items():
        monkeypatch.setitem(KNOWN_MD5, key, md5)
    return data


# --- IDX ------------------------------------------------------------------------------------


@needs_real_mnist
def test_read_idx_real_mnist_train() -> None:
    x = read_idx(REAL_DATA / "mnist" / "train-images-idx3-ubyte.gz", expected_shape=(None, 28, 28))
    y = read_idx(REAL_DATA / "mnist" / "train-labels-idx1-ubyte.gz")
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8
    assert y.shape == (60000,) and set(np.unique(y)) == set(range(10))
    counts = np.bincount(y, minlength=10)
    assert counts.min() > 5000 and counts.max() < 7000  # balanced-ish (5421 .. 6742)
    assert x.max() == 255 and x.min() == 0


def test_read_idx_tiny_files_and_wrong_expected_shape_names_file(tiny: TinyData) -> None:
    path = tiny.dir / "mnist" / "t10k-labels-idx1-ubyte.gz"
    assert read_idx(path).tolist() == tiny.arrays["mnist"]["test_labels"].tolist()
    images = read_idx(tiny.dir / "mnist" / "train-images-idx3-ubyte.gz", expected_shape=(None, 28, 28))
    assert images.dtype == np.uint8 and np.array_equal(images, tiny.arrays["mnist"]["train_images"])
    with pytest.raises(DataError, match=re.escape(str(path))):
        read_idx(path, expected_shape=(60000,))
    write_idx(path, np.zeros((5, 2), np.uint8))  # labels must be one-dimensional
    with pytest.raises(DataError, match=re.escape(str(path))):
        read_idx(path, expected_shape=(5,))


def test_parse_idx_multibyte_and_bad_headers(tmp_path: Path) -> None:
    data = np.arange(6, dtype=">i4").reshape(2, 3)
    raw = b"\x00\x00\x0c\x02" + np.array([2, 3], dtype=">u4").tobytes() + data.tobytes()
    out = parse_idx(raw)
    assert out.dtype == np.int32 and out.dtype.isnative and out.tolist() == data.tolist()
    # gzip detected by content, not by name
    plain = tmp_path / "plain.idx"
    plain.write_bytes(gzip.compress(raw))
    assert read_idx(plain).tolist() == data.tolist()
    with pytest.raises(DataError, match=r"magic"):
        parse_idx(b"\x01\x00\x08\x01" + raw[4:])
    with pytest.raises(DataError, match=r"type code"):
        parse_idx(b"\x00\x00\x07\x02" + raw[4:])
    with pytest.raises(DataError, match=r"data bytes"):
        parse_idx(raw[:-1])
    with pytest.raises(DataError, match=r"gzip"):
        (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b" + b"junk")
        read_idx(tmp_path / "bad.gz")
    with pytest.raises(DataError, match=r"not found"):
        read_idx(tmp_path / "absent.gz")


# --- checksums and downloads ----------------------------------------------------------------


@needs_real("MNIST and MD5SUMS", *sources.DATASET_FILES["mnist"], "MD5SUMS")
def test_known_md5_matches_shared_md5sums_and_files() -> None:
    table = dict(reversed(line.split()) for line in (REAL_DATA / "MD5SUMS").read_text().splitlines() if line)
    assert table, "MD5SUMS is empty"
    for key, md5 in table.items():
        assert KNOWN_MD5[key] == md5
    assert KNOWN_MD5["cifar-10-python.tar.gz"] == "c58f30108f718f92721af3b95e74349a"
    for key in sources.DATASET_FILES["mnist"]:
        assert md5_file(REAL_DATA / key) == table[key] == KNOWN_MD5[key]


def test_tiny_files_fail_the_canonical_md5s_naming_the_file(tmp_path: Path) -> None:
    """Without registered md5s the loaders check the canonical table: a tiny copy is not MNIST."""
    build_tiny_data(tmp_path)
    for name, first in (
        ("mnist", "mnist/train-images-idx3-ubyte.gz"),
        ("cifar10_subset", "cifar10-subset/cifar10-prefix-subset.npz"),
    ):
        with pytest.raises(DataError) as err:
            build_datamodule(name, tmp_path).prepare_data()
        assert str(tmp_path / first) in str(err.value) and KNOWN_MD5[first] in str(err.value)


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist", "cifar10", "cifar10_subset"])
def test_corrupted_copy_fails_md5_naming_file(tiny: TinyData, dataset: str) -> None:
    build_datamodule(dataset, tiny.dir).prepare_data()  # the intact copy passes its md5s
    key = sources.DATASET_FILES[dataset][-1]
    bad = tiny.dir / key
    raw = bytearray(bad.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad.write_bytes(bytes(raw))
    with pytest.raises(DataError) as err:
        build_datamodule(dataset, tiny.dir).prepare_data()
    msg = str(err.value)
    assert msg.startswith(dataset) and str(bad) in msg and "md5" in msg and tiny.md5[key] in msg
    assert "\n" not in msg
    # setup() without prepare_data() verifies too
    with pytest.raises(DataError, match=re.escape(bad.name + " md5")):
        build_datamodule(dataset, tiny.dir).setup()


def test_missing_dir_names_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for name in ("mnist", "fashion_mnist", "cifar10", "cifar10_subset"):
        with pytest.raises(DataError) as err:
            build_datamodule(name, missing).prepare_data()
        msg = str(err.value)
        assert str(missing) in msg and msg.startswith(name) and "\n" not in msg
    with pytest.raises(DataError, match=r"download=True"):
        build_datamodule("mnist", missing).setup()


def test_download_offline_names_file_dir_and_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = "http://127.0.0.1:9/"  # discard port: refused at once, like a machine with no network
    monkeypatch.setitem(sources.MIRRORS, "mnist", dead)
    t0 = time.perf_counter()
    with pytest.raises(DataError) as err:
        build_datamodule("mnist", tmp_path, download=True).prepare_data()
    assert time.perf_counter() - t0 < 10
    msg = str(err.value)
    assert "train-images-idx3-ubyte.gz" in msg and str(tmp_path / "mnist") in msg
    assert dead in msg and "\n" not in msg
    assert not list((tmp_path / "mnist").glob("*.part"))


def test_download_url_verifies_md5(tiny: TinyData, tmp_path: Path) -> None:
    src = tiny.dir / "mnist" / "t10k-labels-idx1-ubyte.gz"
    md5 = tiny.md5["mnist/t10k-labels-idx1-ubyte.gz"]
    dest = download_url(src.as_uri(), tmp_path / "sub" / "labels.gz", md5, "mnist")
    assert md5_file(dest) == md5
    with pytest.raises(DataError, match=r"wrong md5"):
        download_url(src.as_uri(), tmp_path / "other.gz", "0" * 32, "mnist")
    assert not (tmp_path / "other.gz").exists() and not list(tmp_path.glob("*.part"))


def test_download_fills_missing_files_from_mirror(
    tiny: TinyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sources.MIRRORS, "mnist", (tiny.dir / "mnist").as_uri() + "/")
    dest = tmp_path / "fresh"
    (dest / "mnist").mkdir(parents=True)
    kept = dest / "mnist" / "t10k-labels-idx1-ubyte.gz"  # present files are checked, not fetched again
    kept.write_bytes((tiny.dir / "mnist" / kept.name).read_bytes())
    paths = ensure_files("mnist", dest, sources.DATASET_FILES["mnist"], download=True)
    assert sorted(paths) == sorted(sources.DATASET_FILES["mnist"])
    for key, path in paths.items():
        verify_md5(path, tiny.md5[key])
    assert not list((dest / "mnist").glob("*.part"))
    dm = build_datamodule("mnist", dest)
    dm.setup()
    assert dm.y_train.tolist() == tiny.arrays["mnist"]["train_labels"].tolist()


def test_subset_has_no_download(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no public download"):
        build_datamodule("cifar10_subset", tmp_path, download=True).prepare_data()


def test_cifar_archive_extraction_skips_foreign_members(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("cifar-10-batches-py/readme.html", "evil.txt"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
    out = tmp_path / "out"
    _extract_cifar10(archive, out)
    assert (out / "cifar-10-batches-py" / "readme.html").read_bytes() == b"abc"
    assert not (out / "evil.txt").exists()


def test_hand_placed_cifar_archive_is_checked(tmp_path: Path) -> None:
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not the archive")
    with pytest.raises(DataError, match=r"cifar-10-python\.tar\.gz md5"):
        build_datamodule("cifar10", tmp_path).prepare_data()


# --- data modules on real files -------------------------------------------------------------


@needs_real_mnist
def test_mnist_datamodule_centred_and_in_range() -> None:
    """The whole real MNIST, read as psbench reads it (its load time is a benchmark's business, not a test's)."""
    dm = build_datamodule("mnist", REAL_DATA)
    dm.prepare_data()
    dm.setup()
    assert dm.input_shape == (1, 28, 28) and dm.num_classes == 10 and dm.num_train == 60000
    assert dm.x_train.shape == (60000, 1, 28, 28) and dm.x_train.dtype == torch.float32
    assert dm.y_train.shape == (60000,) and dm.y_train.dtype == torch.int64
    assert dm.x_test.shape == (10000, 1, 28, 28) and dm.y_test.shape == (10000,)
    assert dm.x_train.mean(0).abs().max() < 1e-5  # per-pixel mean subtracted
    raw = dm.x_train + dm.pixel_mean
    assert raw.min() >= -1e-6 and raw.max() <= 1 + 1e-6
    assert (dm.x_test + dm.pixel_mean).max() <= 1 + 1e-6
    batches = list(dm.test_dataloader())
    assert [len(b[1]) for b in batches] == [128] * 78 + [16]  # eval_batch_size 128 (10,000 = 78·128 + 16)
    assert torch.equal(torch.cat([b[1] for b in batches]), dm.y_test)
    assert torch.equal(next(iter(dm.val_dataloader()))[0], batches[0][0])


def test_idx_datamodule_on_tiny_files_scaled_centred_and_labelled(tiny: TinyData) -> None:
    written = tiny.arrays["mnist"]
    dm = build_datamodule("mnist", tiny.dir, eval_batch_size=2)
    dm.prepare_data()
    dm.setup()
    assert dm.input_shape == (1, 28, 28) and dm.num_train == 12 and dm.num_test == 5
    assert dm.x_train.shape == (12, 1, 28, 28) and dm.x_train.dtype == torch.float32
    assert dm.y_train.dtype == torch.int64 and dm.y_train.tolist() == written["train_labels"].tolist()
    assert dm.x_train.mean(0).abs().max() < 1e-5  # per-pixel mean of the training set subtracted
    raw = torch.from_numpy(written["train_images"][:, None]) / 255.0
    assert torch.allclose(dm.x_train + dm.pixel_mean, raw, atol=1e-6)
    test_raw = torch.from_numpy(written["test_images"][:, None]) / 255.0
    assert torch.allclose(dm.x_test + dm.pixel_mean, test_raw, atol=1e-6)  # the train mean, not the test's
    batches = list(dm.test_dataloader())
    assert [len(b[1]) for b in batches] == [2, 2, 1]
    assert torch.equal(torch.cat([b[1] for b in batches]), dm.y_test)


def test_fashion_mnist_subset_and_eval_batch_size(tiny: TinyData) -> None:
    dm = build_datamodule("fashion_mnist", tiny.dir, eval_batch_size=4, subset=5)
    assert dm.num_train == 5
    dm.setup()
    assert dm.x_train.shape == (5, 1, 28, 28) and dm.x_test.shape == (9, 1, 28, 28)
    assert dm.x_train.mean(0).abs().max() < 1e-5  # mean over the subset actually used
    assert [len(b[1]) for b in dm.test_dataloader()] == [4, 4, 1]
    assert dm.y_train.tolist() == tiny.arrays["fashion_mnist"]["train_labels"][:5].tolist()
    with pytest.raises(ConfigError, match=r"dataset\.subset"):
        build_datamodule("fashion_mnist", tiny.dir, subset=13).setup()


def test_cifar10_subset_npz_on_tiny_file(tiny: TinyData) -> None:
    written = tiny.arrays["cifar10_subset"]
    dm = build_datamodule("cifar10_subset", tiny.dir)
    dm.prepare_data()
    dm.setup()
    assert dm.input_shape == (3, 32, 32) and dm.num_train == 20 and dm.num_test == 10
    assert dm.y_test.tolist() == written["y_test"].tolist()
    raw = torch.from_numpy(written["x_train"]) / 255.0
    assert torch.allclose(dm.x_train + dm.pixel_mean, raw, atol=1e-6)
    path = tiny.dir / sources.CIFAR10_SUBSET_DIR / sources.CIFAR10_SUBSET_FILE
    np.savez(path, x_train=written["x_train"], y_train=written["y_train"], x_test=written["x_test"])
    with pytest.raises(DataError, match=r"lacks array y_test; expected"):
        build_datamodule("cifar10_subset", tiny.dir, verify=False).setup()
    np.savez(path, **{**written, "x_train": written["x_train"].astype(np.float32)})
    with pytest.raises(DataError, match=r"expected uint8 \[N,3,32,32\]"):
        build_datamodule("cifar10_subset", tiny.dir, verify=False).setup()
    path.write_bytes(b"not an npz")
    with pytest.raises(DataError, match=re.escape(f"cannot read {path}")):
        build_datamodule("cifar10_subset", tiny.dir, verify=False).setup()


def _truncated(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _garbled(raw: bytes) -> bytes:
    mid = len(raw) // 2
    return raw[:mid] + bytes(b ^ 0x5A for b in raw[mid : mid + 64]) + raw[mid + 64 :]


@pytest.mark.parametrize("damage", [_truncated, _garbled], ids=["truncated", "garbled"])
@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist", "cifar10", "cifar10_subset"])
def test_a_damaged_file_is_one_line_naming_it_whatever_verify_says(tiny: TinyData, dataset: str, damage) -> None:
    """Corruption found while reading (md5 checks skipped with verify=false) is a DataError naming the file."""
    for key in sources.DATASET_FILES[dataset]:
        path = tiny.dir / key
        raw = path.read_bytes()
        path.write_bytes(damage(raw))
        with pytest.raises(DataError) as err:
            build_datamodule(dataset, tiny.dir, verify=False).setup()
        assert str(path) in str(err.value) and "\n" not in str(err.value), str(err.value)
        path.write_bytes(raw)


def test_a_cifar_pickle_that_would_run_code_is_refused_and_runs_nothing(tiny: TinyData, tmp_path: Path) -> None:
    """The CIFAR batches are unpickled with numpy arrays and builtin data only, also without the md5 check."""
    import os

    marker = tmp_path / "created_by_the_pickle"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tiny.dir / sources.DATASET_FILES["cifar10"][0]
    path.write_bytes(pickle.dumps({b"data": Payload(), b"labels": []}, protocol=2))
    with pytest.raises(DataError) as err:
        build_datamodule("cifar10", tiny.dir, verify=False).setup()
    assert str(path) in str(err.value) and "system" in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


@needs_real("CIFAR-10 subset", *sources.DATASET_FILES["cifar10_subset"])
def test_cifar10_subset_shapes() -> None:
    dm = build_datamodule("cifar10_subset", REAL_DATA)
    dm.prepare_data()
    dm.setup()
    assert dm.input_shape == (3, 32, 32) and dm.num_train == 5085 and dm.num_test == 1017
    assert dm.x_train.shape == (5085, 3, 32, 32) and dm.x_test.shape == (1017, 3, 32, 32)
    assert dm.x_train.mean(0).abs().max() < 1e-5
    assert set(dm.y_train.unique().tolist()) == set(range(10))


def test_train_dataloader_seeded_shuffle() -> None:
    def first_labels(seed: int) -> list[int]:
        dm = build_datamodule("digits", "unused", seed=0, batch_size=64)
        dm.seed = seed  # same split, different batch order
        return next(iter(dm.train_dataloader()))[1].tolist()

    assert first_labels(1) == first_labels(1)
    assert first_labels(1) != first_labels(2)
    dm = build_datamodule("digits", "unused", batch_size=100)
    sizes = [len(y) for _, y in dm.train_dataloader()]
    assert sum(sizes) == 1437 and sizes[0] == 100


# --- generated data sets --------------------------------------------------------------------


def test_digits_split_deterministic_and_stratified() -> None:
    a, b, c = (build_datamodule("digits", "unused", seed=s) for s in (3, 3, 4))
    for dm in (a, b, c):
        dm.setup()
    assert a.x_train.shape == (1437, 1, 8, 8) and a.x_test.shape == (360, 1, 8, 8)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.y_train, c.y_train)
    assert np.bincount(a.y_test.numpy(), minlength=10).min() >= 35  # stratified: 35-37 each
    assert a.x_train.mean(0).abs().max() < 1e-5


def test_synthetic_deterministic_and_learnable() -> None:
    kw = dict(shape=(3, 8, 8), num_classes=5, num_train=500, num_test=200)
    a, b, c = (build_datamodule("synthetic", "unused", seed=s, **kw) for s in (0, 0, 1))
    for dm in (a, b, c):
        dm.setup()
    assert a.input_shape == (3, 8, 8) and a.num_classes == 5 and a.num_train == 500
    assert a.x_train.shape == (500, 3, 8, 8) and a.x_test.shape == (200, 3, 8, 8)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train)
    # nearest class centroid fitted on train, far above chance (0.2) on test
    xt, xs = a.x_train.flatten(1), a.x_test.flatten(1)
    centroids = torch.stack([xt[a.y_train == k].mean(0) for k in range(5)])
    acc = (torch.cdist(xs, centroids).argmin(1) == a.y_test).float().mean().item()
    assert acc > 0.8
    split = make_synthetic((1, 4), num_classes=3, num_train=9, num_test=3, seed=0)
    assert np.bincount(split.y_train).tolist() == [3, 3, 3]


def test_digits_labels_align_with_images_mlp_learns() -> None:
    """Full-batch SGD of the default MLP on preprocessed digits beats 90 % test accuracy."""
    dm = build_datamodule("digits", "unused", seed=0)
    dm.setup()
    torch.manual_seed(0)
    model = build_model("mlp", dm.input_shape, dm.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for _ in range(40):
        opt.zero_grad()
        F.cross_entropy(model(dm.x_train), dm.y_train).backward()
        opt.step()
    with torch.no_grad():
        acc = (model(dm.x_test).argmax(1) == dm.y_test).float().mean().item()
    assert acc > 0.9


# --- full CIFAR-10 pickle format on a tiny fake copy ----------------------------------------


def test_cifar10_pickle_reader_on_fake_batches(tmp_path: Path) -> None:
    written = write_cifar_batches(tmp_path)
    x, y = read_cifar_batch(tmp_path / "cifar-10-batches-py" / "data_batch_2")
    assert x.shape == (4, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    # row layout: 1024 red, 1024 green, 1024 blue values, each row-major 32×32
    assert np.array_equal(x[1, 2], written["data_batch_2"][1, 2048:].reshape(32, 32))

    dm = build_datamodule("cifar10", tmp_path, verify=False)
    dm.prepare_data()
    dm.setup()
    assert dm.x_train.shape == (20, 3, 32, 32) and dm.x_test.shape == (3, 3, 32, 32)
    assert dm.num_train == 20
    first = torch.from_numpy(written["data_batch_1"][0, :1024].reshape(32, 32)) / 255.0
    assert torch.allclose(dm.x_train[0, 0] + dm.pixel_mean[0], first, atol=1e-6)
    # with checksums on (the default) the fake files are rejected by name
    with pytest.raises(DataError, match=r"data_batch_1 md5"):
        build_datamodule("cifar10", tmp_path).prepare_data()


def test_cifar10_pickle_reader_rejects_malformed(tmp_path: Path) -> None:
    bad = tmp_path / "data_batch_1"
    bad.write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(DataError, match=r"expected uint8 \[N, 3072\]"):
        read_cifar_batch(bad)
    bad.write_bytes(b"not a pickle")
    with pytest.raises(DataError, match=re.escape(str(bad))):
        read_cifar_batch(bad)


# --- configuration errors -------------------------------------------------------------------


def test_unknown_name_and_option() -> None:
    with pytest.raises(ConfigError) as err:
        build_datamodule("svhn", "unused")
    assert err.value.key == "dataset.name" and err.value.value == "svhn"
    assert all(n in err.value.allowed for n in DATASET_NAMES)
    with pytest.raises(ConfigError, match=r"dataset\.shape"):
        build_datamodule("mnist", "unused", shape=(1, 2))
    with pytest.raises(ConfigError, match=r"dataset\.eval_batch_size"):
        build_datamodule("digits", "unused", eval_batch_size=0)
