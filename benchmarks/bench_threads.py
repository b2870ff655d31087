"""Intra-op threads per gradient size: the measurement behind psbench's thread rule (:mod:`psbench.threads`), and
the rule against torch's default, in one run.

    python benchmarks/bench_threads.py [--rounds 7] [--mus 4,32,128] [--step-s 0.2] [--runs-only | --skip-runs]

Case: one training step (forward, backward, momentum SGD step) of each built-in network on its data's shape — the
zhang/fig3 CIFAR CNN (LRN, 3×32×32, channels_last as psbench computes conv nets on the CPU), LeNet on MNIST
(1×28×28), the MLP on MNIST and on 8×8 digits — at μ ∈ ``--mus`` samples, timed at 1, 2, 4, … threads up to
torch's default here. Each (network, μ) is timed in ``--rounds`` rounds, the thread counts in alternating order,
each for at least ``--step-s`` seconds of steps; the median of the rounds' ratios is printed:

* ``t1/tN``: the speed-up of N threads over one (N = torch's default);
* ``pick``: the threads :func:`psbench.threads.pick` gives that gradient (its FLOPs counted on the meta device);
* ``pick/default``: the rule's speed as a ratio of torch's default (1.00 where they agree: not timed twice); the
  rule's target: never below 1 by more than the rounds' spread.

Then whole psbench runs (:data:`RUNS`, ``trainer.max_updates`` each) with ``trainer.num_threads`` unset (the rule)
against ``trainer.num_threads`` = torch's default, in ``--rounds`` interleaved rounds: samples/s of each and the
median of the rounds' ratios (the rule's run over the default's).

A shared machine's load hurts two threads far more than one (a thread waits at every op's barrier for a peer that
is not running): the first line prints the load average, and the rounds show the spread.
"""

from __future__ import annotations

import argparse
import os
import time
from statistics import median

import torch

from psbench.models import build_model
from psbench.threads import default_threads, gradient_flops, pick

NETS = [
    ("cifar_cnn", (3, 32, 32), {"lrn": True, "init": "caffe", "multipliers": "caffe"}),
    ("lenet", (1, 28, 28), {}),
    ("mlp", (1, 28, 28), {}),
    ("mlp", (1, 8, 8), {}),
]


def stepper(name: str, shape: tuple[int, ...], kw: dict, mu: int):
    torch.manual_seed(0)
    net = build_model(name, shape, 10, **kw)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(mu, *shape)
    if name != "mlp":
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (mu,))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    return net, step


def seconds_per_step(step, threads: int, at_least: float) -> float:
    torch.set_num_threads(threads)
    step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < at_least:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


#: psbench runs timed with the rule against torch's default: (label, overrides)
RUNS = [
    ("mlp digits async μ=4", ["protocol=async", "learners=8", "batch_size=4", "trainer.max_updates=400"]),
    (
        "lenet mnist async μ=4",
        ["model=lenet", "dataset=mnist", "protocol=async", "learners=30", "batch_size=4", "trainer.max_updates=300"],
    ),
    (
        "zhang/fig3 async μ=4",
        [
            "experiment=zhang/fig3",
            "dataset=cifar10_subset",
            "optimizer.milestones=[]",
            "lr_policy=per_gradient",
            "protocol=async",
            "trainer.max_updates=200",
        ],
    ),
    (
        "zhang/fig3 hardsync",
        [
            "experiment=zhang/fig3",
            "dataset=cifar10_subset",
            "optimizer.milestones=[]",
            "lr_policy=per_gradient",
            "protocol=hardsync",
            "trainer.max_updates=20",
        ],
    ),
]


def psbench_runs(default: int, rounds: int) -> None:
    """samples/s of each of :data:`RUNS` with the rule and with torch's default threads, interleaved rounds."""
    import tempfile
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    import psbench.cli  # registers the resolvers conf/ uses
    from psbench.paths import default_data_dir
    from psbench.train import prepare, run

    data = os.environ.get("PSBENCH_DATA") or default_data_dir(".")
    root = Path(tempfile.mkdtemp(prefix="bench_threads_"))
    base = [
        "logger=none",
        "trainer.progress=none",
        "trainer.checkpoint_every=0",
        "trainer.save_weights=false",
        "trainer.timeline_updates=0",
        f"paths.root_dir={root}",
        f"paths.data_dir={data}",
        f"paths.output_dir={root / 'out'}",
    ]
    print(f"\n{'psbench run':<26}{'rule':>6}{'samples/s rule':>16}{f'{default} threads':>12}{'ratio':>8}  rounds")
    n = 0
    for label, overrides in RUNS:
        cfgs = {}
        for side, extra in (("rule", []), ("default", [f"trainer.num_threads={default}"])):
            with initialize_config_dir(config_dir=str(psbench.cli.CONF_DIR), version_base="1.3"):
                cfgs[side] = compose(config_name="config", overrides=[*base, *overrides, *extra])
        speed: dict[str, list[float]] = {"rule": [], "default": []}
        picked = 0
        for r in range(rounds + 1):  # the first round warms up, untimed
            for side in ("rule", "default") if r % 2 == 0 else ("default", "rule"):
                n += 1
                d = root / f"run{n}"
                d.mkdir()
                setup = prepare(cfgs[side])
                picked = setup.threads if side == "rule" else picked
                s = run(setup, d)
                if r:
                    speed[side].append(float(s.samples_per_s or 0.0))
        ratios = [a / b for a, b in zip(speed["rule"], speed["default"], strict=True)]
        print(
            f"{label:<26}{picked:>6}{median(speed['rule']):>16,.0f}{median(speed['default']):>12,.0f}"
            f"{median(ratios):>8.2f}  {[round(v, 2) for v in ratios]}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--mus", default="4,32,128")
    ap.add_argument("--step-s", type=float, default=0.2, help="seconds of steps per timing")
    ap.add_argument("--runs-only", action="store_true", help="only the psbench runs")
    ap.add_argument("--skip-runs", action="store_true", help="only the training steps")
    args = ap.parse_args()
    default = default_threads()
    counts = sorted({1, default, *(2**k for k in range(1, 8) if 2**k < default)})
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')} torch {torch.__version__}, default threads {default}, "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; median of "
        f"{args.rounds} rounds"
    )
    print(
        f"{'network':<18}{'μ':>5}{'MFLOP':>9}"
        + "".join(f"{f'ms {t}t':>9}" for t in counts)
        + f"{f't1/t{default}':>8}{'pick':>6}{'pick/default':>14}  rounds t1/t{default}"
    )
    for name, shape, kw in [] if args.runs_only else NETS:
        for mu in (int(m) for m in args.mus.split(",")):
            net, step = stepper(name, shape, kw, mu)
            flops = (gradient_flops(net, shape) or 0.0) * mu
            chosen = pick(flops, default)
            for t in counts:  # warm-up: every count's kernels and pool once
                seconds_per_step(step, t, 0.05)
            times: dict[int, list[float]] = {t: [] for t in counts}
            for r in range(args.rounds):
                for t in counts if r % 2 == 0 else counts[::-1]:
                    times[t].append(seconds_per_step(step, t, args.step_s))
            gain = [a / b for a, b in zip(times[1], times[default], strict=True)]
            vs = [d / p for d, p in zip(times[default], times[chosen], strict=True)]
            print(
                f"{name + 'x'.join(map(str, shape[1:])):<18}{mu:>5}{flops / 1e6:>9.1f}"
                + "".join(f"{1e3 * median(times[t]):>9.3f}" for t in counts)
                + f"{median(gain):>8.2f}{chosen:>6}{median(vs):>14.2f}  {[round(g, 2) for g in gain]}",
                flush=True,
            )
    if not args.skip_runs:
        psbench_runs(default, args.rounds)
    torch.set_num_threads(default)


if __name__ == "__main__":
    main()
