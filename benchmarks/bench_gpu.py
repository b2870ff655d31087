"""psbench's protocols against plain PyTorch loops on one device, in one run; on the CPU also the host
synchronisations and dispatched ops per PS update (issue 38: the figures that bound the GPU's speed).

    python benchmarks/bench_gpu.py [--device cpu|cuda] [--epochs 1] [--repeats 3] [--threads N]
                                   [--cases hardsync,30-softsync,async,ssp-s3] [--count-updates 300]
                                   [--no-count] [--batching auto|grouped|vmap|loop] [--fused-step]
                                   [--json FILE]

Case: the CIFAR CNN of the zhang/fig3 recipe (LRN, Caffe fillers and multipliers, momentum 0.9, weight decay
0.004; ``lr_policy=per_gradient``, no lr milestones) at λ = 30, μ = 4 on ``cifar10_subset`` when ``$PSBENCH_DATA``
(or ``shared/datasets`` beside the checkout) has it, else on synthetic CIFAR-shaped data of the same size (3×32×32,
5,085 train / 1,017 test): the first line says which. Each psbench case is a whole run as ``psbench`` runs it
(:func:`psbench.train.prepare` then :func:`psbench.train.run`, ``logger=none``, evaluation once, after the last
update): its samples/s are the run's own (``samples_trained / fit_time_s``, the Trainer's fit, whose time holds
that evaluation); the data, the model and the schedule are built before the clock starts, once per timed run. The
plain loops evaluate the test set once at their end too, inside their timed window (until 2026-11-29 they did not:
on an H200 that evaluation was 17 % of hardsync's fit).

1. samples/s of a plain PyTorch loop at batch μλ = 120 (**the anchor**: the large-batch run hardsync is
   equivalent to), of the same loop at batch 4 (one optimizer step per 4-sample batch: what one update of an
   asynchronous schedule costs without any executor), and of psbench's hardsync, 30-softsync, async and SSP(s=3),
   each as a ratio of the anchor. Every timer runs once untimed (every shape seen, cuDNN/oneDNN warmed), then in
   ``--repeats`` rounds back to back; a ratio is taken within its round and the median of the rounds' is printed,
   so that a shared machine's drifting speed cancels out;
2. (unless ``--no-count``) per PS update: dispatched aten ops (a kernel launch each on a GPU) and host
   synchronisations (``.item()``, ``float(t)``, ``bool(t)``, …; :mod:`psbench.dispatch_count`), in a run of
   ``--count-updates`` updates per case, split into the look-ahead's gradient computation, the rest of the
   strategy's update, and Lightning's loop around them; the synchronisations per look-ahead flush; the lines that
   synchronise; the strategy's blocking uploads (host-to-device copies: on a GPU each waits for the stream). The
   GPU executor of issue 38 item 2 targets ≤ 1 synchronisation per flush. A CPU computes convolution nets'
   look-ahead gradients grouped where a GPU vmaps them: ``--batching vmap`` counts the GPU's path on the CPU, and
   ``--fused-step`` its optimizer step (fused on a GPU, ``foreach`` on the CPU).

Threads: psbench's runs get ``trainer.num_threads`` = ``--threads`` (default: torch's default here), the plain loops
the same, so that psbench's own thread rule (:mod:`psbench.threads`) does not change the comparison. glibc's
allocator thresholds are pinned first, as in ``bench_training.py``. ``--device cuda`` on a machine without CUDA
is refused in one line.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import torch

warnings.filterwarnings("ignore")
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
LAM, MU = 30, 4
CASES = {
    "hardsync": ["protocol=hardsync"],
    "30-softsync": ["protocol=softsync", "protocol.n=30"],
    "async": ["protocol=async"],
    "ssp-s3": ["protocol=ssp", "protocol.staleness_bound=3"],
}
SUBSET = Path("cifar10-subset") / "cifar10-prefix-subset.npz"
#: synthetic data of cifar10_subset's shape and size, where the subset is not at hand
SYNTHETIC = ["dataset=synthetic", "dataset.shape=[3,32,32]", "dataset.num_train=5085", "dataset.num_test=1017"]


def data_dir() -> str:
    """Where psbench itself looks: ``$PSBENCH_DATA``, else ``shared/datasets`` beside the checkout."""
    from psbench.paths import default_data_dir

    return os.environ.get("PSBENCH_DATA") or default_data_dir(".")


def dataset_overrides() -> tuple[list[str], str]:
    """(overrides, what they are): cifar10_subset where it exists, else synthetic data of its size."""
    d = data_dir()
    if (Path(d) / SUBSET).is_file():
        return ["dataset=cifar10_subset"], f"cifar10_subset ({d})"
    return SYNTHETIC, f"synthetic CIFAR-shaped data (3x32x32, 5,085 train / 1,017 test): no {SUBSET} in {d}"


def compose(overrides: list[str], root: Path):
    """The validated config of ``psbench experiment=zhang/fig3 <overrides>`` with run files under ``root``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    import psbench.cli  # registers the resolvers conf/ uses
    from psbench.validate import validate

    base = [
        "experiment=zhang/fig3",
        "optimizer.milestones=[]",
        "lr_policy=per_gradient",
        "logger=none",
        "trainer.progress=none",
        "trainer.checkpoint_every=0",
        "trainer.save_weights=false",
        "trainer.timeline_updates=0",
        f"paths.root_dir={root}",
        f"paths.output_dir={root / 'run'}",
        f"paths.data_dir={data_dir()}",
    ]
    with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=base + overrides)
    validate(cfg)
    return cfg


class Bench:
    """The runs of one device: its config overrides, its data and the timers."""

    def __init__(self, device: str, epochs: float, threads: int, root: Path, batching: str = "auto") -> None:
        self.device, self.threads, self.root = device, threads, root
        self.data, self.data_note = dataset_overrides()
        self.common = [
            *self.data,
            f"epochs={epochs}",
            f"trainer.eval_every_epochs={max(1, int(epochs + 0.999))}",  # evaluate once, after the last update
            f"trainer.accelerator={device}",
            f"trainer.num_threads={threads}",
            f"trainer.batching={batching}",
        ]
        self.runs = 0
        self.configs: dict[tuple[str, ...], Any] = {}

    def setup(self, case: str, *extra: str):
        """A fresh :class:`~psbench.assemble.RunSetup` of ``case`` (data, seeded network, schedule) and a run dir."""
        from psbench.train import prepare

        self.runs += 1
        d = self.root / f"run{self.runs}"
        d.mkdir(parents=True)
        key = (*self.common, *CASES[case], *extra)
        if key not in self.configs:
            self.configs[key] = compose(list(key), self.root)
        return prepare(self.configs[key]), d

    def psbench(self, case: str, *extra: str) -> Callable[[], tuple[int, float]]:
        """A timer of one whole psbench run of ``case``: (samples trained, fit seconds)."""

        def timed() -> tuple[int, float]:
            from psbench.train import run

            setup, d = self.setup(case, *extra)
            s = run(setup, d)
            if s.status != "finished":
                raise SystemExit(f"bench_gpu: {case} ended {s.status} ({s.failure_reason or 'diverged'})")
            return int(s.samples_trained or 0), float(s.fit_time_s or 0.0)

        return timed

    def plain(self, batch: int, samples: int | None = None) -> Callable[[], tuple[int, float]]:
        """A timer of the plain loop a user would write: the recipe's network, momentum SGD, batches of ``batch``
        over the epochs' samples (``samples``: that many instead), the data on the device, then one evaluation of
        the test set there (psbench's fit, which the psbench rows time, ends with one too)."""
        from psbench.models.evaluate import evaluate
        from psbench.strategy import SampleStream

        setup, _ = self.setup("hardsync")  # the recipe's data and seeded network (the schedule is not used)
        dev = torch.device(self.device)
        net = setup.net.to(dev)
        x, y = setup.data.x_train.to(dev), setup.data.y_train.to(dev)
        xt, yt = setup.data.x_test.to(dev), setup.data.y_test.to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9, weight_decay=0.004)
        stream = SampleStream(len(x), 0)
        total = samples or setup.schedule.num_gradients * MU
        offset = 0

        def timed() -> tuple[int, float]:
            nonlocal offset
            sync()
            t0 = time.perf_counter()
            n = 0
            for p in range(offset, offset + total - batch + 1, batch):
                idx = stream.indices(p, batch).to(dev)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
                opt.step()
                n += batch
            evaluate(net, xt, yt)
            sync()
            offset += total
            return n, time.perf_counter() - t0

        def sync() -> None:
            if dev.type == "cuda":
                torch.cuda.synchronize()

        return timed


def speeds(bench: Bench, cases: list[str], repeats: int) -> dict[str, Any]:
    """samples/s of every timer per round and their ratios to the batch-120 loop's of the same round."""
    timers: dict[str, Callable[[], tuple[int, float]]] = {
        "plain loop, batch 120 (anchor)": bench.plain(MU * LAM),
        "plain loop, batch 4": bench.plain(MU),
    }
    timers.update({f"psbench {c}": bench.psbench(c) for c in cases})
    bench.plain(MU * LAM, 20 * MU * LAM)()  # every shape seen once: a short run of each
    bench.plain(MU, 200 * MU)()
    for c in cases:
        bench.psbench(c, "trainer.max_updates=40")()
    rates: dict[str, list[float]] = {k: [] for k in timers}
    for r in range(repeats):
        for name, t in timers.items():
            n, s = t()
            rates[name].append(n / s)
        print(f"  round {r + 1}/{repeats}: " + ", ".join(f"{v[-1]:,.0f}" for v in rates.values()), flush=True)
    anchor = rates["plain loop, batch 120 (anchor)"]
    return {
        name: {
            "samples_per_s": median(v),
            "ratio": median(a / b for a, b in zip(v, anchor, strict=True)),
            "rounds": [round(a / b, 3) for a, b in zip(v, anchor, strict=True)],
        }
        for name, v in rates.items()
    }


def counts(bench: Bench, cases: list[str], updates: int) -> dict[str, Any]:
    """Ops and host synchronisations per PS update of each case (:func:`psbench.dispatch_count.count_run`)."""
    from psbench.dispatch_count import count_run

    out = {}
    for case in cases:
        setup, d = bench.setup(case, f"trainer.max_updates={updates}")
        out[case] = count_run(setup, d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--epochs", type=float, default=1.0, help="epochs of each timed run (the data's 5,085 samples)")
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds (medians are reported)")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default here)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--count-updates", type=int, default=300, help="PS updates of each counted run")
    ap.add_argument("--no-count", action="store_true", help="skip the per-update op and synchronisation counts")
    ap.add_argument("--no-speed", action="store_true", help="skip the timed table (counts only)")
    ap.add_argument(
        "--batching",
        choices=("auto", "grouped", "vmap", "loop"),
        default="auto",
        help="trainer.batching of every run (auto: vmap on a GPU, grouped on a CPU with convolutions; "
        "vmap on the CPU counts what a GPU's runs dispatch)",
    )
    ap.add_argument(
        "--fused-step",
        action="store_true",
        help="step SGD fused on the CPU too, as on a GPU (psbench.optimizer.build.FUSED_DEVICES): counts what a "
        "GPU's update dispatches (the CPU's floats differ in the last bit)",
    )
    ap.add_argument("--json", type=Path, help="also write the results to this file")
    args = ap.parse_args()
    if args.fused_step:
        from psbench.optimizer import build

        build.FUSED_DEVICES = (*build.FUSED_DEVICES, "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"bench_gpu: --device cuda: no CUDA device here (torch {torch.__version__})")
    from bench_training import pin_malloc  # this folder is on sys.path when the file is run
    from psbench.dispatch_count import UPDATE

    pinned = pin_malloc()
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    cases = args.cases.split(",")
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"bench_gpu: --cases: {c!r} is not one of {', '.join(CASES)}")
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {os.cpu_count()} cores"
    result: dict[str, Any] = {
        "device": args.device,
        "device_name": name,
        "torch": torch.__version__,
        "threads": threads,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "fused_step": args.fused_step or args.device == "cuda",
    }

    def save() -> None:  # after each part: a run cut short keeps what it measured
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1))

    with tempfile.TemporaryDirectory(prefix="bench_gpu_") as tmp:
        bench = Bench(args.device, args.epochs, threads, Path(tmp), args.batching)
        result["data"] = bench.data_note
        save()
        print(
            f"device={args.device} ({name}) torch {torch.__version__} threads={threads} "
            f"malloc={'pinned' if pinned else 'default'}\ndata: {bench.data_note}\n"
            f"zhang/fig3 CIFAR CNN, λ={LAM} μ={MU}, {args.epochs:g} epoch(s) per run; median of {args.repeats} "
            "rounds, each round every row back to back; ratio: to the batch-120 loop of the same round",
            flush=True,
        )
        if not args.no_speed:
            table = speeds(bench, cases, args.repeats)
            result["speed"] = table
            save()
            print(f"\n{'':<34}{'samples/s':>11}{'ratio':>8}  rounds")
            for row, v in table.items():
                print(f"{row:<34}{v['samples_per_s']:>11,.0f}{v['ratio']:>8.2f}  {v['rounds']}", flush=True)
        if not args.no_count:
            found = counts(bench, cases, args.count_updates)
            result["counts"] = {c: rc.as_dict() for c, rc in found.items()}
            save()
            print(
                f"\nper PS update, {args.count_updates} updates per case on {args.device} (ops: aten ops dispatched, "
                "a kernel launch each on a GPU; syncs: host synchronisations; reads: tolist/numpy of a CPU tensor; "
                "uploads: the strategy's blocking host-to-device copies, a sync each on a GPU; see "
                "psbench.dispatch_count)"
            )
            print(
                f"{'case':<14}{'⟨σ⟩':>6}{'flushes':>8}{'ops':>8}{'grads':>8}{'update':>8}{'loop':>7}"
                f"{'syncs':>7}{'grads':>7}{'update':>8}{'loop':>7}{'/flush':>8}{'reads':>7}{'uploads':>9}"
            )
            for c, rc in found.items():
                ops, syn, up = rc.per_update("ops"), rc.per_update("syncs"), rc.per_update("uploads")
                # on a GPU a real upload is a sync (counted there); the column is a CPU run's would-be uploads
                uploads = f"{up['gradients'] + up['update']:.2f}" if args.device == "cpu" else "in syncs"
                print(
                    f"{c:<14}{rc.staleness_mean or 0:>6.1f}{rc.flushes:>8}{ops['all']:>8.1f}{ops['gradients']:>8.1f}"
                    f"{ops['update']:>8.1f}{ops['loop']:>7.1f}{syn['all']:>7.2f}{syn['gradients']:>7.2f}"
                    f"{syn['update']:>8.2f}{syn['loop']:>7.2f}{rc.syncs_per_flush:>8.2f}"
                    f"{rc.per_update('host_reads')['all']:>7.2f}{uploads:>9}"
                )
            last = list(found.values())[-1]
            print(f"\n{last.protocol}: the update's ops (per PS update, most first):")
            print("  " + ", ".join(f"{name} {v:.1f}" for name, v in last.top_ops(UPDATE, 12)))
            print(f"{last.protocol}: where the run synchronises (its {last.updates} updates, set-up and evaluation):")
            for site, n in last.counts.sync_sites.most_common(8):
                print(f"  {n:>6}  {site}")
            print(f"{last.protocol}: host reads of CPU tensors (a sync only where the tensor lives on the GPU):")
            for site, n in last.counts.read_sites.most_common(4):
                print(f"  {n:>6}  {site}")
            print(f"{last.protocol}: blocking uploads (a sync each on a GPU; Lightning's batches go non-blocking):")
            for site, n in last.counts.upload_sites.most_common(4):
                print(f"  {n:>6}  {site}")


if __name__ == "__main__":
    main()
