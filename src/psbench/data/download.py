"""Fetch missing raw files (urllib, md5-checked) or explain in one line where to put them.

Downloads are opt-in (``download=True``); with no network the error names the missing file,
the folder that was searched and the canonical URL to fetch it from by hand.
"""

from __future__ import annotations

import shutil
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from psbench.data import sources
from psbench.data.checksum import expected_md5, verify_md5
from psbench.errors import DataError

#: Seconds before a connection / read is abandoned; short so offline machines fail fast.
TIMEOUT_S = 5.0


def download_url(
    url: str, dest: str | Path, md5: str | None, dataset: str = "data", timeout: float = TIMEOUT_S
) -> Path:
    """Download ``url`` to ``dest`` atomically (``.part`` then rename) and check its md5."""
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=timeout) as resp, part.open("wb") as out:
            shutil.copyfileobj(resp, out, length=1 << 20)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        part.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"{dataset}: {dest.name} missing from {dest.parent} and download from {url} "
            f"failed ({reason}); put the file at {dest}"
        ) from exc
    if md5 is not None:
        try:
            verify_md5(part, md5, dataset)
        except DataError:
            part.unlink(missing_ok=True)
            raise DataError(f"{dataset}: download of {url} to {dest} has the wrong md5 (expected {md5})") from None
    part.replace(dest)
    return dest


def _extract_cifar10(archive: Path, data_dir: Path) -> None:
    prefix = sources.CIFAR10_DIR + "/"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            tar.extractall(data_dir, members=members, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise DataError(f"cifar10: cannot extract {archive}: {exc}") from exc


def _fetch(dataset: str, data_dir: Path, missing: list[str]) -> None:
    if dataset == "cifar10":
        archive = data_dir / sources.CIFAR10_ARCHIVE
        if not archive.exists():
            download_url(sources.CIFAR10_URL, archive, expected_md5(sources.CIFAR10_ARCHIVE), dataset)
        else:
            verify_md5(archive, expected_md5(sources.CIFAR10_ARCHIVE), dataset)
        _extract_cifar10(archive, data_dir)
        return
    for key in missing:
        url = sources.source_url(key)
        path = data_dir / key
        if url is None:
            raise DataError(
                f"{dataset}: {path.name} not found in {path.parent} and it has no public "
                f"download; copy it there (see shared/datasets/README.md)"
            )
        download_url(url, path, expected_md5(key), dataset)


def ensure_files(
    dataset: str,
    data_dir: str | Path,
    keys: Iterable[str],
    download: bool = False,
    verify: bool = True,
) -> dict[str, Path]:
    """Return ``{key: path}`` for raw files under ``data_dir``, md5-verified.

    Missing files are downloaded when ``download`` is set (CIFAR-10's pickles are also
    unpacked from a ``cifar-10-python.tar.gz`` already in ``data_dir``); otherwise DataError
    names the first missing file, the folder searched and where to get it.
    """
    data_dir = Path(data_dir).expanduser()
    keys = tuple(keys)
    missing = [k for k in keys if not (data_dir / k).is_file()]
    archive_here = dataset == "cifar10" and (data_dir / sources.CIFAR10_ARCHIVE).is_file()
    if missing and (download or archive_here):  # a hand-placed archive is unpacked too
        _fetch(dataset, data_dir, missing)
        missing = [k for k in keys if not (data_dir / k).is_file()]
    if missing:
        path = data_dir / missing[0]
        url = sources.source_url(missing[0])
        if url == sources.CIFAR10_URL:
            where = f"download {url} and unpack it in {data_dir}"
        elif url:
            where = f"download it from {url} into that folder"
        else:
            where = "copy it there from shared/datasets (it has no public download)"
        hint = "" if download or url is None else ", or pass download=True"
        raise DataError(f"{dataset}: {path.name} not found in {path.parent}; {where}{hint}")
    paths = {k: data_dir / k for k in keys}
    if verify:
        for key, path in paths.items():
            verify_md5(path, expected_md5(key), dataset)
    return paths
