"""Tiny data files in the standard formats, and where the real offline copies are.

Format tests write a few samples of MNIST/Fashion-MNIST (IDX gzip), CIFAR-10 (``cifar-10-batches-py``
pickles), the CIFAR-10 subset (``cifar10-subset/cifar10-prefix-subset.npz``), the JPEG CIFAR-10
(``cifar10-jpeg/cifar10-jpeg.zip``, :func:`write_cifar10_jpeg`), ImageNet's folders of JPEGs
(``imagenet/train/<wnid>/*.JPEG``, :func:`make_imagenet`) and ImageFolder trees (:func:`write_image_folder`,
:func:`zip_folder`) under a temporary dir,
in the layout of ``shared/datasets``, and register their md5s in :data:`psbench.data.checksum.KNOWN_MD5`
(the table every loader checks), so the real readers and checks run on any clone. Tests that need the
real files (their sizes, class balance, canonical md5s, learning on them) read them where they are —
``$PSBENCH_DATA``, else ``shared/datasets`` beside this checkout — never copied in, and skip with the
reason when they are absent.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from psbench.cli import shared_datasets
from psbench.data import sources
from psbench.data.checksum import md5_file

REPO = Path(__file__).resolve().parents[1]
REAL_DATA: Path | None = Path(os.environ["PSBENCH_DATA"]) if os.environ.get("PSBENCH_DATA") else shared_datasets(REPO)


def needs_real(what: str, *keys: str) -> pytest.MarkDecorator:
    """Skip unless the real files ``keys`` (``<folder>/<file>`` under the data dir) are present."""
    present = REAL_DATA is not None and all((REAL_DATA / k).is_file() for k in keys)
    return pytest.mark.skipif(not present, reason=f"needs the real {what} in ../shared/datasets or $PSBENCH_DATA")


needs_real_mnist = needs_real("MNIST", *sources.DATASET_FILES["mnist"])


def write_idx(path: Path, array: np.ndarray) -> None:
    """``array`` (uint8) as a gzip'd IDX file: magic 0x0000 08 <ndim>, big-endian dims, the bytes."""
    header = b"\x00\x00\x08" + bytes([array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes(), mtime=0))


def _labels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.permutation(np.arange(n) % 10).astype(np.uint8)


def write_idx_folder(folder: Path, n_train: int = 12, n_test: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    """The four canonical IDX files of MNIST/Fashion-MNIST with ``n_train``/``n_test`` 28×28 images."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for part, n in (("train", n_train), ("test", n_test)):
        arrays[f"{part}_images"] = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        arrays[f"{part}_labels"] = _labels(rng, n)
    for key, array in arrays.items():
        write_idx(folder / sources.IDX_FILES[key], array)
    return arrays


def write_cifar_batches(root: Path, per_batch: int = 4, n_test: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    """``cifar-10-batches-py/data_batch_1..5`` and ``test_batch``: pickled dicts of uint8 [N, 3072] rows."""
    folder = root / sources.CIFAR10_DIR
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    written = {}
    for name in (*sources.CIFAR10_TRAIN_BATCHES, sources.CIFAR10_TEST_BATCH):
        n = n_test if name == sources.CIFAR10_TEST_BATCH else per_batch
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n).tolist()
        entry = {b"batch_label": name.encode(), b"labels": labels, b"data": data, b"filenames": [b"x.png"] * n}
        with (folder / name).open("wb") as fh:
            pickle.dump(entry, fh, protocol=2)
        written[name] = data
    return written


def write_cifar_subset(root: Path, n_train: int = 20, n_test: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    """``cifar10-subset/cifar10-prefix-subset.npz``: x_train/x_test uint8 [N, 3, 32, 32], y_train/y_test."""
    rng = np.random.default_rng(seed)
    arrays = {
        "x_train": rng.integers(0, 256, size=(n_train, 3, 32, 32), dtype=np.uint8),
        "y_train": _labels(rng, n_train),
        "x_test": rng.integers(0, 256, size=(n_test, 3, 32, 32), dtype=np.uint8),
        "y_test": _labels(rng, n_test),
    }
    path = root / sources.CIFAR10_SUBSET_DIR / sources.CIFAR10_SUBSET_FILE
    path.parent.mkdir(parents=True)
    np.savez(path, **arrays)
    return arrays


def write_image_folder(
    root: Path,
    counts: dict[str, tuple[int, int]],
    size: tuple[int, int] = (8, 6),
    fmt: str = "png",
    mode: str = "RGB",
    seed: int = 0,
    test: str = "test",
    sizes: dict[str, tuple[int, int]] | None = None,
) -> dict[str, np.ndarray]:
    """``root/train/<class>/NNNN.<fmt>`` and ``root/<test>/<class>/NNNN.<fmt>``: ``counts[class]`` = (train, test)
    random images of ``size`` (H, W; ``sizes[relpath]`` for some other) in ``mode``. Returns each file's pixels
    as decoded by Pillow ([H, W] or [H, W, 3]), keyed by its path relative to ``root``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = {}
    for c, (n_train, n_test) in counts.items():
        for split, n in (("train", n_train), (test, n_test)):
            for k in range(n):
                rel = f"{split}/{c}/{k:04d}.{fmt}"
                h, w = (sizes or {}).get(rel, size)
                shape = (h, w) if mode == "L" else (h, w, 3)
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 256, size=shape, dtype=np.uint8)).save(path, quality=90)
                with Image.open(path) as im:
                    pixels[rel] = np.asarray(im)
    return pixels


def zip_folder(folder: Path, dest: Path, prefix: str = "") -> Path:
    """The files under ``folder`` as a zip sorted by path, stored (no compression), as ``cifar10-jpeg.zip`` is."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(path, prefix + path.relative_to(folder).as_posix())
    return dest


def write_cifar10_jpeg(root: Path, train: int = 2, test: int = 1, seed: int = 5) -> dict[str, np.ndarray]:
    """``cifar10-jpeg/cifar10-jpeg.zip``: the ten CIFAR-10 classes, ``train`` / ``test`` 32×32 JPEGs each."""
    tree = root / "cifar10-jpeg-tree"
    pixels = write_image_folder(
        tree, {c: (train, test) for c in sources.CIFAR10_CLASSES}, size=(32, 32), fmt="jpg", seed=seed
    )
    zip_folder(tree, root / sources.DATASET_FILES["cifar10_jpeg"][0])
    return pixels


@dataclass(frozen=True)
class TinyData:
    """A data dir holding every file-backed data set in a few samples: ``arrays[dataset][name]`` are the
    values written, ``md5[key]`` the md5 of each file (``key`` as in :data:`KNOWN_MD5`)."""

    dir: Path
    arrays: dict[str, dict[str, np.ndarray]]
    md5: dict[str, str]


def build_tiny_data(root: Path) -> TinyData:
    """Write tiny MNIST, Fashion-MNIST, CIFAR-10, CIFAR-10 subset and JPEG CIFAR-10 files under ``root``."""
    arrays = {
        "mnist": write_idx_folder(root / "mnist", seed=1),
        "fashion_mnist": write_idx_folder(root / "fashion-mnist", n_train=12, n_test=9, seed=2),
        "cifar10": write_cifar_batches(root, seed=3),
        "cifar10_subset": write_cifar_subset(root, seed=4),
        "cifar10_jpeg": write_cifar10_jpeg(root),
    }
    keys = [k for files in sources.DATASET_FILES.values() for k in files]
    return TinyData(root, arrays, {k: md5_file(root / k) for k in keys})


WNIDS = ("n01440764", "n01443537", "n01484850")


def make_imagenet(
    data_dir: Path,
    per_class: int = 6,
    val_per_class: int = 2,
    flat_val: bool = False,
    wnids: tuple[str, ...] = WNIDS,
    size: tuple[int, int] = (34, 70),
    seed: int = 0,
) -> Path:
    """``data_dir/imagenet`` in the ILSVRC-2012 layout: random-size JPEGs, each class a different colour."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = data_dir / "imagenet"

    def image(path: Path, label: int) -> None:
        h, w = (int(v) for v in rng.integers(*size, size=2))
        base = np.zeros((h, w, 3), np.uint8)
        base[..., label % 3] = 200
        noise = rng.integers(0, 55, size=(h, w, 3), dtype=np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(base + noise).save(path, quality=95)

    rows = ["ImageId,PredictionString"]
    for label, w in enumerate(wnids):
        for k in range(per_class):
            image(root / "train" / w / f"{w}_{k}.JPEG", label)
        for k in range(val_per_class):
            stem = f"ILSVRC2012_val_{label * val_per_class + k + 1:08d}"
            image(root / "val" / ("" if flat_val else w) / f"{stem}.JPEG", label)
            rows.append(f"{stem},{w} 1 2 30 40 {w} 3 4 20 20")
    if flat_val:
        (root / "LOC_val_solution.csv").write_text("\n".join(rows) + "\n")
    return root
