"""The ``dataset`` config group: one option per data set of :mod:`psbench.data`, with its keys; a node with
``_target_`` (a user's datasets or LightningDataModule, :mod:`psbench.data.target`) takes any keys."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psbench.errors import ConfigError, require
from psbench.machine import physical_memory
from psbench.schema import MAX_COUNT, Group, Key, Keys, boolean, get, integer, number, one_of, sequence, text

#: the data layers of the papers' code (:mod:`psbench.data.preprocess`; kept here torch-free), and ``none``
PREPROCESS = ("unit_mean", "mean", "symmetric", "per_image", "minmax250", "none")
#: the note every run on ``dataset=cifar10_jpeg`` carries (summary.json ``data_note``, MLflow tag ``data_note``)
CIFAR10_JPEG_NOTE = "cifar10_jpeg_q75"

_COUNT = integer(1, MAX_COUNT)
_SUBSET = integer(1, MAX_COUNT, null="all training samples", words="(the first N training samples)")
_COMMON: Keys = {
    "download": boolean(),  # fetch the standard files if missing
    "eval_batch_size": _COUNT,
    "subset": _SUBSET,
    "verify": boolean().optional(),  # md5 checks of the raw files
    "preprocess": one_of(*PREPROCESS).optional(),  # the paper's data layer
    "data_note": text(null="no note", what="a short note on the data, e.g. cifar10_jpeg_q75").optional(),
}
_MD5 = Key(
    lambda v: v is None or (isinstance(v, str) and re.fullmatch(r"[0-9a-fA-F]{32}", v) is not None),
    "null (not checked) or the file's md5, 32 hex digits",
)
#: the keys of the data sets read from a user's file (dataset.path)
_FILE: Keys = {
    "path": text(what="the path of the data (set dataset.path=...)"),
    "md5": _MD5,
    "verify": _COMMON["verify"],
    "eval_batch_size": _COMMON["eval_batch_size"],
    "subset": _COMMON["subset"],
    "data_note": _COMMON["data_note"],
}
DATASET_KEYS: dict[str, Keys] = {
    "digits": {**_COMMON, "test_size": integer(1, 1796).optional()},
    "mnist": _COMMON,
    "fashion_mnist": _COMMON,
    "cifar10": _COMMON,
    "cifar10_subset": _COMMON,
    "cifar10_jpeg": _COMMON,
    "image_folder": {
        **_FILE,
        "preprocess": one_of(*PREPROCESS),
        "resize": sequence(
            integer(1), length=2, null="every image already the same size", what="[H, W], two integers >= 1"
        ),
        "classes": sequence(
            text(),
            min_length=1,
            null="the sorted class folders of train/",
            what="a list of the class folder names in label order",
        ),
        "max_memory_mb": number(0, lo_open=True, unit="MiB of decoded float32 images"),
    },
    "arrays": {
        **_FILE,
        "preprocess": one_of(*PREPROCESS, null="unit_mean for uint8 x (pixels), none for other dtypes"),
        "num_classes": integer(2, null="the largest label + 1"),
    },
    "synthetic": {
        **_COMMON,
        "shape": sequence(_COUNT, min_length=1, what="a list of integers >= 1, e.g. [1, 8, 8]"),
        "num_classes": integer(2, MAX_COUNT),
        "num_train": _COUNT,
        "num_test": _COUNT,
        "separation": number(0).optional(),
        "noise": number(0).optional(),
    },
    "imagenet": {
        "download": boolean(),
        "eval_batch_size": _COUNT,
        "subset": _COMMON["subset"],
        "classes": integer(1, MAX_COUNT, null="all classes", words="(the first N wnids in sorted order)"),
        "crop": integer(1, null="the model's crop (alexnet 227, googlenet and vgg_a 224)"),
        "resize": integer(1, words="(the shorter side before cropping, Caffe's 256)"),
        "mean": sequence(number(), length=3, what="three per-channel means, BGR (Caffe's [104, 117, 123])"),
        "prefetch": integer(0, words="(training crops decoded ahead of the stream)"),
        "threads": integer(1, words="(decoding threads)"),
        "data_note": _COMMON["data_note"],
    },
}
DATASET_NAMES = tuple(DATASET_KEYS)
#: psbench's own keys of a ``_target_`` data set node (the others are the target's arguments:
#: :mod:`psbench.data.target`)
TARGET_KEYS: Keys = {
    "name": text(what="a short name of the data set (run names, tags)").optional(),
    "subset": _SUBSET.optional(),
    "eval_batch_size": _COUNT.optional(),
    "data_note": _COMMON["data_note"],
}

#: the papers' ImageNet crops per model: Caffe's bvlc_alexnet ``crop_size: 227`` (Rudra §4.2, Zhang §4.3.2 and
#: TernGrad §4.2 train Caffe's AlexNet), bvlc_googlenet's 224 (TernGrad §4.2), VGG's 224 (TernGrad §5)
IMAGENET_CROPS = {"alexnet": 227, "googlenet": 224, "vgg_a": 224}


def imagenet_crop(crop: int | None, model: str) -> int:
    """``dataset.crop``, or the model's paper crop when null."""
    if crop is not None:
        return int(crop)
    if model not in IMAGENET_CROPS:
        raise ConfigError(
            "dataset.crop",
            None,
            f"an integer >= 1 with model={model} (only "
            + ", ".join(f"{m} ({c})" for m, c in IMAGENET_CROPS.items())
            + " have a paper crop)",
        )
    return IMAGENET_CROPS[model]


def file_options(name: str, ds: Mapping[str, Any], data_dir: str | Path) -> dict[str, Any]:
    """The source of ``image_folder`` / ``cifar10_jpeg`` as :func:`~psbench.data.image_folder.load_image_folder`'s
    arguments (``path``, ``md5`` when checked, ``classes``, ``resize``, ``max_memory_mb``, ``dataset``)."""
    from psbench.data import sources
    from psbench.data.checksum import expected_md5

    verify = ds.get("verify", True) is not False
    if name == "cifar10_jpeg":
        key = sources.DATASET_FILES[name][0]
        return {
            "path": Path(data_dir).expanduser() / key,
            "md5": expected_md5(key) if verify else None,
            "classes": sources.CIFAR10_CLASSES,
            "resize": None,
            "max_memory_mb": None,
            "dataset": name,
        }
    return {
        "path": ds.get("path"),
        "md5": ds.get("md5") if verify else None,
        "classes": ds.get("classes"),
        "resize": ds.get("resize"),
        "max_memory_mb": ds.get("max_memory_mb"),
        "dataset": name,
    }


def check_files(name: str, ds: Mapping[str, Any], data_dir: str | Path) -> Any:
    """The up-front check of the data sets read from a file (:mod:`psbench.validate`, before any run exists):
    present, md5 when known, the zip's directory or the npz's headers, the layout; nothing decoded.
    Returns ``arrays``' :class:`~psbench.data.arrays.Header` (None for images)."""
    if name == "arrays":
        from psbench.data.arrays import check_file

        return check_file(ds["path"], ds.get("md5") if ds.get("verify", True) is not False else None)
    from psbench.data.image_folder import check_source

    if name == "cifar10_jpeg":
        from psbench.data import sources
        from psbench.data.download import ensure_files

        ensure_files(name, data_dir, sources.DATASET_FILES[name], download=False, verify=False)
    check_source(**file_options(name, ds, data_dir))
    return None


def _check_files(cfg: Mapping[str, Any]) -> None:
    """The data sets read from a user's file or ``cifar10_jpeg``'s zip: the file present, its md5 when known, the
    zip's directory and layout or the npz's headers (:func:`check_files`; nothing is decoded), so a
    missing, corrupt or truncated file is refused before any run exists."""
    ds = cfg["dataset"]
    name = ds["name"]
    if name == "cifar10_jpeg":
        require(
            ds.get("data_note") == CIFAR10_JPEG_NOTE,
            "dataset.data_note",
            ds.get("data_note"),
            f"{CIFAR10_JPEG_NOTE} (every run on the JPEG re-encoding says so)",
        )
        require(
            not ds["download"],
            "dataset.download",
            ds["download"],
            "false (cifar10-jpeg.zip has no public download: copy it to paths.data_dir/cifar10-jpeg/)",
        )
    header = check_files(name, ds, cfg["paths"]["data_dir"])
    if header is not None and header.task == "regression":  # float targets: no classes to count
        require(
            ds.get("num_classes") is None,
            "dataset.num_classes",
            ds.get("num_classes"),
            f"null with float targets y (regression), as {ds['path']} has",
        )


def _check_synthetic(ds: Mapping[str, Any]) -> None:
    """The seeded draw fits in half this machine's memory: its float32 samples and float64 class centres."""
    memory = physical_memory()
    size = math.prod(ds["shape"])
    need = 4 * size * (ds["num_train"] + ds["num_test"]) + 8 * size * ds["num_classes"]
    if memory is not None and need > memory // 2:
        raise ConfigError(
            "dataset.shape",
            ds["shape"],
            f"a size whose samples fit in half this machine's memory ({memory / 2**30:.1f} GiB): "
            f"{ds['num_train']} + {ds['num_test']} samples of {size:,} floats and {ds['num_classes']} "
            f"class centres take {need / 2**30:.3g} GiB",
        )


def _check(cfg: Mapping[str, Any]) -> None:
    """ImageNet: a crop for the model within the resized image, the sim engine without local steps, and the
    folders present under ``paths.data_dir`` (checked here, before any run exists; no file is opened).
    The data sets read from one file: :func:`_check_files`; synthetic's size: :func:`_check_synthetic`."""
    ds = cfg["dataset"]
    if "_target_" in ds:  # a user's datasets: checked as they are read (psbench.data.target), before any run
        return
    if ds["name"] == "synthetic":
        _check_synthetic(ds)
        return
    if ds["name"] in ("image_folder", "arrays", "cifar10_jpeg"):
        _check_files(cfg)
        return
    if ds["name"] != "imagenet":
        return
    from psbench.data.sources import missing
    from psbench.ps.local import LOCAL_PROTOCOLS

    crop = imagenet_crop(ds["crop"], get(cfg, "model.name", ""))
    require(crop <= ds["resize"], "dataset.crop", crop, f"an integer <= dataset.resize ({ds['resize']})")
    require(
        not ds["download"],
        "dataset.download",
        ds["download"],
        "false (ImageNet is not downloaded: place ILSVRC-2012 under paths.data_dir/imagenet)",
    )
    engine = get(cfg, "engine.name", "sim")
    require(
        engine == "sim",
        "engine.name",
        engine,
        "sim with dataset=imagenet (the dist engine's learners "
        "hold their data in memory; ImageNet is streamed by the sim engine only)",
    )
    protocol = get(cfg, "protocol.name")
    require(
        protocol not in LOCAL_PROTOCOLS,
        "protocol.name",
        protocol,
        "a protocol without local steps with dataset=imagenet (local-step learners index in-memory data)",
    )
    data_dir = cfg["paths"]["data_dir"]
    gap = missing(data_dir)
    require(
        gap is None, "paths.data_dir", data_dir, f"a folder with ImageNet (ILSVRC-2012) in imagenet/: missing {gap}"
    )


DATASET = Group(DATASET_KEYS, check=_check, target=TARGET_KEYS)
