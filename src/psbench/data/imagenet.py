"""ImageNet (ILSVRC-2012) streamed from its JPEG folders: decoded on demand, never held whole in memory.

Layout under ``<data_dir>/imagenet/`` (or its Kaggle form ``imagenet/ILSVRC/Data/CLS-LOC/``):

* ``train/<wnid>/*.JPEG`` — one folder per class; classes are the sorted wnids;
* validation, either ``val/<wnid>/*.JPEG`` (class folders, as the usual ``valprep.sh`` leaves them) or
  flat ``val/*.JPEG`` labelled by ``LOC_val_solution.csv`` (``ImageId,PredictionString``, the label the
  first wnid of the string; beside ``train/`` or in ``imagenet/``).

The file list is built once and cached in ``psbench-index.json`` beside ``train/`` (when that folder is
writable), keyed by the folders' modification times.

Preprocessing (Caffe's ImageNet data layer, which Rudra §4.2 and Zhang §4.3.2 train with and TernGrad §4.2
follows: "AlexNet is trained by the hyper-parameters and data augmentation depicted in Caffe"): the shorter
side resized to ``resize`` (256; Caffe's ``convert_imageset`` warps to 256×256 instead), a ``crop``×``crop``
crop — random with a random horizontal mirror for training, the centre for evaluation — then the per-channel
mean subtracted with no scaling: BGR channel order, ``mean_value: [104, 117, 123]`` of ``bvlc_googlenet``
(``bvlc_alexnet`` subtracts the mean image, whose channel means these are). Crops: 227 for AlexNet
(``bvlc_alexnet``'s ``crop_size``), 224 for GoogLeNet (``bvlc_googlenet``) and VGG-A (Simonyan & Zisserman
§3.1), :data:`psbench.data.options.IMAGENET_CROPS`.

A training sample's crop and mirror are drawn from (seed, its position in the global sample stream), so
they are the same in every run with that seed and differ between epochs. :class:`StreamedImages` decodes
the samples the schedule asks for (``take(indices, positions)``) on a thread pool and decodes the next
``prefetch`` positions of the stream ahead; at most ``prefetch`` decoded crops wait at once.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from PIL import Image

from psbench.data.sources import SOLUTION_CSV, images_root, missing, solution_csv
from psbench.errors import ConfigError, DataError
from psbench.ps.samples import SampleStream

EXTENSIONS = (".jpeg", ".jpg", ".png")
INDEX_FILE = "psbench-index.json"
INDEX_VERSION = 1
#: Caffe's per-channel ImageNet mean, BGR (``mean_value`` of ``bvlc_googlenet/train_val.prototxt``)
MEAN_BGR = (104.0, 117.0, 123.0)


def _images(folder: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(folder) if e.is_file() and e.name.lower().endswith(EXTENSIONS))


@dataclass(frozen=True)
class ImageIndex:
    """The data set's files (relative to ``root``) and labels (indices into the sorted ``wnids``)."""

    root: Path
    wnids: tuple[str, ...]
    train: list[str]
    train_labels: np.ndarray
    val: list[str]
    val_labels: np.ndarray
    val_layout: str  # "folders" | "flat"

    def first_classes(self, k: int | None) -> ImageIndex:
        """Only the first ``k`` classes (all when None), in both splits."""
        if k is None or k >= len(self.wnids):
            return self
        keep_t, keep_v = self.train_labels < k, self.val_labels < k
        return ImageIndex(
            self.root,
            self.wnids[:k],
            [f for f, m in zip(self.train, keep_t, strict=True) if m],
            self.train_labels[keep_t],
            [f for f, m in zip(self.val, keep_v, strict=True) if m],
            self.val_labels[keep_v],
            self.val_layout,
        )


def _stamp(root: Path, classes: Sequence[str], val_folders: Sequence[str], csv_path: Path | None) -> list:
    """Modification times that change when a class folder gains or loses a file."""
    paths = [
        root / "train",
        *(root / "train" / c for c in classes),
        root / "val",
        *(root / "val" / c for c in val_folders),
        *([csv_path] if csv_path else []),
    ]
    return [[str(p.relative_to(root)) if p.is_relative_to(root) else str(p), p.stat().st_mtime_ns] for p in paths]


def _walk(root: Path, base: Path) -> tuple[dict, list]:
    wnids = sorted(e.name for e in os.scandir(root / "train") if e.is_dir())
    if not wnids:
        raise DataError(f"imagenet: {root / 'train'} has no class folders train/<wnid>/")
    label = {w: i for i, w in enumerate(wnids)}
    train, train_y = [], []
    for w in wnids:
        names = _images(root / "train" / w)
        train += [f"train/{w}/{n}" for n in names]
        train_y += [label[w]] * len(names)
    val_dirs = sorted(e.name for e in os.scandir(root / "val") if e.is_dir())
    val, val_y = [], []
    csv_path = None
    if val_dirs:
        unknown = [w for w in val_dirs if w not in label]
        if unknown:
            raise DataError(f"imagenet: {root / 'val'} has class folders not in train/: {', '.join(unknown[:5])}")
        for w in val_dirs:
            names = _images(root / "val" / w)
            val += [f"val/{w}/{n}" for n in names]
            val_y += [label[w]] * len(names)
        layout = "folders"
    else:
        csv_path = solution_csv(root, base)
        if csv_path is None:
            raise DataError(f"imagenet: flat {root / 'val'} needs {SOLUTION_CSV} (ImageId,PredictionString)")
        files = {Path(n).stem: n for n in _images(root / "val")}
        with csv_path.open(newline="") as fh:
            rows = {r["ImageId"]: r["PredictionString"].split()[0] for r in csv.DictReader(fh)}
        for stem in sorted(files):
            wnid = rows.get(stem)
            if wnid is None or wnid not in label:
                raise DataError(f"imagenet: {csv_path} gives no known wnid for val/{files[stem]}")
            val.append(f"val/{files[stem]}")
            val_y.append(label[wnid])
        layout = "flat"
    if not train or not val:
        raise DataError(f"imagenet: no images (*.JPEG) under {root / ('train' if not train else 'val')}")
    entry = {
        "version": INDEX_VERSION,
        "wnids": wnids,
        "train": train,
        "train_labels": train_y,
        "val": val,
        "val_labels": val_y,
        "val_layout": layout,
    }
    return entry, _stamp(root, wnids, val_dirs, csv_path)


def build_index(data_dir: str | Path) -> ImageIndex:
    """The file list of ``<data_dir>/imagenet``: read from ``psbench-index.json`` while it is current, else
    walked once and written there (when the folder is writable)."""
    root = images_root(data_dir)
    gap = missing(data_dir)
    if root is None or gap is not None:
        raise DataError(f"imagenet: missing {gap}")
    base = Path(data_dir).expanduser() / "imagenet"
    cache = root / INDEX_FILE
    entry = None
    try:
        old = json.loads(cache.read_text())
        if old.get("version") == INDEX_VERSION:
            val_dirs = sorted({f.split("/")[1] for f in old["val"]}) if old["val_layout"] == "folders" else []
            csv_path = solution_csv(root, base) if old["val_layout"] == "flat" else None
            if _stamp(root, old["wnids"], val_dirs, csv_path) == old["stamp"]:
                entry = old
    except (OSError, ValueError, KeyError):
        pass
    if entry is None:
        entry, stamp = _walk(root, base)
        try:
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps({**entry, "stamp": stamp}))
            tmp.replace(cache)
        except OSError:
            pass  # a read-only data folder: the walk is redone by the next run, once
    return ImageIndex(
        root,
        tuple(entry["wnids"]),
        list(entry["train"]),
        np.asarray(entry["train_labels"], np.int64),
        list(entry["val"]),
        np.asarray(entry["val_labels"], np.int64),
        entry["val_layout"],
    )


def load_resized(path: Path, resize: int) -> np.ndarray:
    """The image at ``path`` as uint8 RGB [H, W, 3], its shorter side ``resize`` (bilinear)."""
    import warnings

    try:
        with warnings.catch_warnings():  # an image past Pillow's decompression-bomb limit: refused at its header
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                w, h = im.size
                s = resize / min(w, h)
                size = (max(resize, round(w * s)), max(resize, round(h * s)))
                return np.asarray(im.convert("RGB").resize(size, Image.Resampling.BILINEAR))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DataError(f"imagenet: {path} declares more pixels than an image psbench decodes ({exc})") from None
    except OSError as exc:
        raise DataError(f"imagenet: cannot decode {path}: {exc}") from exc


def crop_box(h: int, w: int, crop: int, rng: np.random.Generator | None) -> tuple[int, int, bool]:
    """(top, left, mirror) of a crop: the centre without ``rng``, else uniform offsets and a fair mirror coin."""
    if rng is None:
        return (h - crop) // 2, (w - crop) // 2, False
    return int(rng.integers(0, h - crop + 1)), int(rng.integers(0, w - crop + 1)), bool(rng.integers(0, 2))


class StreamedImages:
    """``N`` images decoded on demand, tensor-like (``len``, ``shape``, ``dtype``, ``device``, ``to``).

    Evaluation (``train=False``): ``x[indices]`` / ``x[a:b]`` are centre crops. Training: ``x.take(indices,
    positions)`` gives the crops of the samples at those stream positions (augmentation seeded by
    (seed, position)) and starts decoding the ``prefetch`` positions after the furthest one asked for.
    """

    def __init__(
        self,
        root: Path,
        files: list[str],
        resize: int,
        crop: int,
        train: bool,
        seed: int = 0,
        mean: Sequence[float] = MEAN_BGR,
        prefetch: int = 256,
        threads: int = 4,
    ) -> None:
        self.root, self.files, self.resize, self.crop, self.train = root, files, int(resize), int(crop), train
        self.seed, self.prefetch = int(seed), int(prefetch)
        self.eval_batch_size: int | None = None  # the evaluation batch, set by the data module for its test set
        self.mean = torch.tensor([float(m) for m in mean], dtype=torch.float32).view(3, 1, 1)
        self.shape = (len(files), 3, self.crop, self.crop)
        self.dtype, self.device = torch.float32, torch.device("cpu")
        self.stream = SampleStream(len(files), self.seed) if train else None
        self._pool = ThreadPoolExecutor(max(1, int(threads)), thread_name_prefix="psbench-imagenet")
        self._ahead: dict[int, tuple[int, Future]] = {}  # position -> (index, its decoding crop)
        self._furthest = -1
        self.peak_ahead = 0  # most decoded crops waiting at once (bounded by ``prefetch``)
        self.decoded = 0  # images decoded so far
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.files)

    def to(self, device: torch.device | str) -> StreamedImages:
        """The same images, returned on ``device``."""
        out = copy.copy(self)
        out.device = torch.device(device)
        return out

    def _crop(self, i: int, position: int | None) -> np.ndarray:
        """uint8 BGR [3, crop, crop] of image ``i`` (random crop and mirror at a stream position, else centre)."""
        img = load_resized(self.root / self.files[i], self.resize)
        with self._lock:
            self.decoded += 1
        rng = None if position is None else np.random.default_rng((self.seed, position))
        top, left, mirror = crop_box(img.shape[0], img.shape[1], self.crop, rng)
        out = img[top : top + self.crop, left : left + self.crop, ::-1]
        if mirror:
            out = out[:, ::-1]
        return np.ascontiguousarray(out.transpose(2, 0, 1))

    def _stack(self, crops: list[np.ndarray]) -> torch.Tensor:
        x = torch.from_numpy(np.stack(crops)).to(torch.float32).sub_(self.mean)
        return x.to(self.device)

    def __getitem__(self, key) -> torch.Tensor:
        if self.train:
            raise TypeError("training images are read with take(indices, positions): their crops follow the stream")
        idx = range(len(self))[key] if isinstance(key, slice) else torch.as_tensor(key).reshape(-1).tolist()
        return self._stack(list(self._pool.map(lambda i: self._crop(i, None), idx)))

    def take(self, indices: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Crops [k, 3, crop, crop] of images ``indices`` read at stream ``positions`` (one each)."""
        idx, pos = indices.reshape(-1).tolist(), positions.reshape(-1).tolist()
        if len(idx) != len(pos):
            raise ValueError(f"take: {len(idx)} indices but {len(pos)} positions")
        futures = []
        for i, p in zip(idx, pos, strict=True):
            ready = self._ahead.pop(p, None)
            futures.append(ready[1] if ready is not None and ready[0] == i else self._pool.submit(self._crop, i, p))
        crops = [f.result() for f in futures]
        self._read_ahead(max(pos, default=-1))
        return self._stack(crops)

    def _read_ahead(self, furthest: int) -> None:
        """Decode the stream's positions (furthest, furthest + prefetch]; drop waiting ones outside that window."""
        if self.stream is None or self.prefetch == 0:
            return
        self._furthest = max(self._furthest, furthest)
        lo = self._furthest + 1
        for p in [p for p in self._ahead if not lo <= p < lo + self.prefetch]:
            self._ahead.pop(p)[1].cancel()
        todo = [p for p in range(lo, lo + self.prefetch) if p not in self._ahead]
        if todo:
            idx = self.stream.indices(todo[0], todo[-1] - todo[0] + 1).tolist()
            for p in todo:
                i = idx[p - todo[0]]
                self._ahead[p] = (i, self._pool.submit(self._crop, i, p))
        self.peak_ahead = max(self.peak_ahead, len(self._ahead))

    def __repr__(self) -> str:
        return f"StreamedImages({len(self)} × {self.shape[1:]}, {'train' if self.train else 'centre'} crops)"


class _EvalBatches(torch.utils.data.Dataset):
    def __init__(self, x: StreamedImages, y: torch.Tensor, batch: int) -> None:
        self.x, self.y, self.batch = x, y, batch

    def __len__(self) -> int:
        return -(-len(self.y) // self.batch)

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = slice(k * self.batch, (k + 1) * self.batch)
        return self.x[s], self.y[s]


class ImageNetDataModule(pl.LightningDataModule):
    """ImageNet read from its folders (see the module docstring): ``x_train`` / ``x_test`` are
    :class:`StreamedImages`, ``y_train`` / ``y_test`` label tensors."""

    def __init__(
        self,
        data_dir: str | Path = ".",
        crop: int = 227,
        resize: int = 256,
        seed: int = 0,
        mean: Sequence[float] = MEAN_BGR,
        classes: int | None = None,
        subset: int | None = None,
        eval_batch_size: int = 100,
        prefetch: int = 256,
        threads: int = 4,
        batch_size: int = 128,
    ) -> None:
        super().__init__()
        if not 1 <= int(crop) <= int(resize):
            raise ConfigError("dataset.crop", crop, f"an integer in 1..{resize} (dataset.resize)")
        self.name, self.data_dir = "imagenet", Path(data_dir).expanduser()
        self.crop, self.resize, self.seed, self.mean = int(crop), int(resize), int(seed), tuple(mean)
        self.classes, self.subset = classes, subset
        self.eval_batch_size, self.prefetch, self.threads = int(eval_batch_size), int(prefetch), int(threads)
        self.batch_size = int(batch_size)
        self.input_shape = (3, self.crop, self.crop)
        self.num_classes = self.num_train = 0
        self.index: ImageIndex | None = None
        self.x_train: StreamedImages | None = None
        self.x_test: StreamedImages | None = None
        self.y_train: torch.Tensor | None = None
        self.y_test: torch.Tensor | None = None
        self.pixel_mean = torch.tensor(self.mean, dtype=torch.float32).view(3, 1, 1)

    def prepare_data(self) -> None:
        gap = missing(self.data_dir)
        if gap is not None:
            raise DataError(f"imagenet: missing {gap}")

    def setup(self, stage: str | None = None) -> None:
        """Build (or read) the file index once; nothing is decoded here."""
        if self.index is not None:
            return
        index = build_index(self.data_dir).first_classes(self.classes)
        train, train_y = index.train, index.train_labels
        if self.subset is not None:
            if not 1 <= self.subset <= len(train):
                raise ConfigError("dataset.subset", self.subset, f"an integer in 1..{len(train)} or null")
            train, train_y = train[: self.subset], train_y[: self.subset]
        self.index = index
        self.num_classes, self.num_train = len(index.wnids), len(train)

        def streamed(files: list[str], train: bool, prefetch: int) -> StreamedImages:
            return StreamedImages(
                index.root,
                files,
                self.resize,
                self.crop,
                train,
                seed=self.seed,
                mean=self.mean,
                prefetch=prefetch,
                threads=self.threads,
            )

        self.x_train = streamed(train, True, self.prefetch)
        self.x_test = streamed(index.val, False, 0)
        self.x_test.eval_batch_size = self.eval_batch_size
        self.y_train, self.y_test = torch.from_numpy(train_y.copy()), torch.from_numpy(index.val_labels.copy())

    @property
    def num_test(self) -> int:
        return 0 if self.y_test is None else len(self.y_test)

    def test_dataloader(self) -> torch.utils.data.DataLoader:
        """The validation set in order, centre crops, ``eval_batch_size`` per batch."""
        self.setup()
        assert self.x_test is not None and self.y_test is not None
        return torch.utils.data.DataLoader(
            _EvalBatches(self.x_test, self.y_test, self.eval_batch_size), batch_size=None
        )

    def val_dataloader(self) -> torch.utils.data.DataLoader:
        return self.test_dataloader()

    def __repr__(self) -> str:
        return (
            f"ImageNetDataModule(crop={self.crop}, resize={self.resize}, num_classes={self.num_classes}, "
            f"num_train={self.num_train})"
        )
