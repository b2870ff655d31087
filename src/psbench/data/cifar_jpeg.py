"""The JPEG counterparts of ``cifar10_subset``'s images: what the JPEG re-encoding of ``cifar10_jpeg`` costs.

::

    python -m psbench.data.cifar_jpeg match-subset --out subset-jpeg.npz [--data-dir DIR] [--root-dir DIR]

writes, in ``dataset=arrays``' format, the subset's 5,085 training and 1,017 test images (same order, same
labels as ``cifar10-subset/cifar10-prefix-subset.npz``) as ``cifar10-jpeg/cifar10-jpeg.zip`` holds them:
each is the zip's image of the same class and split nearest to the subset's in pixels (Euclidean, searched
as a matrix product in chunks, the two nearest then measured exactly), with ``train_files`` / ``test_files``
naming the zip's members. Both files are md5-checked; the zip's decode is cached as ``dataset=cifar10_jpeg``'s
(:mod:`psbench.data.image_folder`). Train on the same images both ways::

    psbench ... dataset=cifar10_subset
    psbench ... dataset=arrays dataset.path=subset-jpeg.npz dataset.data_note=cifar10_jpeg_q75

(uint8 pixels: ``arrays`` preprocesses them as ``cifar10_subset`` does, ``unit_mean`` unless told otherwise).

It prints the match statistics: the mean absolute pixel difference of the matches (the JPEG loss), how many
are unambiguous (the nearest at most :data:`AMBIGUOUS` times as far as the second nearest, RMS), and how
many agree with the zip's names where the original order gives them (the subset's test images and its first
1,017 training images, batch 1's, are ``NNNN`` = their rank within their class). It refuses — one line, exit
2, nothing written — if a match is ambiguous, disagrees with its name, or two subset images share one match.

Why 3/4 and not 1/2: CIFAR-10 holds near-duplicate images. For 11 of the subset's 5,085 training images the
second nearest is such a near-duplicate's JPEG, at 1.5–2× the distance of the nearest (ratios 0.51–0.65;
every other match is below 0.5, the test set's below 0.44); two of the 11 are batch-1 images whose NNNN names
confirm the nearest, and no two subset images share a match.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from psbench.data import sources
from psbench.data.options import CIFAR10_JPEG_NOTE
from psbench.errors import ConfigError, DataError
from psbench.files import DiskFull, write_atomic

#: a match is ambiguous when the nearest image is more than this fraction of the second nearest's RMS distance
AMBIGUOUS = 0.75
#: the subset's first images of training batch 1 (``cifar10-subset``: the first 1,017 of each batch)
PREFIX = 1017


def nearest_two(queries: np.ndarray, pool: np.ndarray, chunk: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """For each query image, the indices of its two nearest ``pool`` images (squared Euclidean distance over
    the pixels), nearest first, and their exact squared distances (int64), both [Q, 2]."""
    p = pool.reshape(len(pool), -1)
    pf = p.astype(np.float32)
    pn = np.einsum("ij,ij->i", pf, pf)
    idx = np.empty((len(queries), 2), np.int64)
    dist = np.empty((len(queries), 2), np.int64)
    for s in range(0, len(queries), chunk):
        q = queries[s : s + chunk].reshape(-1, p.shape[1])
        approx = pn[None, :] - 2.0 * (q.astype(np.float32) @ pf.T)  # + |q|², the same for every pool image
        two = np.argpartition(approx, 1, axis=1)[:, :2]
        diff = q[:, None, :].astype(np.int64) - p[two].astype(np.int64)
        exact = np.einsum("qkd,qkd->qk", diff, diff)
        order = np.argsort(exact, axis=1, kind="stable")
        idx[s : s + chunk] = np.take_along_axis(two, order, axis=1)
        dist[s : s + chunk] = np.take_along_axis(exact, order, axis=1)
    return idx, dist


def rank_in_class(labels: np.ndarray) -> np.ndarray:
    """Each sample's rank among the samples of its class, in order (the zip's ``NNNN``)."""
    rank = np.empty(len(labels), np.int64)
    for c in np.unique(labels):
        at = np.flatnonzero(labels == c)
        rank[at] = np.arange(len(at))
    return rank


def match_split(x: np.ndarray, y: np.ndarray, zx: np.ndarray, zy: np.ndarray, zfiles: list[str], named: int) -> dict:
    """The zip's counterpart of each (x, y) among (zx, zy) of the same class, and the statistics; the first
    ``named`` samples must match ``<split>/<class>/<rank in class>.jpg``."""
    zfiles_a = np.asarray(zfiles)
    match = np.empty(len(x), np.int64)
    d = np.empty((len(x), 2), np.int64)
    for c in np.unique(y):
        mine, pool = np.flatnonzero(y == c), np.flatnonzero(zy == c)
        two, dist = nearest_two(x[mine], zx[pool])
        match[mine], d[mine] = pool[two[:, 0]], dist
    pixels = int(np.prod(x.shape[1:]))
    mad = np.abs(x.astype(np.int16) - zx[match].astype(np.int16)).reshape(len(x), -1).mean(axis=1)
    ratio = np.where(d[:, 1] > 0, np.sqrt(d[:, 0] / np.maximum(d[:, 1], 1)), 1.0)  # two equal images: 1
    split = zfiles[0].split("/")[0]
    ranks = rank_in_class(y[:named])
    names = np.asarray(
        [f"{split}/{sources.CIFAR10_CLASSES[c]}/{r:04d}.jpg" for c, r in zip(y[:named], ranks, strict=True)]
    )
    return {
        "match": match,
        "files": zfiles_a[match],
        "mad": mad,
        "rms": np.sqrt(d[:, 0] / pixels),
        "ratio": ratio,
        "unambiguous": int((ratio <= AMBIGUOUS).sum()),
        "named": named,
        "agree": int((zfiles_a[match[:named]] == names).sum()),
        "distinct": len(np.unique(match)),
    }


def match_subset(data_dir: str | Path, cache_dirs: list[Path], verify: bool = True) -> tuple[dict, dict, dict]:
    """(the arrays to write, the train statistics, the test statistics)."""
    from psbench.data.checksum import expected_md5
    from psbench.data.cifar import load_cifar10_subset
    from psbench.data.download import ensure_files
    from psbench.data.image_folder import load_image_folder

    subset_key, zip_key = sources.DATASET_FILES["cifar10_subset"][0], sources.DATASET_FILES["cifar10_jpeg"][0]
    paths = ensure_files("cifar10_subset", data_dir, (subset_key,), verify=verify)
    paths.update(ensure_files("cifar10_jpeg", data_dir, (zip_key,), verify=False))
    s = load_cifar10_subset(paths[subset_key])
    z = load_image_folder(
        paths[zip_key],
        md5=expected_md5(zip_key) if verify else None,
        classes=sources.CIFAR10_CLASSES,
        cache_dirs=cache_dirs,
        dataset="cifar10_jpeg",
    )
    train = match_split(s.x_train, s.y_train, z.x_train, z.y_train, z.train_files, min(PREFIX, len(s.x_train)))
    test = match_split(s.x_test, s.y_test, z.x_test, z.y_test, z.test_files, len(s.x_test))
    out = {
        "x_train": z.x_train[train["match"]],
        "y_train": s.y_train,
        "x_test": z.x_test[test["match"]],
        "y_test": s.y_test,
        "train_files": train["files"],
        "test_files": test["files"],
    }
    return out, train, test


def report(name: str, st: dict) -> str:
    n = len(st["match"])
    return (
        f"{name}: {n} images matched; mean |Δpixel| {st['mad'].mean():.2f} of 255 (per image "
        f"{st['mad'].min():.2f}–{st['mad'].max():.2f}); unambiguous {st['unambiguous']}/{n} (nearest ≤ "
        f"{AMBIGUOUS:g} × the second nearest, RMS; {int((st['ratio'] > 0.5).sum())} above 0.5, the largest "
        f"{st['ratio'].max():.3f}); {st['agree']}/{st['named']} agree with their NNNN name; "
        f"{st['distinct']} distinct zip images"
    )


def problems(name: str, st: dict) -> list[str]:
    n = len(st["match"])
    out = []
    if st["unambiguous"] < n:
        worst = int(np.argmax(st["ratio"]))
        out.append(
            f"{n - st['unambiguous']} {name} matches are ambiguous (e.g. {name} image {worst}: "
            f"{st['files'][worst]}, nearest/second = {st['ratio'][worst]:.3f})"
        )
    if st["agree"] < st["named"]:
        out.append(
            f"{st['named'] - st['agree']} of the first {st['named']} {name} images match another file than "
            "their NNNN name"
        )
    if st["distinct"] < n:
        out.append(f"{n - st['distinct']} {name} images share a match")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m psbench.data.cifar_jpeg", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("match-subset", help="write the JPEG counterparts of cifar10_subset's images (arrays .npz)")
    m.add_argument("--out", required=True, type=Path, help="the .npz to write (dataset=arrays' format)")
    m.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="holds cifar10-subset/ and cifar10-jpeg/ (default: psbench's paths.data_dir)",
    )
    m.add_argument(
        "--root-dir",
        type=Path,
        default=None,
        help="the decode cache's fallback, <root>/cache (default: $PSBENCH_ROOT, else the current dir)",
    )
    m.add_argument("--no-verify", action="store_true", help="skip the md5 checks")
    args = parser.parse_args(argv)
    root = args.root_dir or Path(os.environ.get("PSBENCH_ROOT") or Path.cwd())
    if args.data_dir is None:
        from psbench.paths import default_data_dir

        args.data_dir = Path(os.environ.get("PSBENCH_DATA") or default_data_dir(str(root)))
    try:
        out, train, test = match_subset(args.data_dir, [args.data_dir / "cache", root / "cache"], not args.no_verify)
        print(report("train", train))
        print(report("test", test))
        wrong = problems("train", train) + problems("test", test)
        if wrong:
            raise DataError("; ".join(wrong) + f" — {args.out} not written")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out, lambda fh: np.savez(fh, **out))
    except (DataError, ConfigError, DiskFull, OSError) as err:
        print(f"{parser.prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.out}: x_train {list(out['x_train'].shape)}, x_test {list(out['x_test'].shape)}; "
        f"train with dataset=arrays dataset.path={args.out} dataset.data_note={CIFAR10_JPEG_NOTE}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
