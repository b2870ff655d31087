"""dataset=image_folder and dataset=cifar10_jpeg: torchvision's ImageFolder layout read with Pillow from a folder or a
zip the tests write (the layout of ../shared/datasets/cifar10-jpeg), the balanced order, the decode cache, md5
checks, corrupt and truncated zips refused in one line before any MLflow run, ``data_note`` in summary.json and
MLflow; the real zip where it is (skipped without it)."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from data_files import REAL_DATA, build_tiny_data, needs_real, write_image_folder, zip_folder
from psbench.data import build_datamodule, image_folder, sources
from psbench.data.checksum import KNOWN_MD5, md5_file
from psbench.data.image_folder import Source, balanced_order, check_source, load_image_folder, scan
from psbench.errors import ConfigError, DataError
from test_cli import TINY_MD5_DRIVER, assert_one_line_error, job_dirs

COUNTS = {"cat": (4, 2), "dog": (3, 1), "emu": (5, 2)}  # (train, test) per class: unequal on purpose
JPEG_KEY = sources.DATASET_FILES["cifar10_jpeg"][0]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    folder = tmp_path / "pets"
    return folder, write_image_folder(folder, COUNTS)


def expected(pixels: dict[str, np.ndarray], split: str) -> tuple[np.ndarray, np.ndarray]:
    """The images of ``split`` in the documented order: sorted within class, interleaved by (rank, class)."""
    classes = sorted(COUNTS)
    files = {c: sorted(f for f in pixels if f.startswith(f"{split}/{c}/")) for c in classes}
    order = sorted(((r, i, f) for i, c in enumerate(classes) for r, f in enumerate(files[c])))
    x = np.stack([pixels[f].transpose(2, 0, 1) for _, _, f in order])
    return x, np.asarray([i for _, i, _ in order])


@pytest.mark.parametrize("kind", ["folder", "zip", "zip_in_a_folder"])
def test_folder_and_zip_decode_every_image_in_the_balanced_order(tree, tmp_path, kind):
    folder, pixels = tree
    path = {"folder": folder, "zip": tmp_path / "pets.zip", "zip_in_a_folder": tmp_path / "wrapped.zip"}[kind]
    if kind != "folder":
        zip_folder(folder, path, prefix="pets/" if kind == "zip_in_a_folder" else "")
    d = load_image_folder(path)
    assert d.classes == ("cat", "dog", "emu")
    for split, x, y in (("train", d.x_train, d.y_train), ("test", d.x_test, d.y_test)):
        want_x, want_y = expected(pixels, split)
        assert x.dtype == np.uint8 and x.shape == (len(want_x), 3, 8, 6)
        np.testing.assert_array_equal(x, want_x)  # PNG: exact pixels, [N, C, H, W]
        np.testing.assert_array_equal(y, want_y)
    assert d.train_files[:3] == ["train/cat/0000.png", "train/dog/0000.png", "train/emu/0000.png"]


def test_every_prefix_is_balanced_within_one():
    rng = np.random.default_rng(0)
    labels = np.sort(rng.integers(0, 7, size=500))  # grouped by class, as the files are listed
    order = balanced_order(labels)
    assert sorted(order.tolist()) == list(range(500))
    counts = np.bincount(labels, minlength=7)
    prefix = np.zeros(7, int)
    for k, i in enumerate(order[: 7 * counts.min()], 1):
        prefix[labels[i]] += 1
        assert prefix.max() - prefix.min() <= 1, k
    for c in range(7):  # within a class the file order is kept
        mine = order[labels[order] == c]
        assert (np.diff(mine) > 0).all()


def test_subset_is_the_balanced_prefix(tree, tmp_path):
    folder, _ = tree
    dm = build_datamodule("image_folder", tmp_path / "data", path=str(folder), subset=7)
    dm.setup()
    assert dm.num_train == 7 and dm.input_shape == (3, 8, 6) and dm.num_classes == dm.output_size == 3
    assert np.bincount(dm.y_train.numpy()).tolist() == [3, 2, 2]
    assert dm.task == "classification" and abs(float(dm.x_train.mean())) < 0.05  # unit_mean: x/255 − mean
    raw = build_datamodule("image_folder", tmp_path / "data", path=str(folder), preprocess="none")
    raw.setup()
    assert raw.x_train.max() > 1 and torch.equal(raw.x_train, raw.x_train.round())  # the pixels as they are


def test_greyscale_is_one_channel_and_mixed_modes_are_rgb(tmp_path):
    grey = tmp_path / "grey"
    pixels = write_image_folder(grey, {"a": (2, 1), "b": (2, 1)}, mode="L")
    d = load_image_folder(grey)
    assert d.x_train.shape == (4, 1, 8, 6)
    np.testing.assert_array_equal(d.x_train[0, 0], pixels["train/a/0000.png"])
    write_image_folder(grey, {"c": (1, 0)}, seed=3)  # one RGB image among greyscale ones
    d = load_image_folder(grey)
    assert d.x_train.shape == (5, 3, 8, 6) and d.x_test.shape == (2, 3, 8, 6)
    first = d.train_files.index("train/a/0000.png")
    for ch in range(3):  # a greyscale image in an RGB data set: its value in every channel
        np.testing.assert_array_equal(d.x_train[first, ch], pixels["train/a/0000.png"])


def test_different_sizes_need_resize(tmp_path):
    folder = tmp_path / "sizes"
    write_image_folder(folder, {"a": (2, 1), "b": (2, 1)}, sizes={"train/b/0001.png": (10, 7)})
    with pytest.raises(DataError) as err:
        load_image_folder(folder)
    msg = str(err.value)
    assert "\n" not in msg and "train/b/0001.png is 10×7" in msg and "dataset.resize" in msg
    d = load_image_folder(folder, resize=[5, 4])
    assert d.x_train.shape == (4, 3, 5, 4) and d.x_test.shape == (2, 3, 5, 4)


def test_layout_errors_are_one_line(tmp_path):
    def refused(path: Path, *needles: str, classes=None) -> None:
        with pytest.raises(DataError) as err:
            load_image_folder(path, classes=classes)
        assert "\n" not in str(err.value) and all(n in str(err.value) for n in needles), str(err.value)

    folder = tmp_path / "a"
    write_image_folder(folder, {"cat": (2, 1), "yak": (0, 1)})  # a test class that train/ lacks
    refused(folder, "test/yak/", "missing from train/")
    (folder / "train" / "yak").mkdir()
    refused(folder, "train/yak/", "holds no images")
    (folder / "train" / "yak").rmdir()
    refused(zip_folder(folder, tmp_path / "a.zip"), "a.zip:test/yak/", "missing from train/")
    b = tmp_path / "b"
    write_image_folder(b, {"cat": (2, 1), "dog": (1, 1)}, test="val")  # val/ is the test split
    assert load_image_folder(b).x_test.shape[0] == 2
    refused(b, "classes cat, dog", classes=["cat", "emu"])
    assert load_image_folder(b, classes=["dog", "cat"]).classes == ("dog", "cat")
    write_image_folder(b, {"cat": (0, 1)})
    refused(b, "both test/ and val/")
    refused(tmp_path / "b" / "train", "no train/<class>/ folders")
    with pytest.raises(ConfigError, match=r"dataset\.path="):
        load_image_folder(tmp_path / "nowhere")


def test_second_load_reads_the_cache_and_a_corrupt_cache_is_rebuilt(tree, tmp_path, monkeypatch):
    folder, _ = tree
    cache = tmp_path / "data" / "cache"
    first = load_image_folder(folder, cache_dirs=[cache])
    (written,) = cache.iterdir()  # one file, no temporary left behind
    assert written.name.startswith("image_folder-pets-") and written.suffix == ".npz"
    with np.load(written, allow_pickle=False) as npz:  # an uncompressed npz of uint8 arrays and the order
        np.testing.assert_array_equal(npz["x_train"], first.x_train)
        assert list(npz["train_files"]) == first.train_files
    decoded = []
    real = image_folder.decode_images
    monkeypatch.setattr(image_folder, "decode_images", lambda *a, **k: decoded.append(1) or real(*a, **k))
    again = load_image_folder(folder, cache_dirs=[cache])
    assert decoded == []  # from the cache: nothing decoded
    np.testing.assert_array_equal(again.x_train, first.x_train)
    assert again.train_files == first.train_files and again.classes == first.classes
    written.write_bytes(written.read_bytes()[: written.stat().st_size // 2])  # a truncated cache
    rebuilt = load_image_folder(folder, cache_dirs=[cache])
    assert decoded == [1, 1]  # both splits decoded again, and the cache replaced
    np.testing.assert_array_equal(rebuilt.x_test, first.x_test)
    assert load_image_folder(folder, cache_dirs=[cache]) is not None and decoded == [1, 1]
    write_image_folder(folder, {"cat": (1, 0)}, seed=9)  # a changed image: a new identity, decoded again
    changed = load_image_folder(folder, cache_dirs=[cache])
    assert decoded == [1, 1, 1, 1] and not np.array_equal(changed.x_train, first.x_train)


def test_cache_goes_to_the_data_dir_else_the_root_dir(tree, tmp_path):
    folder, _ = tree
    data, root = tmp_path / "data", tmp_path / "root"
    data.mkdir()
    dm = build_datamodule("image_folder", data, root_dir=root, path=str(folder))
    dm.setup()
    assert len(list((data / "cache").iterdir())) == 1 and not (root / "cache").exists()
    ro = tmp_path / "readonly"
    ro.mkdir()
    ro.chmod(0o555)  # read-only by its bits: not written, even by root
    try:
        dm = build_datamodule("image_folder", ro, root_dir=root, path=str(folder))
        dm.setup()
        assert list(ro.iterdir()) == [] and len(list((root / "cache").iterdir())) == 1
    finally:
        ro.chmod(0o755)


def test_md5_is_checked_for_a_zip(tree, tmp_path):
    folder, _ = tree
    z = zip_folder(folder, tmp_path / "pets.zip")
    good = md5_file(z)
    assert load_image_folder(z, md5=good).x_train.shape[0] == 12
    with pytest.raises(DataError) as err:
        check_source(z, md5="0" * 32)
    assert str(z) in str(err.value) and good in str(err.value) and "0" * 32 in str(err.value)
    with pytest.raises(ConfigError, match=r"dataset\.md5=.*a folder"):
        check_source(folder, md5=good)
    dm = build_datamodule("image_folder", tmp_path, path=str(z), md5="0" * 32, verify=False)  # not checked
    dm.setup()
    assert dm.num_train == 12


def flip_a_byte_inside(z: Path, member: str) -> None:
    """One byte of ``member``'s data changed, the zip's size and directory kept."""
    with zipfile.ZipFile(z) as zf:
        info = zf.getinfo(member)
    raw = bytearray(z.read_bytes())
    at = info.header_offset
    start = (
        at + 30 + int.from_bytes(raw[at + 26 : at + 28], "little") + int.from_bytes(raw[at + 28 : at + 30], "little")
    )
    raw[start + info.compress_size // 2] ^= 0xFF
    z.write_bytes(bytes(raw))


def test_corrupt_and_truncated_zips_are_refused(tree, tmp_path):
    folder, _ = tree
    z = zip_folder(folder, tmp_path / "pets.zip")
    flip_a_byte_inside(z, "train/dog/0001.png")
    with pytest.raises(DataError, match=re.escape(f"{z}:train/dog/0001.png") + r".*CRC"):
        load_image_folder(z)
    short = tmp_path / "short.zip"
    short.write_bytes(zip_folder(folder, tmp_path / "whole.zip").read_bytes()[:-100])
    with pytest.raises(DataError, match=re.escape(f"{short} is not a readable zip")):
        check_source(short)


def test_max_memory_mb_refuses_before_decoding(tree):
    folder, _ = tree
    with pytest.raises(
        ConfigError,
        match=r"dataset\.max_memory_mb=1e-05 is invalid: allowed at least 0\.00934 for 17 "
        r"images of 3×8×6",
    ):
        check_source(folder, max_memory_mb=1e-5)


# ---------------------------------------------------------------------------------------- through the CLI
@pytest.mark.parametrize("damage", ["corrupt", "truncated"])
def test_cli_refuses_a_damaged_zip_in_one_line_before_any_run(
    run_psbench, mlflow_runs, psbench_root, tree, tmp_path, damage
):
    folder, _ = tree
    z = zip_folder(folder, tmp_path / "pets.zip")
    md5 = md5_file(z)
    if damage == "corrupt":  # the same size, one byte changed: the md5 says so before any run
        flip_a_byte_inside(z, "test/emu/0001.png")
        args, needles = [f"dataset.md5={md5}"], [str(z), "md5", md5]
    else:  # no md5 given: the zip's directory is gone
        z.write_bytes(z.read_bytes()[: z.stat().st_size // 2])
        args, needles = [], [str(z), "not a readable zip"]
    proc = run_psbench(
        "dataset=image_folder",
        f"dataset.path={z}",
        *args,
        "learners=2",
        "batch_size=2",
        "epochs=1",
        "trainer.progress=none",
        root=psbench_root,
    )
    assert_one_line_error(proc, psbench_root, mlflow_runs, *needles)
    assert mlflow_runs(psbench_root) == [] and job_dirs(psbench_root) == []


def test_cifar10_jpeg_run_carries_its_data_note(run_psbench, mlflow_runs, psbench_root, tmp_path):
    """A tiny cifar10-jpeg.zip (10 classes × 2 train / 1 test JPEGs, its md5 registered) trains; summary.json and the
    MLflow tag say the images are a JPEG re-encoding, a sweep's own data_note kept beside it."""
    tiny = build_tiny_data(tmp_path / "data")
    env = {"PSBENCH_DATA": str(tiny.dir), "PSBENCH_TEST_MD5": json.dumps(tiny.md5)}
    proc = run_psbench(
        "dataset=cifar10_jpeg",
        "learners=2",
        "batch_size=5",
        "epochs=1",
        "trainer.progress=none",
        "+tags.data_note=1_epoch",
        root=psbench_root,
        env=env,
        driver=TINY_MD5_DRIVER,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = job_dirs(psbench_root)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["samples"] == 20 and summary["data_note"] == "cifar10_jpeg_q75"
    (run,) = mlflow_runs(psbench_root)
    assert run["tags"]["data_note"] == "cifar10_jpeg_q75; 1_epoch" and run["tags"]["dataset"] == "cifar10_jpeg"
    cache = list((tiny.dir / "cache").iterdir())
    assert len(cache) == 1 and cache[0].name.startswith("image_folder-cifar10-jpeg-")


def test_cifar10_jpeg_config_is_checked_up_front(compose_cfg, tmp_path, monkeypatch):
    from psbench.validate import validate

    tiny = build_tiny_data(tmp_path / "data")
    monkeypatch.setitem(KNOWN_MD5, JPEG_KEY, tiny.md5[JPEG_KEY])
    data = f"paths.data_dir={tiny.dir}"
    validate(compose_cfg("dataset=cifar10_jpeg", data, "experiment=zhang/fig3"))  # a CIFAR preset, the data swapped
    with pytest.raises(ConfigError, match=r"dataset\.data_note=None is invalid: allowed cifar10_jpeg_q75"):
        validate(compose_cfg("dataset=cifar10_jpeg", data, "dataset.data_note=null"))
    with pytest.raises(ConfigError, match=r"dataset\.download=True .*no public download"):
        validate(compose_cfg("dataset=cifar10_jpeg", data, "dataset.download=true"))
    with pytest.raises(DataError, match=re.escape(f"cifar10-jpeg.zip not found in {tmp_path / 'none'}/cifar10-jpeg")):
        validate(compose_cfg("dataset=cifar10_jpeg", f"paths.data_dir={tmp_path / 'none'}"))
    with pytest.raises(ConfigError, match=r"dataset\.path=None is invalid"):
        validate(compose_cfg("dataset=image_folder"))
    with pytest.raises(ConfigError, match=r"dataset\.resize=\[3\] is invalid: allowed null"):
        validate(compose_cfg("dataset=image_folder", f"dataset.path={tmp_path}", "dataset.resize=[3]"))
    with pytest.raises(ConfigError, match=r"dataset\.md5='abc' is invalid"):
        validate(compose_cfg("dataset=image_folder", f"dataset.path={tmp_path}", "dataset.md5=abc"))
    dm = build_datamodule("cifar10_jpeg", tiny.dir)
    dm.prepare_data()
    dm.setup()
    assert (dm.num_train, dm.num_test, dm.input_shape, dm.num_classes) == (20, 10, (3, 32, 32), 10)
    assert dm.y_train[:10].tolist() == list(range(10))  # CIFAR-10's label order, interleaved


# ---------------------------------------------------------------------------------------- the real zip
needs_real_jpeg = needs_real("CIFAR-10 JPEG zip", JPEG_KEY)


@needs_real_jpeg
def test_real_cifar10_jpeg_zip_layout_and_md5():
    path = REAL_DATA / JPEG_KEY
    assert md5_file(path) == KNOWN_MD5[JPEG_KEY] == "e2c46d305c23e5eb9856381653688d0d"
    with Source(path, "cifar10_jpeg") as src:
        layout = scan(src, sources.CIFAR10_CLASSES)
    assert layout.classes == sources.CIFAR10_CLASSES == tuple(sorted(sources.CIFAR10_CLASSES))
    assert (len(layout.train), len(layout.test)) == (50000, 10000)
    assert np.bincount(layout.train_labels).tolist() == [5000] * 10
    assert np.bincount(layout.test_labels).tolist() == [1000] * 10
    assert layout.train[:2] == ["train/airplane/0000.jpg", "train/automobile/0000.jpg"]
    assert layout.train[-1] == "train/truck/4999.jpg"


@pytest.mark.slow
@needs_real_jpeg
def test_real_cifar10_jpeg_decodes_to_60000_images(tmp_path):
    d = load_image_folder(
        REAL_DATA / JPEG_KEY,
        md5=KNOWN_MD5[JPEG_KEY],
        classes=sources.CIFAR10_CLASSES,
        cache_dirs=[tmp_path],
        dataset="cifar10_jpeg",
    )  # the cache here, not in the data dir
    assert d.x_train.shape == (50000, 3, 32, 32) and d.x_test.shape == (10000, 3, 32, 32)
    assert np.bincount(d.y_train[:1000]).tolist() == [100] * 10  # dataset.subset=1000 is balanced
    assert len(os.listdir(tmp_path)) == 1


def test_any_data_set_takes_a_data_note(compose_cfg, tmp_path):
    from psbench.tracking.run_info import run_tags
    from psbench.validate import validate

    cfg = compose_cfg("dataset=digits", "+dataset.data_note=digits_rescanned")
    validate(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert run_tags(resolved)["data_note"] == "digits_rescanned"
    resolved["tags"] = {"data_note": "ci_scale"}
    assert run_tags(resolved)["data_note"] == "digits_rescanned; ci_scale"
    resolved["tags"] = {"data_note": "digits_rescanned"}  # the same note once
    assert run_tags(resolved)["data_note"] == "digits_rescanned"
    assert build_datamodule("digits", tmp_path, data_note="x").num_train == 1437  # not the data module's concern
    with pytest.raises(ConfigError, match=r"dataset\.data_note=''"):
        validate(compose_cfg("dataset=digits", "+dataset.data_note=''"))
