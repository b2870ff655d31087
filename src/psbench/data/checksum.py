"""MD5 of data files and the canonical checksum table (the md5s torchvision checks).

Every file a loader reads is verified against :data:`KNOWN_MD5` before use, so a truncated
download or a locally modified copy fails loudly with one line naming the file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from psbench.errors import DataError

#: Canonical md5 of every raw file, keyed by ``<folder under data_dir>/<file name>``.
KNOWN_MD5: dict[str, str] = {
    # MNIST (LeCun et al.), as mirrored at ossci-datasets.s3.amazonaws.com/mnist/
    "mnist/train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "mnist/train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "mnist/t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "mnist/t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    # Fashion-MNIST (Xiao et al.)
    "fashion-mnist/train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "fashion-mnist/train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "fashion-mnist/t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "fashion-mnist/t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    # CIFAR-10 python version (Krizhevsky): the archive and the pickles it unpacks to
    "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
    "cifar-10-batches-py/data_batch_1": "c99cafc152244af753f735de768cd75f",
    "cifar-10-batches-py/data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "cifar-10-batches-py/data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "cifar-10-batches-py/data_batch_4": "634d18415352ddfa80567beed471001a",
    "cifar-10-batches-py/data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "cifar-10-batches-py/test_batch": "40351d587109b95175f43aff81a1287e",
    "cifar-10-batches-py/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    # Offline CIFAR-10 prefix subset (shared/datasets/MD5SUMS)
    "cifar10-subset/cifar10-prefix-subset.npz": "776dc67625ad710a0679c1826690c422",
    "cifar10-subset/batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    # All of CIFAR-10 re-encoded as JPEG q75, offline only (shared/datasets/MD5SUMS)
    "cifar10-jpeg/cifar10-jpeg.zip": "e2c46d305c23e5eb9856381653688d0d",
}


def md5_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex md5 of ``path``, read in ``chunk_size`` chunks (constant memory)."""
    path = Path(path)
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with path.open("rb") as fh:
            while block := fh.read(chunk_size):
                digest.update(block)
    except OSError as exc:
        raise DataError(f"cannot read {path} to checksum it: {exc.strerror or exc}") from exc
    return digest.hexdigest()


def verify_md5(path: str | Path, expected: str, dataset: str = "data") -> None:
    """Raise :class:`DataError` unless ``md5(path) == expected``; the message names the file."""
    path = Path(path)
    actual = md5_file(path)
    if actual != expected.lower():
        raise DataError(f"{dataset}: {path} md5 {actual} != expected {expected}; delete it and re-download")


def expected_md5(key: str) -> str:
    """Canonical md5 for ``key`` (``<folder>/<file>``); DataError when the table lacks it."""
    try:
        return KNOWN_MD5[key]
    except KeyError:
        raise DataError(f"no known md5 for data file {key!r}") from None
