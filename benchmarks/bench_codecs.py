"""Codec throughput: compress + decompress of a 25 MB fp32 gradient, against ``torch.clone`` in the same run.

    OMP_NUM_THREADS=1 python benchmarks/bench_codecs.py [--mb 25] [--repeat 11] [--threads N] [--only terngrad]

For each codec, the median of ``--repeat`` timings of decompress(compress(g)) — real packing, the
payload tensors are the serialized bytes — in GB/s of fp32 gradient, its wire ratio (fp32 bytes /
payload bytes) and the ratio of its throughput to ``g.clone()`` (a memory-bound reference; each
codec run is paired with a clone run right before it, so both see the same load on a shared machine;
the ratio is that of the medians). Target: TernGrad 2-bit ≥ 0.1 of clone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from psbench.compression import FP16, QSGD, NoCompression, RandomK, SignSGD, TernGrad, TopK
from psbench.compression.error_feedback import ErrorFeedback

CODECS = {
    "none": NoCompression,
    "fp16": FP16,
    "qsgd s=4 b=512": lambda: QSGD(4, 512),
    "topk 1%": lambda: TopK(0.01),
    "randomk 1%": lambda: RandomK(0.01),
    "signsgd": SignSGD,
    "signsgd+ef": lambda: ErrorFeedback(SignSGD()),
    "terngrad 2bit": lambda: TernGrad(2.5, "2bit"),
    "terngrad base3": lambda: TernGrad(2.5, "base3"),
    "terngrad noclip 2bit": lambda: TernGrad(None, "2bit"),
}


def paired(ref, fn, repeat: int) -> tuple[float, float]:
    """Median seconds of ``ref()`` and of ``fn()``, timed alternately ``repeat`` times after a warm-up."""
    ref(), fn()
    a, b = [], []
    for _ in range(repeat):
        for f, out in ((ref, a), (fn, b)):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
    return statistics.median(a), statistics.median(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=25.0)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--only", default=None, help="substring of the codec names to run")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = int(args.mb * 1e6 / 4)
    g = torch.randn(n, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    gb = 4 * n / 1e9
    print(f"gradient: {n:,} fp32 = {4 * n / 1e6:.1f} MB, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'codec':24s} {'GB/s':>8s} {'wire ×':>8s} {'/ clone':>8s}")
    for name, make in CODECS.items():
        if args.only and args.only not in name:
            continue
        codec = make()
        p = codec.compress(g, "g", gen)
        clone_s, codec_s = paired(lambda: g.clone(), lambda c=codec: c.decompress(c.compress(g, "g", gen)), args.repeat)
        clone_gbs = gb / clone_s
        print(
            f"{name:24s} {gb / codec_s:8.2f} {4 * n / codec.nbytes(p):8.2f} {clone_s / codec_s:8.3f}"
            f"   (clone {clone_gbs:.1f} GB/s)"
        )


if __name__ == "__main__":
    main()
