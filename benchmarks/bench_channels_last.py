"""channels_last against the plain (NCHW) layout on the CPU: the measurement behind psbench's layout rule
(:func:`psbench.strategy.module.prefers_channels_last`), on the built-in conv nets and torchvision-shaped ones.

    python benchmarks/bench_channels_last.py [--rounds 5] [--mus 8,32] [--step-s 0.3] [--threads 1]

Case: one gradient (forward and backward, as a learner's) of each network at μ samples, the samples and the conv
weights in channels_last (as the look-ahead's grouped path feeds them) or in NCHW, timed in ``--rounds`` rounds in
alternating order, each for at least ``--step-s`` seconds; the median of the rounds' ratios is printed:

* ``cl/plain``: channels_last's time over NCHW's (below 1: channels_last is faster);
* ``rule``: the layout the rule picks for that network;
* ``rule/plain``: the picked layout's time over NCHW's — the rule's target: never above 1 by more than the rounds'
  spread (``spread``: the max − min of the rounds' cl/plain ratios).

Networks: psbench's CIFAR CNN (with and without LRN), LeNet, CifarNet, AGN's net; torchvision's ResNet-18 as
torchvision writes it (BatchNorm, vendored in tests/thirdparty/tv_resnet.py: no CPU torchvision loads here) and the
same network with ``norm_layer`` = GroupNorm(32) (issue 41's trap: ``batching=auto`` ran it ~1.8× slower than
``batching=loop``); examples/resnet20 (GroupNorm).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from statistics import median

import torch
from torch import nn

from psbench.models import build_model
from psbench.strategy.module import prefers_channels_last

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "examples" / "resnet20")]


def networks() -> list[tuple[str, tuple[int, ...], nn.Module]]:
    from resnet20 import ResNet20  # examples/resnet20

    from thirdparty.tv_resnet import resnet18

    torch.manual_seed(0)
    return [
        ("cifar_cnn (LRN)", (3, 32, 32), build_model("cifar_cnn", (3, 32, 32), 10, lrn=True)),
        ("cifar_cnn", (3, 32, 32), build_model("cifar_cnn", (3, 32, 32), 10)),
        ("lenet", (1, 28, 28), build_model("lenet", (1, 28, 28), 10)),
        ("cifarnet", (3, 32, 32), build_model("cifarnet", (3, 32, 32), 10)),
        ("agn_net", (1, 28, 28), build_model("agn_net", (1, 28, 28), 10)),
        ("resnet18 (BatchNorm)", (3, 32, 32), resnet18(num_classes=10)),
        ("resnet18 (GroupNorm)", (3, 32, 32), resnet18(num_classes=10, norm_layer=lambda c: nn.GroupNorm(32, c))),
        ("resnet20 (GroupNorm)", (3, 32, 32), ResNet20((3, 32, 32), 10)),
    ]


def gradient(net: nn.Module, x: torch.Tensor, y: torch.Tensor):
    params = [p for p in net.parameters() if p.requires_grad]

    def step() -> None:
        torch.autograd.grad(nn.functional.cross_entropy(net(x), y), params)

    return step


def timed(step, seconds: float) -> float:
    step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mus", default="8,32")
    ap.add_argument("--step-s", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"load average {os.getloadavg()[0]:.1f}, {a.threads} thread(s), torch {torch.__version__}")
    head = ("network".ljust(24), "μ".rjust(4), "plain ms".rjust(9), "cl ms".rjust(8), "cl/plain".rjust(9))
    print(*head, "spread".rjust(7), "rule".rjust(6), "rule/plain".rjust(11))
    worst = 0.0
    for name, shape, net in networks():
        net.train()
        plain_net = net
        cl_net = _channels_last_copy(net)
        for mu in (int(m) for m in a.mus.split(",")):
            x = torch.randn(mu, *shape)
            y = torch.randint(0, 10, (mu,))
            steps = {
                "plain": gradient(plain_net, x, y),
                "cl": gradient(cl_net, x.contiguous(memory_format=torch.channels_last), y),
            }
            times: dict[str, list[float]] = {"plain": [], "cl": []}
            for r in range(a.rounds):
                for k in ("plain", "cl") if r % 2 == 0 else ("cl", "plain"):
                    times[k].append(timed(steps[k], a.step_s))
            ratios = [c / p for c, p in zip(times["cl"], times["plain"], strict=True)]
            ratio = median(ratios)
            rule = "cl" if prefers_channels_last(net, x) else "plain"
            picked = ratio if rule == "cl" else 1.0
            worst = max(worst, picked - (max(ratios) - min(ratios)))
            print(
                f"{name:24} {mu:>4} {median(times['plain']) * 1e3:9.2f} {median(times['cl']) * 1e3:8.2f} "
                f"{ratio:9.2f} {max(ratios) - min(ratios):7.2f} {rule:>6} {picked:11.2f}"
            )
    print(f"worst rule/plain less its spread: {worst:.2f} (target: ≤ 1)")


def _channels_last_copy(net: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(net).to(memory_format=torch.channels_last)


if __name__ == "__main__":
    main()
