"""ImageNet streaming throughput: training crops per second of ``dataset=imagenet`` on generated ILSVRC-sized JPEGs.

    python benchmarks/bench_imagenet.py [--images 256] [--batch 64] [--threads 1 2 4] [--prefetch 0 256]

Writes ``--images`` JPEGs of ImageNet's typical size (500×375, quality 90) in the ILSVRC layout under a
temporary dir, then reads one epoch of the sample stream in batches of ``--batch`` with ``take`` (random
227×227 crops of 256-pixel images, Caffe's data layer) for each (threads, prefetch), and prints images/s.
For scale: Rudra's baseline (μ, λ) = (256, 1) trains 1.2 M images in 54 h, 6.2 images/s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from psbench.data.imagenet import ImageNetDataModule
from psbench.ps.samples import SampleStream


def write(root: Path, n: int, classes: int = 4) -> None:
    rng = np.random.default_rng(0)
    for k in range(n):
        folder = root / "imagenet" / "train" / f"n{k % classes:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        smooth = rng.integers(0, 255, size=(47, 63, 3), dtype=np.uint8)  # upsampled noise: photo-like JPEG sizes
        Image.fromarray(smooth).resize((500, 375), Image.Resampling.BICUBIC).save(folder / f"{k}.JPEG", quality=90)
    for c in range(classes):
        val = root / "imagenet" / "val" / f"n{c:08d}"
        val.mkdir(parents=True, exist_ok=True)
        (val / "0.JPEG").write_bytes((root / "imagenet" / "train" / f"n{c:08d}" / f"{c}.JPEG").read_bytes())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--prefetch", type=int, nargs="+", default=[0, 256])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), a.images)
        for threads in a.threads:
            for prefetch in a.prefetch:
                dm = ImageNetDataModule(tmp, crop=227, resize=256, threads=threads, prefetch=prefetch)
                dm.setup()
                stream = SampleStream(dm.num_train, 0)
                t0 = time.perf_counter()
                for p in range(0, dm.num_train, a.batch):
                    x = dm.x_train.take(stream.indices(p, a.batch), torch.arange(p, p + a.batch))
                dt = time.perf_counter() - t0
                print(
                    f"threads={threads} prefetch={prefetch}: {dm.num_train / dt:7.1f} images/s "
                    f"({tuple(x.shape[1:])} crops, peak {dm.x_train.peak_ahead} decoded ahead)"
                )


if __name__ == "__main__":
    main()
