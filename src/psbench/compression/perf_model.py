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
scaler per tensor, :class:`~psbench.compression.terngrad.TernGrad`) except the last classification
layer, which stays float32 as in the paper's ImageNet runs (§4.2, change (3); ``float_last_layer``).

Inputs. The paper states the clusters, models and batch sizes, not its profiled T(1,1,K) nor its
bandwidths, so the rest comes from public specifications and measurements, none fitted to §5:

* bandwidths: 1 GbE = 125 MB/s, 100 Gb InfiniBand = 12.5 GB/s (line rates); PCIe 3.0 ×16 through a
  switch ≈ 10 GB/s (GPU↔GPU and GPU↔CPU); P100 NVLink 40 GB/s (two 20 GB/s links); PCIe 3.0 host
  link of the P100 nodes 12 GB/s; latency 50 µs (Ethernet) and 2 µs (InfiniBand);
* T(1,1,K) = K × the measured forward + backward time per image at batch 16 of jcjohnson/cnn-benchmarks
  (Torch, cuDNN 5.x): GTX 1080 AlexNet 20.74 ms, Inception-V1 56.16 ms, VGG-16 182.79 ms per 16 images;
  Pascal Titan X 14.56, 39.14, 128.62 ms (the P100 stand-in: same GP10x architecture, scaled by fp32
  peak 10.16/10.6 TFLOPS). VGG-A is not measured there: VGG-16's time × the ratio of their multiply-adds,
  computed from the layer tables (Simonyan & Zisserman Table 1).

These step times are pure GPU compute; the paper's profiled T(1,1,K) (distributed TensorFlow, one CPU
feeding the GPU) is at least that, so the model's speedups are upper bounds of the paper's:
:func:`implied_step_time` inverts Eq 17 to show the T(1,1,K) a stated speedup needs.

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
    gpu: str  # key of Model.ms_per_image


@dataclass(frozen=True)
class Model:
    name: str
    params: int
    tensors: int  # weight + bias tensors: one TernGrad scaler each
    last_layer: int  # parameters of the classification layer (float32 with TernGrad, §4.2)
    batch_per_gpu: int  # K
    ms_per_image: dict  # gpu -> measured forward + backward milliseconds per image


CLUSTERS: dict[str, Cluster] = {
    "gtx1080_1gbe": Cluster("128 nodes × 4 GTX 1080, 1 GbE, PCI switch", 128, 4, 10e9, 10e9, 125e6, 50e-6, "gtx1080"),
    "p100_infiniband": Cluster(
        "128 nodes × 4 P100, 100 Gb InfiniBand, NVLink", 128, 4, 40e9, 12e9, 12.5e9, 2e-6, "p100"
    ),
}


def vgg_macs(convs: tuple[tuple[int, ...], ...]) -> int:
    """Forward multiply-adds of a VGG net on 224×224: ``convs`` = output channels of the 3×3 convolutions
    of each of the five stages (Simonyan & Zisserman Table 1), then FC 4096-4096-1000."""
    macs, c_in, side = 0, 3, 224
    for stage in convs:
        for c_out in stage:
            macs += side * side * 9 * c_in * c_out
            c_in = c_out
        side //= 2
    return macs + 512 * 7 * 7 * 4096 + 4096 * 4096 + 4096 * 1000


VGG_A = ((64,), (128,), (256, 256), (512, 512), (512, 512))
VGG_D = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))
#: jcjohnson/cnn-benchmarks, batch 16, forward + backward ms (see the module docstring)
_BATCH16_MS = {
    "gtx1080": {"alexnet": 20.74, "inception_v1": 56.16, "vgg16": 182.79},
    "p100": {k: v * 10.16 / 10.6 for k, v in {"alexnet": 14.56, "inception_v1": 39.14, "vgg16": 128.62}.items()},
}


def _per_image(net: str, scale: float = 1.0) -> dict[str, float]:
    return {gpu: t[net] / 16 * scale for gpu, t in _BATCH16_MS.items()}


#: AlexNet 61.1 M parameters (fc8 4096×1000); GoogLeNet without auxiliary classifiers (§4.2) 6.8 M
#: (classifier 1024×1000); VGG-A 132.9 M (Simonyan & Zisserman Table 2; fc 4096×1000). Fig 5 batch per GPU.
MODELS: dict[str, Model] = {
    "alexnet": Model("AlexNet", 61_100_840, 16, 4_097_000, 128, _per_image("alexnet")),
    "googlenet": Model("GoogLeNet", 6_797_700, 116, 1_025_000, 64, _per_image("inception_v1")),
    "vgg_a": Model("VGG-A", 132_863_336, 22, 4_097_000, 32, _per_image("vgg16", vgg_macs(VGG_A) / vgg_macs(VGG_D))),
}


def step_time(model: Model, cluster: Cluster) -> float:
    """T(1, 1, K, |g|) as Appendix B profiles it: one GPU's forward + backward on K images (measured
    per-image time × K) plus the copy of the fp32 gradient to the CPU, |g|/C_cwd."""
    return model.ms_per_image[cluster.gpu] * 1e-3 * model.batch_per_gpu + gradient_bytes(model) / cluster.cpu_gpu_Bps


def gradient_bytes(model: Model, terngrad: bool = False, float_last_layer: bool = True) -> float:
    """|g| on the wire: fp32, or TernGrad 2-bit codes + one float32 scaler per tensor (the last layer fp32)."""
    if not terngrad:
        return 4.0 * model.params
    floats = model.last_layer if float_last_layer else 0
    tensors = model.tensors - (2 if float_last_layer else 0)
    per_tensor = (model.params - floats) / tensors
    return tensors * TernGrad(wire="2bit").expected_bytes(math.ceil(per_tensor)) + 4.0 * floats


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


def throughput(
    model: Model,
    cluster: Cluster,
    gpus: int,
    terngrad: bool = False,
    scaling: str = "weak",
    float_last_layer: bool = True,
    t1: float | None = None,
) -> float:
    """Images per second: Eq (18) (weak, Fig 5) or Eq (16) (strong, K = the per-GPU batch × N).

    ``t1`` replaces the measured T(1,1,K) (e.g. a profiled one)."""
    i, j = layout(gpus, cluster)
    t1 = step_time(model, cluster) if t1 is None else t1
    g, g0 = gradient_bytes(model, terngrad, float_last_layer), gradient_bytes(model)
    if scaling == "weak":
        return gpus * model.batch_per_gpu / t_weak(cluster, i, j, t1, g, g0)
    k = model.batch_per_gpu * gpus
    t1k = t1 * gpus  # the profiled single-GPU time for the whole mini-batch of K
    return k / t_strong(cluster, i, j, t1k, g, g0)


def speedup(
    model: str, cluster: str, gpus: int, scaling: str = "weak", float_last_layer: bool = True, t1: float | None = None
) -> float:
    """TernGrad throughput / fp32 throughput."""
    m, c = MODELS[model], CLUSTERS[cluster]
    return throughput(m, c, gpus, True, scaling, float_last_layer, t1) / throughput(
        m, c, gpus, False, scaling, float_last_layer, t1
    )


def implied_step_time(model: str, cluster: str, gpus: int, target: float, float_last_layer: bool = True) -> float:
    """The T(1,1,K) at which Eq 17 gives the weak-scaling speedup ``target`` (> 1): solves
    (T + c32) / (T + c3) = target for the communication terms c32 (fp32) and c3 (TernGrad)."""
    m, c = MODELS[model], CLUSTERS[cluster]
    i, j = layout(gpus, c)
    g0 = gradient_bytes(m)
    comm = [t_weak(c, i, j, 0.0, g, g0) for g in (g0, gradient_bytes(m, True, float_last_layer))]
    return (comm[0] - target * comm[1]) / (target - 1)


GPUS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def curves(gpus: tuple[int, ...] = GPUS) -> dict[tuple[str, str, int], tuple[float, float]]:
    """(cluster, model, N GPUs) -> (fp32 images/s, TernGrad images/s), weak scaling (Eq 18)."""
    return {
        (ck, mk, n): (throughput(m, c, n, False), throughput(m, c, n, True))
        for ck, c in CLUSTERS.items()
        for mk, m in MODELS.items()
        for n in gpus
    }


def draw_fig5(axes, curves: dict[tuple[str, str, int], tuple[float, float]]) -> None:
    """Fig 5's panels on ``axes`` (one per cluster): images/s vs GPUs, fp32 dashed, TernGrad solid."""
    for ax, (ck, c) in zip(axes, CLUSTERS.items(), strict=True):
        for i, (mk, m) in enumerate(MODELS.items()):
            ns = sorted(n for (c2, m2, n) in curves if c2 == ck and m2 == mk)
            for j, style in ((0, "--"), (1, "-")):
                ax.plot(
                    ns,
                    [curves[(ck, mk, n)][j] for n in ns],
                    style,
                    color=f"C{i}",
                    marker="o",
                    ms=3,
                    label=f"{m.name} {'TernGrad' if j else 'fp32'}",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs")
        ax.set_ylabel("images / s")
        ax.set_title(c.name, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].figure.suptitle("TernGrad Fig 5: performance model (Appendix B, Eq 17–18), weak scaling")


def fig5(out: Path, gpus: tuple[int, ...] = GPUS) -> tuple[Path, Path]:
    """Write Fig 5's curves (weak scaling, with and without TernGrad) as CSV and PNG."""
    out.mkdir(parents=True, exist_ok=True)
    cv = curves(gpus)
    csv_path = out / "fig5.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["cluster", "model", "gpus", "terngrad", "images_per_s", "speedup"])
        for (ck, mk, n), (fp32, tern) in cv.items():
            w.writerow([ck, mk, n, 0, f"{fp32:.1f}", f"{1.0:.3f}"])
            w.writerow([ck, mk, n, 1, f"{tern:.1f}", f"{tern / fp32:.3f}"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CLUSTERS), figsize=(11, 4))
    draw_fig5(axes, cv)
    fig.tight_layout()
    png = out / "fig5.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return csv_path, png


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m psbench.compression.perf_model", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("fig5"))
    args = ap.parse_args(argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        ap.error(f"--out='{args.out}' is invalid: allowed a directory that can be written ({err.strerror})")
    csv_path, png = fig5(args.out)
    for ck in CLUSTERS:
        print(ck, " ".join(f"{mk}@8={speedup(mk, ck, 8):.2f}x @512={speedup(mk, ck, 512):.2f}x" for mk in MODELS))
    print(
        f"§5 AlexNet, 8 GPUs, 1 GbE: model {speedup('alexnet', 'gtx1080_1gbe', 8):.2f}x, paper 3.04x "
        f"(needs T(1,1,128) = {implied_step_time('alexnet', 'gtx1080_1gbe', 8, 3.04):.3f} s; measured "
        f"{step_time(MODELS['alexnet'], CLUSTERS['gtx1080_1gbe']):.3f} s)"
    )
    print(
        f"§5 VGG-A, 128 nodes (512 GPUs), InfiniBand: model {speedup('vgg_a', 'p100_infiniband', 512):.2f}x, "
        f"paper 'double' (needs T(1,1,32) = {implied_step_time('vgg_a', 'p100_infiniband', 512, 2.0):.3f} s; "
        f"measured {step_time(MODELS['vgg_a'], CLUSTERS['p100_infiniband']):.3f} s)"
    )
    print(f"wrote {csv_path} and {png}")


if __name__ == "__main__":
    main()
