"""The ``dataset`` config group: one option per data set of :mod:`psbench.data`, with its keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import ConfigError, require
from psbench.schema import Group, Keys, boolean, get, integer, number, one_of, sequence

#: the data layers of the papers' code (:mod:`psbench.data.preprocess`; kept here torch-free)
PREPROCESS = ("unit_mean", "mean", "symmetric", "per_image", "minmax250")

_COMMON: Keys = {
    "download": boolean(),                                         # fetch the standard files if missing
    "eval_batch_size": integer(1),
    "subset": integer(1, null="all training samples", words="(the first N training samples)"),
    "verify": boolean().optional(),                            # md5 checks of the raw files
    "preprocess": one_of(*PREPROCESS).optional(),                 # the paper's data layer
}
DATASET_KEYS: dict[str, Keys] = {
    "digits": {**_COMMON, "test_size": integer(1, 1796).optional()},
    "mnist": _COMMON,
    "fashion_mnist": _COMMON,
    "cifar10": _COMMON,
    "cifar10_subset": _COMMON,
    "synthetic": {
        **_COMMON,
        "shape": sequence(integer(1), min_length=1, what="a list of integers >= 1, e.g. [1, 8, 8]"),
        "num_classes": integer(2),
        "num_train": integer(1),
        "num_test": integer(1),
        "separation": number(0).optional(),
        "noise": number(0).optional(),
    },
    "imagenet": {
        "download": boolean(),
        "eval_batch_size": integer(1),
        "subset": _COMMON["subset"],
        "classes": integer(1, null="all classes", words="(the first N wnids in sorted order)"),
        "crop": integer(1, null="the model's crop (alexnet 227, googlenet and vgg_a 224)"),
        "resize": integer(1, words="(the shorter side before cropping, Caffe's 256)"),
        "mean": sequence(number(), length=3, what="three per-channel means, BGR (Caffe's [104, 117, 123])"),
        "prefetch": integer(0, words="(training crops decoded ahead of the stream)"),
        "threads": integer(1, words="(decoding threads)"),
    },
}
DATASET_NAMES = tuple(DATASET_KEYS)

#: the papers' ImageNet crops per model: Caffe's bvlc_alexnet ``crop_size: 227`` (Rudra §4.2, Zhang §4.3.2 and
#: TernGrad §4.2 train Caffe's AlexNet), bvlc_googlenet's 224 (TernGrad §4.2), VGG's 224 (TernGrad §5)
IMAGENET_CROPS = {"alexnet": 227, "googlenet": 224, "vgg_a": 224}


def imagenet_crop(crop: int | None, model: str) -> int:
    """``dataset.crop``, or the model's paper crop when null."""
    if crop is not None:
        return int(crop)
    if model not in IMAGENET_CROPS:
        raise ConfigError("dataset.crop", None, f"an integer >= 1 with model={model} (only "
                          + ", ".join(f"{m} ({c})" for m, c in IMAGENET_CROPS.items()) + " have a paper crop)")
    return IMAGENET_CROPS[model]


def _check(cfg: Mapping[str, Any]) -> None:
    """ImageNet: a crop for the model within the resized image, the sim engine without local steps, and the
    folders present under ``paths.data_dir`` (checked here, before any run exists; no file is opened)."""
    ds = cfg["dataset"]
    if ds["name"] != "imagenet":
        return
    from psbench.data.sources import missing
    from psbench.ps.local import LOCAL_PROTOCOLS

    crop = imagenet_crop(ds["crop"], get(cfg, "model.name", ""))
    require(crop <= ds["resize"], "dataset.crop", crop, f"an integer <= dataset.resize ({ds['resize']})")
    require(not ds["download"], "dataset.download", ds["download"],
            "false (ImageNet is not downloaded: place ILSVRC-2012 under paths.data_dir/imagenet)")
    engine = get(cfg, "engine.name", "sim")
    require(engine == "sim", "engine.name", engine, "sim with dataset=imagenet (the dist engine's learners "
            "hold their data in memory; ImageNet is streamed by the sim engine only)")
    protocol = get(cfg, "protocol.name")
    require(protocol not in LOCAL_PROTOCOLS, "protocol.name", protocol,
            "a protocol without local steps with dataset=imagenet (local-step learners index in-memory data)")
    data_dir = cfg["paths"]["data_dir"]
    gap = missing(data_dir)
    require(gap is None, "paths.data_dir", data_dir,
            f"a folder with ImageNet (ILSVRC-2012) in imagenet/: missing {gap}")


DATASET = Group(DATASET_KEYS, check=_check)
