"""Where a psbench run's time goes on one device: the run alone profiled (set-up, imports and a warm-up run outside
the profile), the case of ``bench_gpu.py`` (the zhang/fig3 CIFAR CNN, λ = 30, μ = 4, ``cifar10_subset`` or data of its
shape).

    python benchmarks/profile_run.py [--device cpu|cuda] [--cases async,hardsync] [--updates 300] [--rows 25]

Per case: (1) cProfile of one epoch's run: ms per update, the functions of most own time and psbench's and
Lightning's of most cumulative time; (2) ``torch.profiler`` over ``--updates`` updates: on a GPU the share of the fit
in which the device was busy (the sum of its kernels' times: below 100 % the host is the bound) and the ops of most
device time; on the CPU the ops of most CPU time. Measured on an H200 on 2026-11-29 (docs/how-to/gpu.md).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpu import CASES, Bench


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--cases", default="async,hardsync", help=f"of {', '.join(CASES)}")
    ap.add_argument("--updates", type=int, default=300, help="of the torch.profiler run")
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"profile_run: --device cuda: no CUDA device here (torch {torch.__version__})")
    bench = Bench(args.device, 1.0, torch.get_num_threads(), Path(tempfile.mkdtemp()))
    from psbench.train import run

    for case in args.cases.split(","):
        bench.psbench(case, "trainer.max_updates=40")()  # every shape seen once
        setup, d = bench.setup(case)
        pr = cProfile.Profile()
        pr.enable()
        s = run(setup, d)
        pr.disable()
        fit = float(s.fit_time_s or 0.0)
        print(
            f"== {case} on {args.device}: {s.updates_done} updates, fit {fit:.2f} s, "
            f"{1e3 * fit / max(1, s.updates_done):.3f} ms per update (under cProfile)",
            flush=True,
        )
        st = pstats.Stats(pr)
        st.sort_stats("tottime").print_stats(args.rows)
        st.sort_stats("cumulative").print_stats(r"psbench|lightning", 2 * args.rows)
        setup, d = bench.setup(case, f"trainer.max_updates={args.updates}")
        acts = [torch.profiler.ProfilerActivity.CPU]
        if args.device == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=acts) as prof:
            t0 = time.perf_counter()
            s = run(setup, d)
            wall = time.perf_counter() - t0
        ka = prof.key_averages()
        fit = float(s.fit_time_s or 0.0)
        busy = sum(e.self_device_time_total for e in ka) / 1e6 if args.device == "cuda" else 0.0
        share = f", device busy {busy:.3f} s ({100 * busy / fit:.0f} % of the fit)" if args.device == "cuda" else ""
        print(f"== {case} under torch.profiler: {s.updates_done} updates, run {wall:.2f} s, fit {fit:.2f} s{share}")
        key = "self_device_time_total" if args.device == "cuda" else "self_cpu_time_total"
        print(ka.table(sort_by=key, row_limit=20, max_name_column_width=50), flush=True)


if __name__ == "__main__":
    main()
