"""Images in torchvision's ``ImageFolder`` layout, a folder or a ``.zip`` of it read in place, decoded once and cached.

``dataset=image_folder dataset.path=<folder or .zip>``; ``dataset=cifar10_jpeg`` is a preset of it. Layout
(the root of the folder or of the zip; a zip whose entries all sit in one top-level folder holding
``train/`` is read from that folder)::

    train/<class>/<image>    one folder per class (images at any depth below it)
    test/<class>/<image>     the test split (or val/); a class missing from train/ is an error

Classes are the sorted names of ``train/``'s class folders (``dataset.classes`` gives them in another order);
images are the files ending in :data:`EXTENSIONS`; other files and hidden entries (``.*``) are skipped.
Decoded with Pillow to uint8 [N, C, H, W]: one channel when every image is greyscale (modes 1, L, 16-bit I;16),
else three (RGB; the greyscale ones repeated). Every mode is decoded to the values it means (:func:`_pixels`:
16-bit greyscale scaled to 8 bits, palettes to their colours, an alpha channel dropped when every pixel is opaque);
what cannot be (transparent pixels, floating-point pixels) is refused naming the image, and so is one that declares
more pixels than Pillow's decompression-bomb limit. Images of different sizes need ``dataset.resize=[H, W]``
(bilinear); without it they are refused naming one of them, before it is decoded.

**Order.** Within each class the files are sorted by path; the classes are then interleaved by (rank
within class, class index): class 0's first image, class 1's first, …, class 0's second, … Any prefix —
``dataset.subset=k`` keeps the first k training images — therefore holds every class within one image
of k / classes (up to classes × the smallest class's size). Both splits are in this order.

**Cache.** The decoded arrays (and the order) are kept in an uncompressed ``.npz`` named by the source's
identity — its path, size and modification time (a folder: every image's), the md5 when it was checked,
the resize and the class order — in ``<paths.data_dir>/cache/`` when that folder may be written, else in
``<paths.root_dir>/cache/`` (neither: decoded in every run). A folder whose permission bits forbid
writing is never written, even by root, so a read-only shared data folder stays as it is. The cache is
written to a private temporary file and renamed, so parallel trials of a sweep never read half of one;
an unreadable or foreign cache is decoded again and replaced.

**Memory.** The data set is held in memory as float32: one whose decoded size (N × C × H × W × 4 bytes,
estimated from its first image) exceeds ``dataset.max_memory_mb`` (:data:`DEFAULT_MAX_MEMORY_MB`) is
refused before anything is decoded; only ``dataset=imagenet`` is streamed.

Torch-free: :func:`check_source` runs in :mod:`psbench.validate`, before any run exists.
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import os
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from psbench.data.checksum import md5_file
from psbench.errors import ConfigError, DataError
from psbench.files import DiskFull, write_atomic

#: the image files read (torchvision's ``IMG_EXTENSIONS``, lower case)
EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp", ".gif")
SPLITS = ("train", "test", "val")
#: ``dataset.max_memory_mb``'s default (``conf/dataset/image_folder.yaml``): the decoded float32 size allowed
DEFAULT_MAX_MEMORY_MB = 8192
#: the largest image file read from a zip (its declared uncompressed size; a zip bomb declares gigabytes)
MAX_IMAGE_BYTES = 512 * 2**20
CACHE_VERSION = 2  # 2: every image mode decoded to the values it means (16-bit greyscale was clipped)


@dataclass(frozen=True)
class Layout:
    """The files of both splits (relative to the root, in the balanced order) and their labels."""

    classes: tuple[str, ...]
    train: list[str]
    train_labels: np.ndarray
    test: list[str]
    test_labels: np.ndarray


@dataclass(frozen=True)
class Decoded:
    """What :func:`load_image_folder` returns: uint8 [N, C, H, W] images, int64 labels, the files in order."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    train_files: list[str]
    test_files: list[str]


def balanced_order(labels: np.ndarray) -> np.ndarray:
    """Indices of ``labels`` (files already sorted within each class) sorted by (rank within class, class)."""
    labels = np.asarray(labels, dtype=np.int64)
    by_class = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=1)
    rank = np.empty(len(labels), np.int64)
    rank[by_class] = np.arange(len(labels)) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.lexsort((labels, rank))


class Source:
    """A folder or a ``.zip``: its image files (relative to the root), their bytes, and its identity."""

    def __init__(self, path: str | Path, dataset: str = "image_folder") -> None:
        self.path, self.dataset = Path(path).expanduser(), dataset
        self.zip: zipfile.ZipFile | None = None
        self._map: mmap.mmap | None = None
        self.prefix = ""
        if self.path.is_file():
            try:
                self.zip = zipfile.ZipFile(self.path)
                infos = self.zip.infolist()
                if self.path.stat().st_size:
                    with self.path.open("rb") as fh:
                        self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
                raise DataError(f"{dataset}: {self.path} is not a readable zip ({exc})") from None
            names = [i.filename for i in infos]
            if not any(n.startswith("train/") for n in names):
                tops = {n.split("/", 1)[0] for n in names}
                if len(tops) == 1 and any(n.startswith(f"{next(iter(tops))}/train/") for n in names):
                    self.prefix = f"{next(iter(tops))}/"
            self.names = [n[len(self.prefix) :] for n in names if n.startswith(self.prefix)]
        elif self.path.is_dir():
            self.names = self._walk()
        else:
            raise ConfigError("dataset.path", str(path), "an existing folder or .zip of train/<class>/<images>")

    def _walk(self) -> list[str]:
        names = []
        for split in SPLITS:
            top = self.path / split
            for folder, dirs, files in os.walk(top):
                rel = Path(folder).relative_to(self.path).as_posix()
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                names += [f"{rel}/{d}/" for d in dirs]
                names += [f"{rel}/{f}" for f in files]
        return names

    def where(self, name: str) -> str:
        """How a message names the file ``name``."""
        if self.zip is not None:
            return f"{self.path}:{self.prefix}{name}"
        return str(self.path / name) + ("/" if name.endswith("/") else "")

    def read(self, name: str) -> bytes:
        """The bytes of ``name``; a zip's CRC-32 is checked (a stored member is sliced from the mapped file:
        zipfile's per-member opening cost more than decoding a CIFAR-size JPEG)."""
        try:
            if self.zip is None:
                return (self.path / name).read_bytes()
            info = self.zip.getinfo(self.prefix + name)
            if info.file_size > MAX_IMAGE_BYTES:  # a member that inflates past any image: refused before reading it
                raise DataError(
                    f"{self.dataset}: {self.where(name)} declares {info.file_size:,} bytes uncompressed, more than "
                    f"an image file psbench reads ({MAX_IMAGE_BYTES // 2**20} MiB)"
                )
            if info.compress_type != zipfile.ZIP_STORED or self._map is None or info.flag_bits & 0x1:
                return self.zip.read(info)
            at = info.header_offset
            if self._map[at : at + 4] != b"PK\x03\x04":
                raise zipfile.BadZipFile("bad local file header")
            start = at + 30 + sum(struct.unpack_from("<HH", self._map, at + 26))
            data = self._map[start : start + info.compress_size]
            if len(data) != info.compress_size or zlib.crc32(data) != info.CRC:
                raise zipfile.BadZipFile(f"bad CRC-32 for file {info.filename!r}")
            return data
        except DataError:
            raise
        except (
            zipfile.BadZipFile,
            OSError,
            ValueError,
            EOFError,
            KeyError,
            struct.error,
            RuntimeError,
            NotImplementedError,
        ) as exc:
            raise DataError(f"{self.dataset}: cannot read {self.where(name)} ({exc})") from None

    def identity(self, files: Sequence[str]) -> dict:
        """What changes when the content may have: the zip's size and mtime, or every image file's."""
        st = self.path.stat()
        out = {"path": str(self.path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if self.zip is None:
            digest = hashlib.sha256()
            for name in files:
                s = (self.path / name).stat()
                digest.update(f"{name}\0{s.st_size}\0{s.st_mtime_ns}\n".encode())
            out["files"] = digest.hexdigest()
        return out

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        if self.zip is not None:
            self.zip.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan(source: Source, classes: Sequence[str] | None = None) -> Layout:
    """The layout of ``source`` (see the module docstring), its files in the balanced order."""
    ds, root = source.dataset, source.where("")
    folders: dict[str, set[str]] = {s: set() for s in SPLITS}
    images: dict[str, dict[str, list[str]]] = {s: {} for s in SPLITS}
    for name in source.names:
        parts = name.split("/")
        if len(parts) < 3 or parts[0] not in folders or any(p.startswith(".") for p in parts[1:] if p):
            continue
        folders[parts[0]].add(parts[1])
        if parts[-1] and name.lower().endswith(EXTENSIONS):
            images[parts[0]].setdefault(parts[1], []).append(name)
    found = sorted(folders["train"])
    if not found:
        raise DataError(f"{ds}: {root} has no train/<class>/ folders (torchvision's ImageFolder layout)")
    empty = [c for c in found if c not in images["train"]]
    if empty:
        raise DataError(f"{ds}: {source.where(f'train/{empty[0]}/')} holds no images ({', '.join(EXTENSIONS)})")
    if classes is not None and sorted(classes) != found:
        raise DataError(
            f"{ds}: {root} train/ has the classes {', '.join(found)}, not dataset.classes ({', '.join(classes)})"
        )
    order = tuple(classes) if classes is not None else tuple(found)
    if folders["test"] and folders["val"]:
        raise DataError(f"{ds}: {root} has both test/ and val/; keep one as the test split")
    split = "test" if folders["test"] else "val"
    if not folders[split]:
        raise DataError(f"{ds}: {root} has no test/<class>/ (or val/<class>/) split")
    unknown = sorted(folders[split] - set(order))
    if unknown:
        raise DataError(f"{ds}: {source.where(f'{split}/{unknown[0]}/')} is a class missing from train/")
    if len(found) == 1:
        raise DataError(
            f"{ds}: {root} train/ has one class folder ({found[0]}): a classifier needs two or more (one class "
            "trains a constant and reports a test error of 0)"
        )
    label = {c: i for i, c in enumerate(order)}

    def ordered(part: str) -> tuple[list[str], np.ndarray]:
        files = [f for c in order for f in sorted(images[part].get(c, []))]
        labels = np.asarray([label[f.split("/")[1]] for f in files], np.int64)
        perm = balanced_order(labels)
        return [files[i] for i in perm], labels[perm]

    (train, y_train), (test, y_test) = ordered("train"), ordered(split)
    if not test:
        raise DataError(f"{ds}: {source.where(f'{split}/')} holds no images ({', '.join(EXTENSIONS)})")
    return Layout(order, train, y_train, test, y_test)


def _open_image(source: Source, name: str):
    """The image ``name``, opened (its header read, nothing decoded). An image that declares more pixels than
    Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, 89 M) is a DataError, before decoding."""
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(source.read(name)))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DataError(
            f"{source.dataset}: {source.where(name)} declares more pixels than an image psbench decodes "
            f"({' '.join(str(exc).split())})"
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise DataError(f"{source.dataset}: cannot decode {source.where(name)} ({exc})") from None


#: greyscale modes whose pixels are 16-bit (``I;16`` and its byte orders; ``I`` holding 0…65535)
_GREY16 = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def _pixels(im, where: str, dataset: str) -> tuple[np.ndarray, bool]:
    """The pixels of an opened image as uint8 [H, W] (greyscale) or [H, W, 3], and whether it is greyscale —
    each mode decoded to the values it means (Pillow's ``convert`` clips 16-bit greyscale to 255):

    * ``1``, ``L``: greyscale; ``I;16`` (16-bit PNG, TIFF) and ``I`` in 0…65535: greyscale scaled by 255/65535;
    * ``P`` (palette): its colours; ``RGB``, ``CMYK``, ``YCbCr``: RGB;
    * an alpha channel (``LA``, ``RGBA``, ``PA``, a palette's transparency): dropped when every pixel is opaque,
      else refused (what a transparent pixel means depends on a background psbench does not guess);
    * floating-point (``F``) and ``I`` outside 0…65535: refused (their scale is unknown).
    """

    def refuse(what: str) -> DataError:
        return DataError(f"{dataset}: {where} has {what}")

    mode = im.mode
    if mode in ("1", "L"):
        return np.asarray(im.convert("L")), True
    if mode in _GREY16:
        a = np.asarray(im)
        if a.dtype.kind not in "iu" or (a.size and (int(a.min()) < 0 or int(a.max()) > 65535)):
            raise refuse(f"integer pixels (mode {mode}) outside 0..65535: not an 8- or 16-bit image")
        return ((a.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8), True
    if mode == "F":
        raise refuse("floating-point pixels (mode F), whose scale is unknown: save it as an 8- or 16-bit image")
    if mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    elif mode == "PA":
        im = im.convert("RGBA")
    mode = im.mode
    if mode in ("LA", "La", "RGBA", "RGBa"):
        alpha = np.asarray(im.getchannel("A"))
        if alpha.size and int(alpha.min()) < 255:
            raise refuse(
                f"transparent pixels (mode {mode}, {100 * float((alpha < 255).mean()):.1g} % not opaque): flatten it "
                "onto a background first"
            )
        if mode in ("LA", "La"):
            return np.asarray(im.getchannel("L")), True
        return np.asarray(im.convert("RGB")), False
    if mode != "RGB":
        im = im.convert("RGB")
    return np.asarray(im), False


def _decode(
    source: Source, names: Sequence[str], resize: tuple[int, int] | None, out: np.ndarray, grey: np.ndarray, first: str
) -> None:
    """Decode ``names`` into ``out`` (uint8 [N, H, W, 3]); ``grey[i]``: image i was greyscale;
    ``first``: the image whose size is ``out``'s (named when another's differs, before it is decoded)."""
    from PIL import Image

    h, w = out.shape[1:3]
    for k, name in enumerate(names):
        try:
            with _open_image(source, name) as im:
                if resize is None and im.size != (w, h):
                    raise DataError(
                        f"{source.dataset}: images differ in size: {source.where(name)} is "
                        f"{im.size[1]}×{im.size[0]} (H×W), {source.where(first)} is {h}×{w}; "
                        "set dataset.resize=[H, W]"
                    )
                a, grey[k] = _pixels(im, source.where(name), source.dataset)
                if resize is not None and a.shape[:2] != (h, w):
                    a = np.asarray(Image.fromarray(a).resize((w, h), Image.Resampling.BILINEAR))
        except (OSError, ValueError, SyntaxError) as exc:
            raise DataError(f"{source.dataset}: cannot decode {source.where(name)} ({exc})") from None
        out[k] = a[..., None] if a.ndim == 2 else a


def decode_images(source: Source, names: Sequence[str], resize: Sequence[int] | None = None) -> np.ndarray:
    """uint8 [N, C, H, W] of ``names`` (C = 1 when all are greyscale, else 3; see the module docstring).

    One thread: a CIFAR-size JPEG costs more in Pillow's header parsing, which holds the GIL, than in its
    decoder, so a second thread gained under 10 % here (60,000 images: 10.7–12.8 s with one, 11.6–11.8 s
    with two, on two loaded cores)."""
    if resize is not None:
        h, w = (int(v) for v in resize)
    else:
        with _open_image(source, names[0]) as im:
            w, h = im.size
    out = np.empty((len(names), h, w, 3), np.uint8)
    grey = np.zeros(len(names), bool)
    _decode(source, names, (h, w) if resize is not None else None, out, grey, names[0])
    x = out[..., :1] if grey.all() else out
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


# --------------------------------------------------------------------------------------------- checks
_MD5: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> md5: the up-front check and the load share it


def checked_md5(path: Path, expected: str, dataset: str) -> str:
    """``expected`` when ``path``'s md5 is it (computed once per process and file version), else DataError."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _MD5:
        _MD5[key] = md5_file(path)
    if _MD5[key] != expected.lower():
        raise DataError(
            f"{dataset}: {path} md5 {_MD5[key]} != expected {expected.lower()}; the file is corrupt or another version"
        )
    return _MD5[key]


def _source(path: str | Path, md5: str | None, dataset: str) -> tuple[Source, str | None]:
    p = Path(path).expanduser()
    if md5 is not None:
        if p.is_dir():
            raise ConfigError("dataset.md5", md5, "null with a folder (an md5 checks a .zip)")
        if not p.is_file():
            raise ConfigError("dataset.path", str(path), "an existing folder or .zip of train/<class>/<images>")
        md5 = checked_md5(p, md5, dataset)
    return Source(p, dataset), md5


def check_source(
    path: str | Path,
    md5: str | None = None,
    classes: Sequence[str] | None = None,
    resize: Sequence[int] | None = None,
    max_memory_mb: float | None = None,
    dataset: str = "image_folder",
) -> Layout:
    """Everything but decoding: the path, the md5 (when given), the zip's directory, the layout and the
    memory bound (from the first training image's header). Raises ConfigError / DataError in one line."""
    src, _ = _source(path, md5, dataset)
    with src:
        layout = scan(src, classes)
        _check_memory(src, layout, resize, max_memory_mb)
    return layout


def _check_memory(src: Source, layout: Layout, resize: Sequence[int] | None, max_memory_mb: float | None) -> None:
    """Refuse a data set whose float32 form (estimated from the first training image) exceeds the bound."""
    with _open_image(src, layout.train[0]) as im:
        (w, h), channels = im.size, 1 if im.mode in ("L", "1", "LA", "La", *_GREY16) else 3
    if resize is not None:
        h, w = (int(v) for v in resize)
    n = len(layout.train) + len(layout.test)
    need = n * channels * h * w * 4 / 2**20
    bound = DEFAULT_MAX_MEMORY_MB if max_memory_mb is None else float(max_memory_mb)
    if need > bound:
        raise ConfigError(
            "dataset.max_memory_mb",
            bound,
            f"at least {need:.3g} for {n} images of {channels}×{h}×{w} "
            "held as float32 (image_folder is held in memory, not streamed)",
        )


# --------------------------------------------------------------------------------------------- cache
def writable(folder: Path) -> bool:
    """May ``folder`` be written (created if missing)? Its nearest existing ancestor must have a write
    permission bit and be writable by this process: read-only data is not written, even by root."""
    p = folder
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return p.is_dir() and bool(p.stat().st_mode & 0o222) and os.access(p, os.W_OK)
    except OSError:
        return False


def _read_cache(path: Path, key: str) -> Decoded | None:
    try:
        with np.load(path, allow_pickle=False) as npz:
            if str(npz["key"]) != key:
                return None
            d = Decoded(
                npz["x_train"],
                npz["y_train"],
                npz["x_test"],
                npz["y_test"],
                tuple(str(c) for c in npz["classes"]),
                [str(f) for f in npz["train_files"]],
                [str(f) for f in npz["test_files"]],
            )
    except Exception:  # a truncated, foreign or half-replaced file: decoded again
        return None
    ok = (
        len(d.x_train) == len(d.y_train) == len(d.train_files)
        and len(d.x_test) == len(d.y_test) == len(d.test_files)
        and d.x_train.dtype == d.x_test.dtype == np.uint8
    )
    return d if ok else None


def _write_cache(path: Path, key: str, d: Decoded) -> bool:
    """The decoded images into the cache file ``path``, whole or not at all (:func:`psbench.files.write_atomic`);
    False where it cannot be written (a cache is optional: a full or read-only disk only costs the next decode)."""
    arrays: dict[str, Any] = {  # Any: numpy's savez stubs take **kwds as its flags
        "key": np.asarray(key),
        "x_train": d.x_train,
        "y_train": d.y_train,
        "x_test": d.x_test,
        "y_test": d.y_test,
        "classes": np.asarray(d.classes),
        "train_files": np.asarray(d.train_files),
        "test_files": np.asarray(d.test_files),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda fh: np.savez(fh, **arrays))
        return True
    except (OSError, DiskFull):
        return False


def cache_file(cache_dirs: Sequence[str | Path], stem: str, key: str) -> Path | None:
    """Where the cache of ``key`` is read and written: the first writable of ``cache_dirs`` (None: none is)."""
    name = f"image_folder-{stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"
    return next((Path(d) / name for d in cache_dirs if writable(Path(d))), None)


def load_image_folder(
    path: str | Path,
    md5: str | None = None,
    classes: Sequence[str] | None = None,
    resize: Sequence[int] | None = None,
    cache_dirs: Sequence[str | Path] = (),
    max_memory_mb: float | None = None,
    dataset: str = "image_folder",
) -> Decoded:
    """The decoded images of ``path`` in the balanced order, from the cache when it holds them."""
    src, checked = _source(path, md5, dataset)
    with src:
        layout = scan(src, classes)
        ident = {
            "version": CACHE_VERSION,
            **src.identity(layout.train + layout.test),
            "md5": checked,
            "resize": None if resize is None else [int(v) for v in resize],
            "classes": list(layout.classes),
        }
        key = json.dumps(ident, sort_keys=True)
        where = cache_file(cache_dirs, src.path.stem, key)
        if where is not None and where.is_file():
            hit = _read_cache(where, key)
            if hit is not None:
                return hit
        _check_memory(src, layout, resize, max_memory_mb)
        d = Decoded(
            decode_images(src, layout.train, resize),
            layout.train_labels,
            decode_images(src, layout.test, resize),
            layout.test_labels,
            layout.classes,
            layout.train,
            layout.test,
        )
    if d.x_train.shape[1] != d.x_test.shape[1]:  # one split all greyscale, the other not: both RGB
        d = Decoded(_rgb(d.x_train), d.y_train, _rgb(d.x_test), d.y_test, d.classes, d.train_files, d.test_files)
    if d.x_train.shape[2:] != d.x_test.shape[2:]:
        raise DataError(
            f"{dataset}: images differ in size: {src.where(d.train_files[0])} is "
            f"{d.x_train.shape[2]}×{d.x_train.shape[3]} (H×W), {src.where(d.test_files[0])} is "
            f"{d.x_test.shape[2]}×{d.x_test.shape[3]}; set dataset.resize=[H, W]"
        )
    if where is not None:
        _write_cache(where, key, d)
    return d


def _rgb(x: np.ndarray) -> np.ndarray:
    return np.repeat(x, 3, axis=1) if x.shape[1] == 1 else x
