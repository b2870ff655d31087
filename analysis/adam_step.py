"""How much TernGrad shortens Adam's steps (TernGrad §4.1, Table 1 trains CifarNet with Adam).

Adam moves each coordinate by m/√v. TernGrad's gradient is unbiased (Eq 7: E[g̃] = g) but noisier, so it leaves m
and raises v: each step is √(v_fp32 / v_TernGrad) as long. At fixed parameters this draws ``updates`` updates of
``learners`` × ``batch_size`` training samples, aggregates each update's gradients as fp32 (their mean) and as
TernGrad through the run's own codec (Eqs 1–2, clipping Eq 9, scaler sharing §3.1: what training pushes), and
measures v per coordinate as the mean squared update, over the same samples for both. It prints that ratio for the
median coordinate of each tensor and of all of them.

    python -m analysis.adam_step [--updates 64] [--weights weights.pt] [override ...]

The overrides compose a psbench config (default: ``experiment=terngrad/table1 dataset=cifar10_jpeg
compression=terngrad``; ``learners=16 batch_size=128`` is Table 1's other row). ``--weights`` loads a run's
``weights.pt`` (the parameters after training) instead of the seed's initialization.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from psbench.compression.pipeline import LearnerCompression

DEFAULTS = ("experiment=terngrad/table1", "dataset=cifar10_jpeg", "compression=terngrad")
ALL = "all coordinates"


def step_ratios(
    net: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    compression: LearnerCompression,
    learners: int,
    batch_size: int,
    updates: int,
    seed: int = 0,
) -> dict[str, float]:
    """√(v_fp32 / v_TernGrad) of the median coordinate, per parameter tensor and over all (:data:`ALL`); v is the
    mean over ``updates`` updates of the squared aggregated gradient (cross-entropy of ``net`` on ``x``, ``y``),
    each update ``learners`` × ``batch_size`` samples drawn with ``seed``."""
    draw = torch.Generator().manual_seed(seed)
    weights = torch.full((learners,), 1.0 / learners)
    names = [n for n, _ in net.named_parameters()]
    v_fp32 = {n: torch.zeros_like(p).reshape(-1) for n, p in net.named_parameters()}
    v_tern = {n: torch.zeros_like(v) for n, v in v_fp32.items()}
    for _ in range(updates):
        idx = torch.randint(0, len(y), (learners, batch_size), generator=draw)
        each: dict[str, list[torch.Tensor]] = {n: [] for n in names}
        for rows in idx:
            net.zero_grad()
            torch.nn.functional.cross_entropy(net(x[rows]), y[rows]).backward()
            for n, p in net.named_parameters():
                assert p.grad is not None
                each[n].append(p.grad.detach().reshape(-1).clone())
        stacked = {n: torch.stack(g) for n, g in each.items()}
        tern, _ = compression.aggregate(list(range(learners)), weights, stacked)
        for n, g in stacked.items():
            v_fp32[n] += g.mean(0) ** 2
            v_tern[n] += tern[n].reshape(-1) ** 2
    ratio = {n: torch.sqrt(v_fp32[n] / v_tern[n].clamp_min(torch.finfo(torch.float32).tiny)) for n in names}
    out = {n: float(r.median()) for n, r in ratio.items()}
    out[ALL] = float(torch.cat(list(ratio.values())).median())
    return out


def table(ratios: Mapping[str, float]) -> str:
    """One line per tensor: its name and the ratio."""
    width = max(map(len, ratios))
    return "\n".join(f"{n:<{width}}  {r:.3f}" for n, r in ratios.items())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.adam_step", description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=64, help="updates drawn (default 64)")
    ap.add_argument("--weights", type=Path, help="a run's weights.pt (default: the seed's initialization)")
    ap.add_argument("overrides", nargs="*", help="psbench overrides after the defaults " + " ".join(DEFAULTS))
    args = ap.parse_args(argv)
    from hydra import compose, initialize_config_dir

    import psbench.cli  # registers the resolvers conf/ uses
    from psbench.assemble import build_compression, build_data_and_model, compression_options

    root = os.environ.get("PSBENCH_ROOT") or os.getcwd()  # where psbench caches decoded data
    with tempfile.TemporaryDirectory() as scratch, initialize_config_dir(str(psbench.cli.CONF_DIR), version_base="1.3"):
        paths = [f"paths.root_dir={root}", f"paths.output_dir={scratch}"]
        cfg = compose(config_name="config", overrides=[*paths, *DEFAULTS, *args.overrides])
        if compression_options(cfg) is None:
            print("compression: none has nothing to compare with fp32; use compression=terngrad", file=sys.stderr)
            return 2
        dm, net = build_data_and_model(cfg)
    if args.weights:
        net.load_state_dict(torch.load(args.weights, weights_only=True))
    compression = build_compression(cfg, net)
    assert compression is not None
    learners, mu = int(cfg.learners), int(cfg.batch_size)
    ratios = step_ratios(net.train(), dm.x_train, dm.y_train, compression, learners, mu, args.updates, int(cfg.seed))
    at = args.weights or f"the seed-{cfg.seed} initialization"
    print(f"√(v_fp32 / v_TernGrad), median coordinate: N = {learners}, μ = {mu}, {args.updates} updates, at {at}")
    print(table(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
