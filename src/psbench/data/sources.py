"""Where each data set's raw files live: folder layout under ``data_dir`` and canonical URLs.

The layout matches ``shared/datasets`` (``mnist/``, ``fashion-mnist/``, ``cifar10-subset/``, ``cifar10-jpeg/``)
plus torchvision's ``cifar-10-batches-py/`` for the full CIFAR-10, and ImageNet's ILSVRC-2012 folders
(``imagenet/train/<wnid>/*.JPEG``, :mod:`psbench.data.imagenet`), which are never downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Base URLs of the IDX mirrors; a file's URL is ``base + file name``.
MIRRORS: dict[str, str] = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "fashion-mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
}

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_BATCH = "test_batch"

CIFAR10_SUBSET_DIR = "cifar10-subset"
CIFAR10_SUBSET_FILE = "cifar10-prefix-subset.npz"

#: all 60,000 CIFAR-10 images re-encoded as JPEG q75 (``train|test/<class>/NNNN.jpg``; no public download)
CIFAR10_JPEG_DIR = "cifar10-jpeg"
CIFAR10_JPEG_FILE = "cifar10-jpeg.zip"
#: CIFAR-10's classes in label order (``batches.meta``'s ``label_names``)
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}

#: Raw files (``<folder>/<file>`` relative to ``data_dir``) each file-backed data set reads.
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "mnist": tuple(f"mnist/{f}" for f in IDX_FILES.values()),
    "fashion_mnist": tuple(f"fashion-mnist/{f}" for f in IDX_FILES.values()),
    "cifar10": tuple(f"{CIFAR10_DIR}/{f}" for f in (*CIFAR10_TRAIN_BATCHES, CIFAR10_TEST_BATCH)),
    "cifar10_subset": (f"{CIFAR10_SUBSET_DIR}/{CIFAR10_SUBSET_FILE}",),
    "cifar10_jpeg": (f"{CIFAR10_JPEG_DIR}/{CIFAR10_JPEG_FILE}",),
}


def source_url(key: str) -> str | None:
    """Canonical download URL of raw file ``key``; None when it has no public source."""
    folder, _, name = key.partition("/")
    if folder in MIRRORS:
        return MIRRORS[folder] + name
    if folder == CIFAR10_DIR or key == CIFAR10_ARCHIVE:
        return CIFAR10_URL
    return None


#: labels of a flat ``val/*.JPEG`` (Kaggle's ILSVRC-2012 files): ``ImageId,PredictionString``
SOLUTION_CSV = "LOC_val_solution.csv"


def images_root(data_dir: str | Path) -> Path | None:
    """The folder holding ``train/``: ``<data_dir>/imagenet`` or its Kaggle form; None if neither has one."""
    base = Path(data_dir).expanduser() / "imagenet"
    for root in (base, base / "ILSVRC" / "Data" / "CLS-LOC"):
        if (root / "train").is_dir():
            return root
    return None


def solution_csv(root: Path, base: Path) -> Path | None:
    return next((p for p in (root / SOLUTION_CSV, base / SOLUTION_CSV) if p.is_file()), None)


def _has_folder(folder: Path) -> bool:
    with os.scandir(folder) as it:
        return any(e.is_dir() for e in it)


def missing(data_dir: str | Path) -> str | None:
    """What the ImageNet layout under ``data_dir`` lacks, in a few words; None when it is complete (no file read)."""
    base = Path(data_dir).expanduser() / "imagenet"
    root = images_root(data_dir)
    if root is None:
        return f"{base}/train/<wnid>/*.JPEG (no train/ folder)"
    if not _has_folder(root / "train"):
        return f"{root}/train/<wnid>/ class folders (train/ has none)"
    val = root / "val"
    if not val.is_dir():
        return f"{val}/ (validation: val/<wnid>/*.JPEG or flat val/*.JPEG with {SOLUTION_CSV})"
    if not _has_folder(val) and solution_csv(root, base) is None:
        return f"{SOLUTION_CSV} beside {val} (flat val/*.JPEG needs its labels)"
    return None
