"""The files a run writes: each one whole or not at all, and a full disk said in one line naming the file.

:func:`write_atomic` writes to a private temporary file beside the target and renames it; whatever interrupts the
write (a full disk, a quota, a file-size limit) removes the temporary file, so a run dir never holds a ``.tmp``
leftover or half a checkpoint. A full disk — ``ENOSPC``, ``EDQUOT`` or ``EFBIG`` — becomes :class:`DiskFull`, a
:class:`~psbench.errors.RunFailure` whose line names the file and the space left (:func:`disk_full_line`); the job
ends FAILED with that line, its ``summary.json`` where space allows. :func:`torch_save` serializes into memory first:
``torch.save`` to a file on a full disk raises a ``RuntimeError`` from its C++ writer ("unexpected pos 704 vs 598")
that names neither the file nor the cause.

A signal is held while a file is written and raised once the file is whole (:data:`hold_signals`). Raised inside a
writer (``np.savez``'s ``zipfile``), it made the writer's own clean-up fail ("Can't close the ZIP file while there is
an open writing handle") and the job ended FAILED with that error instead of KILLED.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Any

from psbench.errors import RunFailure

#: the errors of a write that found no room: no space, over quota, over the file-size limit (RLIMIT_FSIZE)
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DiskFull(RunFailure):
    """A write found no room; ``str(err)`` names the file and the space left on its file system."""


#: Holds signals while a file is written: :func:`psbench.lifecycle.install` sets it to ``lifecycle.deferred`` (a
#: signal then waits for the whole file); where psbench's handlers are not installed there is nothing to hold.
hold_signals: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or what caused it) is a write that found no room (:data:`FULL`)."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, DiskFull) or (isinstance(e, OSError) and e.errno in FULL):
            return True
        e = e.__cause__ or e.__context__
    return False


def _free(path: Path) -> str:
    for p in (path, *path.parents):
        try:
            free = shutil.disk_usage(p).free
        except OSError:
            continue
        return f"{free / 2**20:.1f} MiB" if free >= 2**20 else f"{free / 2**10:.0f} KiB"
    return "unknown"


def disk_full_line(err: BaseException, where: str | os.PathLike[str]) -> str:
    """``no space left on device writing /runs/x/checkpoint.pt (12 KiB free there)``: the file the error names,
    else ``where``; the error's own words for a quota or a file-size limit."""
    if isinstance(err, DiskFull):
        return str(err)
    e: BaseException | None = err
    while e is not None and not (isinstance(e, OSError) and e.errno in FULL):
        e = e.__cause__ or e.__context__
    name = getattr(e, "filename", None) or where
    code = getattr(e, "errno", errno.ENOSPC)
    what = "no space left on device" if code == errno.ENOSPC else os.strerror(code).lower()
    return f"{what} writing {name} ({_free(Path(name))} free there)"


def write_atomic(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write`` on a temporary file beside ``path``, then rename it to ``path``; on any error (or signal) the
    temporary file is removed. A full disk raises :class:`DiskFull` naming ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")  # unique across hosts too
    try:
        with hold_signals():  # a signal is raised after the file is whole
            with open(tmp, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.errno in FULL:
            raise DiskFull(disk_full_line(exc, path)) from exc
        raise
    return path


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """``data`` into ``path``, whole or not at all (:func:`write_atomic`)."""
    return write_atomic(path, lambda fh: fh.write(data))


def torch_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save(obj)`` into ``path``, whole or not at all; a full disk is :class:`DiskFull` naming it."""
    import torch

    buf = io.BytesIO()
    with hold_signals():
        torch.save(obj, buf)
        return write_atomic(path, lambda fh: fh.write(buf.getbuffer()))
