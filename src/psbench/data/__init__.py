"""Data sets as LightningDataModules: ``build_datamodule(name, data_dir, ...)``.

In memory: ``digits``, ``mnist``, ``fashion_mnist``, ``cifar10``, ``cifar10_subset``, ``synthetic``,
``cifar10_jpeg`` (all 60,000 CIFAR-10 images re-encoded as JPEG q75, a preset of ``image_folder``) and a
user's own files: ``image_folder`` (torchvision's ImageFolder layout, a folder or a .zip,
:mod:`psbench.data.image_folder`) and ``arrays`` (an .npz, :mod:`psbench.data.arrays`), and a user's own datasets
or LightningDataModule by ``_target_`` (:mod:`psbench.data.target`);
streamed from its JPEG folders, never held whole in memory: ``imagenet``
(:class:`~psbench.data.imagenet.ImageNetDataModule`, Caffe's ImageNet data layer). The in-memory
sets' inputs are preprocessed as ``preprocess`` says (default ``unit_mean``: scaled to [0, 1] and
centred by the training set's per-pixel mean; ``mean``: Caffe's mean-only data layer of
``cifar10_full``, see :mod:`psbench.data.preprocess`); raw files are md5-checked and downloaded
only with ``download=True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psbench.data.options import DATASET_KEYS, DATASET_NAMES, file_options
from psbench.errors import ConfigError, require
from psbench.lazy import lazy
from psbench.schema import check_keys

if TYPE_CHECKING:
    from psbench.data.datamodule import ArrayDataModule
    from psbench.data.imagenet import ImageNetDataModule
    from psbench.data.preprocess import ArraySplit

# imported on first use (torch, Lightning): the torch-free psbench.data.options imports without them
__getattr__ = lazy(
    __name__,
    {
        "ArrayDataModule": "psbench.data.datamodule",
        "ArraySplit": "psbench.data.preprocess",
        "load_cifar10_folder": "psbench.data.cifar",
        "load_cifar10_subset": "psbench.data.cifar",
        "load_digits_split": "psbench.data.digits",
        "load_idx_folder": "psbench.data.mnist",
        "make_synthetic": "psbench.data.synthetic",
        "ImageNetDataModule": "psbench.data.imagenet",
        "load_image_folder": "psbench.data.image_folder",
        "load_arrays": "psbench.data.arrays",
    },
)

#: Options forwarded to :class:`ArrayDataModule` (the rest are the data set's own, :data:`DATASET_KEYS`).
_COMMON = ("subset", "batch_size", "verify", "preprocess")


def _idx(paths: Mapping[str, Path]) -> ArraySplit:
    from psbench.data.mnist import load_idx_folder

    return load_idx_folder(next(iter(paths.values())).parent)


def _cifar10(paths: Mapping[str, Path]) -> ArraySplit:
    from psbench.data.cifar import load_cifar10_folder

    return load_cifar10_folder(next(iter(paths.values())).parent)


def _cifar10_subset(paths: Mapping[str, Path]) -> ArraySplit:
    from psbench.data.cifar import load_cifar10_subset

    return load_cifar10_subset(next(iter(paths.values())))


def _image_folder(name: str, ds: Mapping[str, Any], data_dir: str | Path, cache_dirs: tuple[Path, ...]):
    def load(_paths: Mapping[str, Path]) -> ArraySplit:
        from psbench.data.image_folder import load_image_folder
        from psbench.data.preprocess import ArraySplit

        if name == "cifar10_jpeg":  # where to put it, in the words of the other data files
            from psbench.data import sources
            from psbench.data.download import ensure_files

            ensure_files(name, data_dir, sources.DATASET_FILES[name], download=bool(ds.get("download")), verify=False)
        d = load_image_folder(**file_options(name, ds, data_dir), cache_dirs=cache_dirs)
        return ArraySplit(d.x_train, d.y_train, d.x_test, d.y_test, scale=255.0, num_classes=len(d.classes))

    return load


def _arrays(path: str, md5: str | None, num_classes: int | None):
    def load(_paths: Mapping[str, Path]) -> ArraySplit:
        import numpy as np

        from psbench.data.arrays import load_arrays
        from psbench.data.preprocess import ArraySplit

        a, size = load_arrays(path, md5, num_classes)
        return ArraySplit(
            a["x_train"],
            a["y_train"],
            a["x_test"],
            a["y_test"],
            scale=255.0 if a["x_train"].dtype == np.uint8 else None,
            num_classes=size,
        )  # uint8: pixels

    return load


def task_of(dm: Any) -> str:
    """``classification`` (integer labels) or ``regression`` (float targets) of a set-up data module."""
    return getattr(dm, "task", "classification")


def output_size(dm: Any) -> int:
    """The model's output width for a set-up data module: its classes, or its regression targets k."""
    return int(getattr(dm, "output_size", None) or dm.num_classes)


def build_datamodule(
    name: str,
    data_dir: str | Path,
    seed: int = 0,
    download: bool = False,
    eval_batch_size: int = 128,
    root_dir: str | Path | None = None,
    **kwargs: Any,
) -> ArrayDataModule | ImageNetDataModule:
    """Build the data module ``name`` reading raw files under ``data_dir``.

    ``seed`` fixes the digits split, the synthetic draw and the training-batch order.
    Common kwargs: ``subset`` (first k training samples), ``batch_size`` (training loader,
    default 128), ``verify`` (md5 checks, default True), ``preprocess`` (default "unit_mean"). ``digits`` also takes
    ``test_size``; ``synthetic`` takes ``shape``, ``num_classes``, ``num_train``,
    ``num_test``, ``separation``, ``noise`` (see :func:`make_synthetic`). ``image_folder`` takes ``path``,
    ``md5``, ``resize``, ``classes``, ``max_memory_mb``; ``arrays`` takes ``path``, ``md5``, ``num_classes``.
    Decoded images are cached in ``<data_dir>/cache``, else ``<root_dir>/cache`` (the first writable one).
    ``data_note`` is the run's (summary.json, MLflow tag), not the data module's.
    """
    if name not in DATASET_NAMES:
        raise ConfigError("dataset.name", name, "one of " + ", ".join(DATASET_NAMES))
    kwargs.pop("data_note", None)
    if name == "imagenet":  # ``crop`` is required here: the CLI fills it from the model (IMAGENET_CROPS)
        from psbench.data.imagenet import ImageNetDataModule

        check_keys("dataset", kwargs, DATASET_KEYS[name], "dataset=imagenet", partial=True)
        kwargs.pop("download", None)
        return ImageNetDataModule(data_dir, seed=seed, eval_batch_size=eval_batch_size, **kwargs)
    batch = {"batch_size": kwargs.pop("batch_size")} if "batch_size" in kwargs else {}  # the Python API's loader
    check_keys("dataset", kwargs, DATASET_KEYS[name], f"dataset={name}", partial=True)
    kwargs.update(batch)
    from psbench.data import sources
    from psbench.data.datamodule import ArrayDataModule
    from psbench.data.digits import load_digits_split
    from psbench.data.synthetic import make_synthetic

    common = {k: kwargs.pop(k) for k in _COMMON if k in kwargs}
    base = dict(data_dir=data_dir, seed=seed, download=download, eval_batch_size=eval_batch_size, **common)
    if name in ("mnist", "fashion_mnist"):
        return ArrayDataModule(name, (1, 28, 28), 10, 60000, _idx, files=sources.DATASET_FILES[name], **base)
    if name == "cifar10":
        return ArrayDataModule(name, (3, 32, 32), 10, 50000, _cifar10, files=sources.DATASET_FILES[name], **base)
    if name == "cifar10_subset":
        return ArrayDataModule(name, (3, 32, 32), 10, 5085, _cifar10_subset, files=sources.DATASET_FILES[name], **base)
    if name in ("image_folder", "cifar10_jpeg"):
        require(
            name != "image_folder" or kwargs.get("path") is not None,
            "dataset.path",
            None,
            "a folder or .zip of train/<class>/<images> (set dataset.path=...)",
        )
        cache_dirs = (
            Path(data_dir).expanduser() / "cache",
            *(() if root_dir is None else (Path(root_dir).expanduser() / "cache",)),
        )
        jpeg = name == "cifar10_jpeg"
        load = _image_folder(name, {**kwargs, **common, "download": download}, data_dir, cache_dirs)
        return ArrayDataModule(
            name, (3, 32, 32) if jpeg else None, 10 if jpeg else None, 50000 if jpeg else None, load, **base
        )
    if name == "arrays":
        require(kwargs.get("path") is not None, "dataset.path", None, "an .npz file (set dataset.path=...)")
        md5 = kwargs.get("md5") if common.get("verify", True) is not False else None
        return ArrayDataModule(
            name,
            None,
            None,
            None,
            _arrays(kwargs["path"], md5, kwargs.get("num_classes")),
            **{**base, "preprocess": common.get("preprocess")},
        )  # None: by x's dtype
    if name == "digits":
        test_size = int(kwargs.get("test_size", 360))
        return ArrayDataModule(
            name, (1, 8, 8), 10, 1797 - test_size, lambda _p: load_digits_split(seed, test_size), **base
        )
    opts: dict[str, Any] = {
        "shape": (1, 28, 28),
        "num_classes": 10,
        "num_train": 2000,
        "num_test": 500,
        "separation": 4.0,
        "noise": 1.0,
    }
    opts.update(kwargs)
    opts["shape"] = tuple(int(s) for s in opts["shape"])
    return ArrayDataModule(
        name,
        opts["shape"],
        int(opts["num_classes"]),
        int(opts["num_train"]),
        lambda _p: make_synthetic(seed=seed, **opts),
        **base,
    )


__all__ = [
    "DATASET_NAMES",
    "ArrayDataModule",
    "ArraySplit",
    "ImageNetDataModule",
    "build_datamodule",
    "load_cifar10_folder",
    "load_cifar10_subset",
    "load_digits_split",
    "load_idx_folder",
    "make_synthetic",
    "output_size",
    "task_of",
]
