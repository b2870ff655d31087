"""``dataset=arrays``: a user's own arrays in one ``.npz`` holding ``x_train, y_train, x_test, y_test``.

* ``x``: any shape [N, ...] (at least one axis after N; the same in both splits), any integer or float
  dtype. uint8 are pixels: scaled by 255 like images, and ``dataset.preprocess: null`` means ``unit_mean``
  (x/255 − the training set's per-pixel mean, as ``cifar10``). Every other dtype is taken as it is
  (``preprocess: null`` means ``none``) unless a ``preprocess`` option is given.
* ``y``: integer class labels [N] — classification, ``num_classes`` = the largest label + 1 unless
  ``dataset.num_classes`` is set — or float targets [N] / [N, k] — regression, output size 1 / k
  (:attr:`psbench.data.datamodule.ArrayDataModule.task`, ``output_size``).

The file is read with ``np.load(allow_pickle=False)``; other arrays in it are ignored. :func:`check_file`
reads only the arrays' headers (names, dtypes, shapes): it runs in :mod:`psbench.validate`, before any run
exists. A malformed file — an array missing, lengths that differ, a dtype or shape that is not allowed, a
truncated or corrupt file, labels out of range, NaN/inf — is a one-line :class:`~psbench.errors.DataError`
naming the file. Torch-free.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from psbench.errors import ConfigError, DataError

NAMES = ("x_train", "y_train", "x_test", "y_test")
#: the largest class label: counts are 32-bit (``psbench.schema.MAX_COUNT``), and a label of 2⁶⁴−1 asked for a model
#: with 2⁶⁴ outputs (its memory check then blamed ``model.hidden``)
MAX_LABEL = 2**31 - 2


@dataclass(frozen=True)
class Header:
    """What the ``.npz`` says about its arrays, without reading them."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, np.dtype]

    @property
    def task(self) -> str:
        return "regression" if self.dtypes["y_train"].kind == "f" else "classification"

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.shapes["x_train"][1:]


def _path(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError("dataset.path", str(path), "an existing .npz file holding x_train, y_train, x_test, y_test")
    return p


def npz_headers(
    path: Path, names: tuple[str, ...] = NAMES, dataset: str = "arrays"
) -> tuple[dict[str, tuple[int, ...]], dict[str, np.dtype]]:
    """The shapes and dtypes the ``.npz`` at ``path`` declares for ``names``, read from the arrays' headers without
    loading them, each checked against the bytes its member holds: a header that declares more data than the file
    holds (2·10⁹ rows in a file of a few KiB) is a :class:`DataError` naming the file, before numpy allocates what
    the header declares. A missing array, a truncated or corrupt file are DataErrors too."""
    shapes, dtypes = {}, {}
    try:
        with zipfile.ZipFile(path) as zf:
            members = {n.removesuffix(".npy"): n for n in zf.namelist()}
            missing = [k for k in names if k not in members]
            if missing:
                raise DataError(
                    f"{dataset}: {path} lacks {', '.join(missing)}; an .npz with {', '.join(names)} is needed"
                )
            for k in names:
                info = zf.getinfo(members[k])
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read(fh)
                    header = fh.tell()
                declared = math.prod(int(s) for s in shape) * dtype.itemsize
                held = info.file_size - header
                if not dtype.hasobject and declared != held:  # objects are pickled: refused by dtype, not read
                    raise DataError(
                        f"{dataset}: {path} {k} declares {list(shape)} {dtype} ({declared:,} bytes) but holds "
                        f"{held:,} bytes: the file is damaged or not what it says"
                    )
                shapes[k], dtypes[k] = tuple(int(s) for s in shape), dtype
    except DataError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
        raise DataError(f"{dataset}: cannot read {path} as an .npz ({' '.join(str(exc).split())})") from None
    return shapes, dtypes


def read_header(path: str | Path) -> Header:
    """The shapes and dtypes of the four arrays, checked (see the module docstring); DataError naming the file."""
    p = _path(path)
    shapes, dtypes = npz_headers(p)
    header = Header(shapes, dtypes)
    _check_header(p, header)
    _check_memory(p, header)
    return header


def _check_memory(p: Path, h: Header) -> None:
    """The arrays as read, and the float32 copies the run holds, fit in half this machine's memory (else
    :class:`DataError` naming the file, before anything is loaded: ``dataset=arrays`` is held in memory)."""
    from psbench.machine import physical_memory

    memory = physical_memory()
    if memory is None:
        return
    raw = sum(math.prod(h.shapes[k]) * h.dtypes[k].itemsize for k in NAMES)
    floats = sum(math.prod(h.shapes[k]) * 4 for k in NAMES)
    need = raw + 2 * floats  # read, cast to float32, preprocessed
    if need > memory // 2:
        n = h.shapes["x_train"][0] + h.shapes["x_test"][0]
        raise DataError(
            f"arrays: {p} holds {n:,} samples of {list(h.input_shape)} ({need / 2**30:.3g} GiB once read and held "
            f"as float32): more than half this machine's memory ({memory / 2**30:.1f} GiB); dataset=arrays is "
            "held in memory, not streamed"
        )


def _check_header(p: Path, h: Header) -> None:
    def bad(what: str) -> DataError:
        return DataError(f"arrays: {p} {what}")

    for part in ("train", "test"):
        x, y = f"x_{part}", f"y_{part}"
        xs, ys = h.shapes[x], h.shapes[y]
        if h.dtypes[x].kind not in "iuf" or len(xs) < 2:
            raise bad(
                f"{x} is {h.dtypes[x]} {list(xs)}: expected an integer or float array [N, ...] with at least "
                "one axis after N"
            )
        if xs[0] == 0:
            raise bad(f"{x} has no samples")
        if 0 in xs[1:]:
            raise bad(f"{x} is {list(xs)}: its samples have no input features (an axis of length 0)")
        if h.dtypes[y].kind not in "iuf":
            raise bad(f"{y} is {h.dtypes[y]}: expected integer class labels or float regression targets")
        if len(ys) not in (1, 2) or (h.dtypes[y].kind != "f" and len(ys) != 1) or ys[0] != xs[0]:
            raise bad(
                f"{y} is {list(ys)} for {xs[0]} samples of {x}: expected [{xs[0]}] (labels) "
                f"or [{xs[0]}] / [{xs[0]}, k] (float targets)"
            )
    if (h.dtypes["x_train"] == np.uint8) != (h.dtypes["x_test"] == np.uint8):
        raise bad(
            f"x_train is {h.dtypes['x_train']} but x_test is {h.dtypes['x_test']}: both uint8 (pixels) or neither"
        )
    if h.shapes["x_train"][1:] != h.shapes["x_test"][1:]:
        raise bad(
            f"x_train samples are {list(h.shapes['x_train'][1:])} but x_test's are {list(h.shapes['x_test'][1:])}"
        )
    if (h.dtypes["y_train"].kind == "f") != (h.dtypes["y_test"].kind == "f"):
        raise bad(f"y_train is {h.dtypes['y_train']} but y_test is {h.dtypes['y_test']}: both labels or both targets")
    if h.shapes["y_train"][1:] != h.shapes["y_test"][1:]:
        raise bad(
            f"y_train is {list(h.shapes['y_train'])} but y_test is {list(h.shapes['y_test'])}: "
            "the same number of targets per sample"
        )


def check_file(path: str | Path, md5: str | None = None) -> Header:
    """The up-front check: the md5 (when given) and the arrays' headers; nothing is loaded."""
    p = _path(path)
    if md5 is not None:
        from psbench.data.image_folder import checked_md5

        checked_md5(p, md5, "arrays")
    return read_header(p)


def output_size(header: Header, y_train: np.ndarray, y_test: np.ndarray, num_classes: int | None) -> int:
    """Classes (the largest label + 1, or ``num_classes``) or the number of regression targets k."""
    if header.task == "regression":
        return 1 if y_train.ndim == 1 else int(y_train.shape[1])
    top = int(max(y_train.max(), y_test.max()))
    return top + 1 if num_classes is None else int(num_classes)


def load_arrays(
    path: str | Path, md5: str | None = None, num_classes: int | None = None
) -> tuple[dict[str, np.ndarray], int]:
    """The four arrays, checked, and the output size (classes, or regression targets k)."""
    p = _path(path)
    header = check_file(p, md5)
    if header.task == "regression" and num_classes is not None:
        raise ConfigError("dataset.num_classes", num_classes, f"null with float targets y (regression), as {p} has")
    try:
        with np.load(p, allow_pickle=False) as npz:
            a = {k: npz[k] for k in NAMES}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
        raise DataError(f"arrays: cannot read {p} as an .npz ({' '.join(str(exc).split())})") from None
    for k in NAMES:
        if a[k].dtype.kind == "f" and not np.isfinite(a[k]).all():
            raise DataError(f"arrays: {p} {k} holds NaN or inf")
    if header.task == "classification":
        for k in ("y_train", "y_test"):
            low, high = int(a[k].min()), int(a[k].max())
            if low < 0 or high > MAX_LABEL or (num_classes is not None and high >= num_classes):
                allowed = (
                    f"in 0..{MAX_LABEL} (the model has one output per class, num_classes = the largest label + 1)"
                    if num_classes is None
                    else f"in 0..{num_classes - 1} (dataset.num_classes)"
                )
                raise DataError(f"arrays: {p} {k} has labels {low}..{high}: class labels must be {allowed}")
    size = output_size(header, a["y_train"], a["y_test"], num_classes)
    if header.task == "classification" and size < 2:
        raise DataError(f"arrays: {p} y_train and y_test hold one class (0) only; classification needs two or more")
    return a, size
