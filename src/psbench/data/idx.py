"""Reader for the IDX format of MNIST / Fashion-MNIST (http://yann.lecun.com/exdb/mnist/).

Header: two zero bytes, a type code, the number of dimensions, then one big-endian uint32
per dimension; the data follows in C order, big-endian. Files may be gzip-compressed.
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psbench.errors import DataError
from psbench.machine import physical_memory

#: IDX type code -> numpy dtype (big-endian as stored).
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"IDX file {path} not found") from None
    except OSError as exc:
        raise DataError(f"cannot read IDX file {path}: {exc.strerror or exc}") from exc
    if raw[:2] == b"\x1f\x8b":  # gzip magic, regardless of the suffix
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
                head = gz.read(4)
                dims = gz.read(4 * head[3]) if len(head) == 4 else b""
                size = _declared_size(head + dims, path)
                return head + dims + gz.read(None if size is None else size - len(head) - len(dims) + 1)
        except (OSError, EOFError, zlib.error) as exc:  # truncated, or corrupted deflate data
            raise DataError(f"IDX file {path} is not a valid gzip stream: {exc}") from None
    return raw


def _declared_size(header: bytes, path: Path) -> int | None:
    """The bytes an IDX header declares (header included), checked against half this machine's memory before the
    data is decompressed (a gzip that inflates to more than memory holds is refused naming the file); None when the
    header is malformed (:func:`parse_idx` says how)."""
    if len(header) < 4 or header[:2] != b"\0\0" or header[2] not in IDX_DTYPES or len(header) < 4 + 4 * header[3]:
        return None
    dims = np.frombuffer(header, dtype=">u4", count=header[3], offset=4)
    size = 4 + 4 * header[3] + math.prod(int(d) for d in dims) * IDX_DTYPES[header[2]].itemsize
    memory = physical_memory()
    if memory is not None and size > memory // 2:
        raise DataError(
            f"IDX file {path}: its header declares shape {tuple(int(d) for d in dims)} ({size / 2**30:.3g} GiB), "
            f"more than half this machine's memory ({memory / 2**30:.1f} GiB): the file is damaged or not what it says"
        )
    return size


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode an uncompressed IDX byte string to a native-endian numpy array."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DataError(f"IDX file {source}: bad magic number {data[:4].hex()}, expected 0000TTNN")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise DataError(
            f"IDX file {source}: unknown type code 0x{code:02x}, expected one of "
            + ", ".join(f"0x{c:02x}" for c in IDX_DTYPES)
        )
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise DataError(f"IDX file {source}: truncated header for {ndim} dimensions")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_DTYPES[code]
    count = int(np.prod(dims))
    if len(data) - header != count * dtype.itemsize:
        raise DataError(
            f"IDX file {source}: {len(data) - header} data bytes, expected {count * dtype.itemsize} for shape {dims}"
        )
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=False) if dtype.itemsize > 1 else arr


def read_idx(path: str | Path, expected_shape: Sequence[int | None] | None = None) -> np.ndarray:
    """Read an IDX (optionally gzip) file; check dims against ``expected_shape`` (None = any)."""
    path = Path(path)
    arr = parse_idx(_read_bytes(path), str(path))
    if expected_shape is not None:
        ok = len(expected_shape) == arr.ndim and all(
            e is None or e == a for e, a in zip(expected_shape, arr.shape, strict=False)
        )
        if not ok:
            want = "x".join("*" if e is None else str(e) for e in expected_shape)
            raise DataError(f"IDX file {path}: shape {arr.shape}, expected {want}")
    return arr
