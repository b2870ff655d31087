"""TernGrad's analytic performance model (Appendix B, Eq 15–18) and the Fig 5 throughput curves.

A cluster of j machines × i GPUs: all-reduce inside a machine (log2 i GPU↔GPU steps of |g| at C_gwd,
one GPU→CPU copy at C_cwd), then between machines ((C_ncost + |g|/C_nwd)·log2 j):

* Eq 15  T_strong = (T(1,1,K) − |g|/C_cwd)/N + |g|/C_gwd·log2 i + |g|/C_cwd + (C_ncost + |g|/C_nwd)·log2 j
* Eq 16  Tput_strong = K / T_strong
* Eq 17  T_weak = T(1,1,K) + |g|/C_gwd·log2 i + (C_ncost + |g|/C_nwd)·log2 j
* Eq 18  Tput_weak = N·K / T_weak

Fig 5 keeps the mini-batch per GPU fixed (AlexNet 128, GoogLeNet 64, VGG-A 32), i.e. weak scaling, on
(a) 128 nodes × 4 GTX 1080, 1 Gb Ethernet, GPUs behind one PCIe switch, and (b) 128 nodes × 4 P100,
100 Gb InfiniBand, NVLink. With TernGrad |g| is the 2-bit payload (4 codes per byte + one float32
scaler per tensor, :class:`~psbench.compression.terngrad.TernGrad`).

Stated inputs (the paper gives neither its profiled T(1,1,K) nor its bandwidths): gradient sizes are
the models' parameter counts; T(1,1,K) = 3·F·K / (peak·η) with F the forward FLOPs per image, the
GPU's fp32 peak, and one achieved fraction η for every model and GPU. η = 0.075 is the value at which
Eq 17 gives the paper's 3.04× for AlexNet on 8 GPUs over 1 GbE — that one point is calibrated; every
other claim (1 GbE vs InfiniBand, AlexNet/VGG-A vs GoogLeNet, the curves) is then predicted.

``python -m psbench.compression.perf_model --out DIR`` writes ``fig5.csv`` and ``fig5.png``.
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import dataclass
from pathlib import Path

from psbench.compression.terngrad import TernGrad


@dataclass(frozen=True)
class Cluster:
    """j machines × i GPUs; bandwidths in bytes/s, latency in seconds (Appendix B's C_*)."""

    name: str
    nodes: int
    gpus_per_node: int
    gpu_gpu_Bps: float  # C_gwd, dedicated GPU↔GPU bandwidth inside a machine
    cpu_gpu_Bps: float  # C_cwd, GPU↔CPU
    network_Bps: float  # C_nwd, between machines
    latency_s: float  # C_ncost, network latency
    peak_flops: float  # fp32 peak of one GPU (for the stated step times)


@dataclass(frozen=True)
class Model:
    name: str
    params: int
    tensors: int  # weight + bias tensors: one TernGrad scaler each
    batch_per_gpu: int  # K
    forward_flops: float  # per image


#: Fig 5 presets. 1 GbE = 125 MB/s; PCIe 3.0 ×16 through a switch ≈ 10 GB/s; NVLink (P100) 40 GB/s;
#: 100 Gb InfiniBand = 12.5 GB/s; GTX 1080 8.9 TFLOPS, P100 (SXM2) 10.6 TFLOPS.
CLUSTERS: dict[str, Cluster] = {
    "gtx1080_1gbe": Cluster("128 nodes × 4 GTX 1080, 1 GbE, PCI switch", 128, 4, 10e9, 10e9, 125e6, 50e-6, 8.9e12),
    "p100_infiniband": Cluster("128 nodes × 4 P100, 100 Gb InfiniBand, NVLink", 128, 4, 40e9, 12e9, 12.5e9, 2e-6,
                               10.6e12),
}
#: AlexNet 61.1 M parameters, 0.72 GMAC; GoogLeNet (no auxiliary classifiers, §4.2) 6.8 M, 1.5 GMAC;
#: VGG-A 132.9 M, 7.6 GMAC (Simonyan & Zisserman Table 2). Fig 5 batch per GPU: 128, 64, 32.
MODELS: dict[str, Model] = {
    "alexnet": Model("AlexNet", 61_100_840, 16, 128, 1.45e9),
    "googlenet": Model("GoogLeNet", 6_797_700, 116, 64, 3.0e9),
    "vgg_a": Model("VGG-A", 132_863_336, 22, 32, 15.2e9),
}
EFFICIENCY = 0.075  # η, calibrated once (see the module docstring)


def step_time(model: Model, cluster: Cluster, efficiency: float | None = None) -> float:
    """T(1, 1, K, |g|): one GPU's forward + backward (≈ 3× forward FLOPs) on K images."""
    return 3 * model.forward_flops * model.batch_per_gpu / (cluster.peak_flops * (efficiency or EFFICIENCY))


def gradient_bytes(model: Model, terngrad: bool = False) -> float:
    """|g| on the wire: fp32, or TernGrad 2-bit codes + one float32 scaler per tensor."""
    if not terngrad:
        return 4.0 * model.params
    per_tensor = model.params / model.tensors
    return model.tensors * TernGrad(wire="2bit").expected_bytes(math.ceil(per_tensor))


def layout(gpus: int, cluster: Cluster) -> tuple[int, int]:
    """(i GPUs per machine, j machines) for N GPUs, filling machines first."""
    i = min(gpus, cluster.gpus_per_node)
    return i, math.ceil(gpus / i)


def t_comm(c: Cluster, i: int, j: int, g: float) -> float:
    """T_comm(i, j, K, |g|) of Appendix B (without the GPU→CPU copy, which Eq 15/17 add explicitly)."""
    return g / c.gpu_gpu_Bps * math.log2(i) + (c.latency_s + g / c.network_Bps) * math.log2(j)


def t_strong(c: Cluster, i: int, j: int, t1: float, g: float, g_profiled: float) -> float:
    """Eq (15); ``g_profiled`` is the fp32 |g| whose GPU→CPU copy the profiled T(1,1,K) contains."""
    n = i * j
    return (t1 - g_profiled / c.cpu_gpu_Bps) / n + t_comm(c, i, j, g) + g / c.cpu_gpu_Bps


def t_weak(c: Cluster, i: int, j: int, t1: float, g: float, g_profiled: float) -> float:
    """Eq (17) (with |g| of the copy replaced by the payload when it differs from the profiled fp32)."""
    return t1 - g_profiled / c.cpu_gpu_Bps + g / c.cpu_gpu_Bps + t_comm(c, i, j, g)


def throughput(model: Model, cluster: Cluster, gpus: int, terngrad: bool = False, scaling: str = "weak") -> float:
    """Images per second: Eq (18) (weak, Fig 5) or Eq (16) (strong, K = the per-GPU batch × N)."""
    i, j = layout(gpus, cluster)
    t1, g, g0 = step_time(model, cluster), gradient_bytes(model, terngrad), gradient_bytes(model)
    if scaling == "weak":
        return gpus * model.batch_per_gpu / t_weak(cluster, i, j, t1, g, g0)
    k = model.batch_per_gpu * gpus
    t1k = t1 * gpus  # the profiled single-GPU time for the whole mini-batch of K
    return k / t_strong(cluster, i, j, t1k, g, g0)


def speedup(model: str, cluster: str, gpus: int, scaling: str = "weak") -> float:
    m, c = MODELS[model], CLUSTERS[cluster]
    return throughput(m, c, gpus, True, scaling) / throughput(m, c, gpus, False, scaling)


GPUS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def fig5(out: Path, gpus: tuple[int, ...] = GPUS) -> tuple[Path, Path]:
    """Write Fig 5's curves (weak scaling, with and without TernGrad) as CSV and PNG."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [(ck, mk, n, tern, throughput(m, c, n, tern))
            for ck, c in CLUSTERS.items() for mk, m in MODELS.items() for n in gpus for tern in (False, True)]
    csv_path = out / "fig5.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["cluster", "model", "gpus", "terngrad", "images_per_s", "speedup"])
        base = {(ck, mk, n): v for ck, mk, n, t, v in rows if not t}
        for ck, mk, n, t, v in rows:
            w.writerow([ck, mk, n, int(t), f"{v:.1f}", f"{v / base[(ck, mk, n)]:.3f}"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (ck, c) in zip(axes, CLUSTERS.items(), strict=True):
        for color, (mk, m) in zip(("C0", "C1", "C2"), MODELS.items(), strict=True):
            for tern, style in ((False, "--"), (True, "-")):
                ys = [v for c2, m2, _, t, v in rows if c2 == ck and m2 == mk and t == tern]
                ax.plot(gpus, ys, style, color=color, marker="o", ms=3,
                        label=f"{m.name} {'TernGrad' if tern else 'fp32'}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs")
        ax.set_ylabel("images / s")
        ax.set_title(c.name, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("TernGrad Fig 5: performance model (Appendix B, Eq 17–18), weak scaling")
    fig.tight_layout()
    png = out / "fig5.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return csv_path, png


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("fig5"))
    args = ap.parse_args(argv)
    csv_path, png = fig5(args.out)
    for ck in CLUSTERS:
        print(ck, " ".join(f"{mk}@8={speedup(mk, ck, 8):.2f}x @128={speedup(mk, ck, 128):.2f}x" for mk in MODELS))
    print(f"wrote {csv_path} and {png}")


if __name__ == "__main__":
    main()
