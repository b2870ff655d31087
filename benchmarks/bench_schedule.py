"""Schedule generation rate (gradients/s) against a bare heapq loop over the same number of events.

    python benchmarks/bench_schedule.py [--gradients 300000] [--trace-updates K]

The baseline pushes and pops exactly as many ``(time, seq, kind, learner, payload)`` tuples as the
simulator processed, measured in the same process right before the simulator, so the ratio is
robust to the machine's load. Target (issue "Simulation core"): ratio ≥ 0.2. ``--trace-updates K``
records the trace of the first K updates (``timeline.png``) as runs do.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import time

from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.ps import Protocol, Simulator


def bare_loop(events: int, learners: int) -> float:
    """Seconds for a heap of ``learners`` live events to process ``events`` pops, each pushing one event."""
    rng = random.Random(0)
    draws = [rng.random() for _ in range(4096)]
    heap: list = []
    seq = itertools.count()
    for l in range(learners):
        heapq.heappush(heap, (draws[l % 4096], next(seq), 0, l, None))
    t0 = time.perf_counter()
    for i in range(events):
        t, _, kind, l, data = heapq.heappop(heap)
        heapq.heappush(heap, (t + draws[i & 4095], next(seq), kind, l, data))
    return time.perf_counter() - t0


def count_events(sim_args: tuple) -> int:
    calls = 0
    real = heapq.heappop

    def counting(h):
        nonlocal calls
        calls += 1
        return real(h)

    heapq.heappop = counting
    try:
        for _ in Simulator(*sim_args).run():
            pass
    finally:
        heapq.heappop = real
    return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradients", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trace-updates", type=int, default=0)
    args = ap.parse_args()
    cost = CostModel(
        compute=ComputeModel(1.46e-2, 3.09e-3),
        message_bytes=358_312,
        bandwidth_Bps=3e10,
        ps_service_s=5e-6,
        ps_apply_Bps=2e10,
    )
    print(f"{'case':<34}{'events':>10}{'grad/s':>12}{'bare ev/s':>12}{'sim ev/s':>12}{'ratio':>8}")
    for lam in (30, 1000):
        for proto in (Protocol("softsync", lam, n=1), Protocol("async", lam), Protocol("hardsync", lam)):
            sim_args = (proto, cost, Topology(), 4, args.gradients, 0)
            events = count_events(sim_args)
            best_sim, best_bare = float("inf"), float("inf")
            for _ in range(args.repeats):
                best_bare = min(best_bare, bare_loop(events, lam))
                t0 = time.perf_counter()
                for _ in Simulator(*sim_args, trace_updates=args.trace_updates).run():
                    pass
                best_sim = min(best_sim, time.perf_counter() - t0)
            print(
                f"{proto.label + f' λ={lam}':<34}{events:>10}{args.gradients / best_sim:>12,.0f}"
                f"{events / best_bare:>12,.0f}{events / best_sim:>12,.0f}{best_bare / best_sim:>8.2f}"
            )


if __name__ == "__main__":
    main()
