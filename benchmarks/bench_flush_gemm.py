"""A look-ahead flush's k momentum-SGD updates as one GEMM per parameter, against k optimizer steps (issue 38 item 2).

    python benchmarks/bench_flush_gemm.py [--device cpu|cuda] [--k 8,22,64] [--repeats 5] [--threads 1]

Why: an asynchronous update's gradient reads a snapshot taken before the flush that computed it (the look-ahead's
definition), so the k updates between two flushes are a *linear* recurrence of known gradients. For torch's SGD
(``d = g + wd·θ; v = m·v + d; θ = θ − lr_t·v``, per (lr_mult, decay_mult) group) the state ``s = (θ, v)`` follows
``s_t = M_t s_{t−1} + B_t g_t`` with 2×2 scalar matrices ``M_t = [[1 − lr_t·wd, −lr_t·m], [wd, m]]`` and
``B_t = (−lr_t, 1)``, the same for every element: every ``θ_t`` of the flush (the snapshots later flushes read) is
``a_t·θ_0 + b_t·v_0 + Σ_{j≤t} C_tj·g_j``: per parameter one GEMM of a (k + 1) × (k + 2) coefficient matrix (its
last row gives the momentum buffer after the flush) with the stacked ``[θ_0; v_0; g_1 … g_k]``, the coefficients
computed on the host in float64 (the GEMM in float32; on a GPU with TF32 off, torch's default for matmuls). On a GPU
that is a few kernels per flush where applying the updates one by one launches ~20–40 per update
(``bench_gpu.py``'s counts): the host-bound cost that kept async at 0.04 of the batch-120 loop on the H200.

Case: the zhang/fig3 CIFAR CNN's parameters and Caffe multipliers, momentum 0.9, weight decay 0.004, per-update lr
``0.001·U(0.5, 1.5)`` (Eq 6's staleness scales vary per update), gradients ``N(0, 0.1²)`` as the flush's rows
(``k × |θ|`` per parameter, as the vmapped look-ahead returns them). Printed per k, in one run: µs and dispatched
aten ops per update of (1) k steps of ``torch.optim.SGD`` (``foreach``; ``fused`` on CUDA), each followed by the
snapshot copy the look-ahead keeps (psbench's update launches more: its divergence terms), and (2) the GEMM form,
whose rows are the snapshots; their ratio (median of ``--repeats`` rounds, both back to back in each round); and
each one's largest |θ_t − θ_t(float64 sequence)| over the flush, beside the largest |θ_t − θ_0| (the size of what
the updates moved). The GEMM does ~k/2 times the sequence's arithmetic (a full k×k product): on a CPU, where the
sequence is not launch-bound, it is slower.

Not an executor: psbench's updates are still applied one by one (:mod:`psbench.strategy.ps_strategy`). This
measures what the closed form would save and whether its floats agree, before building it.
"""

from __future__ import annotations

import argparse
import time
from statistics import median

import numpy as np
import torch

from psbench.dispatch_count import DispatchCounter
from psbench.models import build_model

M, WD, LR = 0.9, 0.004, 0.001


def groups(device: torch.device) -> list[tuple[float, float, list[torch.Tensor]]]:
    """(lr_mult, decay_mult, parameters) of the zhang/fig3 CIFAR CNN (Caffe fillers and multipliers)."""
    net = build_model("cifar_cnn", (3, 32, 32), 10, lrn=True, init="caffe", multipliers="caffe")
    mult = getattr(net, "param_mult", None) or {}
    out: dict[tuple[float, float], list[torch.Tensor]] = {}
    for n, p in net.named_parameters():
        lm, dm = mult.get(n, (1.0, 1.0))
        out.setdefault((float(lm), float(dm)), []).append(p.detach().to(device))
    return [(lm, dm, ps) for (lm, dm), ps in out.items()]


def coefficients(lr: np.ndarray, wd: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 (ab, C, v): θ_t = ab[t, 0]·θ_0 + ab[t, 1]·v_0 + Σ_j C[t, j]·g_j for each update t of the flush, and
    the momentum buffer after it, v_k = v[0]·θ_0 + v[1]·v_0 + Σ_j v[2 + j]·g_j."""
    k = len(lr)
    coef, state, ab = np.zeros((k, k, 2)), np.eye(2), np.zeros((k, 2))
    for t in range(k):
        mt = np.array([[1 - lr[t] * wd, -lr[t] * M], [wd, M]])
        if t:
            coef[t, :t] = coef[t - 1, :t] @ mt.T
        coef[t, t] = (-lr[t], 1.0)
        state = mt @ state
        ab[t] = state[0]
    return ab, coef[:, :, 0], np.concatenate([state[1], coef[-1, :, 1]])


def measure(k: int, gs: list, dev: torch.device, rng: np.random.Generator, repeats: int) -> str:
    """One table row: a flush of ``k`` updates, both ways (see the module docstring)."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    lr = LR * rng.uniform(0.5, 1.5, k)
    theta0 = [[p.clone() for p in ps] for _, _, ps in gs]
    v0 = [[torch.randn_like(p) * 0.01 for p in ps] for _, _, ps in gs]
    rows = [[torch.randn(k, *p.shape, device=dev) * 0.1 for p in ps] for _, _, ps in gs]

    def sequence(dtype=torch.float32):
        """The k optimizer steps, each with its snapshot copy, ready to run (set up outside the timer)."""
        params = [[p.clone().to(dtype).requires_grad_() for p in ps] for ps in theta0]
        opt = torch.optim.SGD(
            [
                {"params": ps, "lr": LR * lm, "weight_decay": WD * dm}
                for (lm, dm, _), ps in zip(gs, params, strict=True)
            ],
            lr=LR,
            momentum=M,
            **({"fused": True} if dev.type == "cuda" and dtype == torch.float32 else {}),
        )
        for ps, vs in zip(params, v0, strict=True):  # the momentum buffers the flush starts from
            for p, v in zip(ps, vs, strict=True):
                opt.state[p]["momentum_buffer"] = v.clone().to(dtype)
        ring = [[[torch.empty_like(p) for p in ps] for ps in params] for _ in range(k)]
        grads = [[[r[t].to(dtype) for r in rs] for rs in rows] for t in range(k)]

        def run():
            for t in range(k):
                for (lm, _, _), group, ps, gt in zip(gs, opt.param_groups, params, grads[t], strict=True):
                    group["lr"] = lr[t] * lm
                    for p, g in zip(ps, gt, strict=True):
                        p.grad = g
                opt.step()
                for slot, ps in zip(ring[t], params, strict=True):
                    torch._foreach_copy_(slot, [p.detach() for p in ps])
            return ring

        return run

    def gemm(th: list[list[torch.Tensor]], mom: list[list[torch.Tensor]]):
        """The flush's k updates in closed form: per group one coefficient matrix, uploaded once; per parameter one
        GEMM whose first k rows are the snapshots θ_1…θ_k and whose last row is the momentum buffer after them; then
        θ_k and v_k written back into ``th`` and ``mom``."""
        ring = []  # per group, per parameter: (k + 1) × numel, θ_1…θ_k then v_k
        for (lm, dm, _), th0, vs, rs in zip(gs, th, mom, rows, strict=True):
            ab, c, v = coefficients(lr * lm, WD * dm)
            w = np.zeros((k + 1, k + 2), dtype=np.float32)
            w[:k, :2], w[:k, 2:], w[k] = ab, c, v
            wt = torch.from_numpy(w)
            wt = wt.pin_memory().to(dev, non_blocking=True) if dev.type == "cuda" else wt
            out = [
                wt @ torch.cat((p.reshape(1, -1), u.reshape(1, -1), r.reshape(k, -1)))
                for p, u, r in zip(th0, vs, rs, strict=True)
            ]
            torch._foreach_copy_(list(th0), [o[k - 1].view_as(p) for o, p in zip(out, th0, strict=True)])
            torch._foreach_copy_(list(vs), [o[k].view_as(u) for o, u in zip(out, vs, strict=True)])
            ring.append(out)
        return ring

    def timed(fn) -> float:
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) / k * 1e6

    def state() -> tuple[list[list[torch.Tensor]], list[list[torch.Tensor]]]:
        return [[p.clone() for p in ps] for ps in theta0], [[u.clone() for u in us] for us in v0]

    truth = sequence(torch.float64)()
    seq_ring, gemm_ring = sequence()(), gemm(*state())
    moved = err_seq = err_gemm = 0.0
    for t in range(k):
        for g in range(len(gs)):
            for j, p0 in enumerate(theta0[g]):
                tr = truth[t][g][j].double()
                moved = max(moved, (tr - p0.double()).abs().max().item())
                err_seq = max(err_seq, (seq_ring[t][g][j].double() - tr).abs().max().item())
                err_gemm = max(err_gemm, (gemm_ring[g][j][t].reshape(p0.shape).double() - tr).abs().max().item())
    start = state()
    steps, flush, ops = sequence(), (lambda: gemm(*start)), []
    for fn in (steps, flush):
        with DispatchCounter() as c:
            fn()
        ops.append(c.counts.total("ops") / k)
    timed(steps), timed(flush)  # warm
    rounds = [(timed(steps), timed(flush)) for _ in range(repeats)]
    s, g_ = median(r[0] for r in rounds), median(r[1] for r in rounds)
    ratio = median(r[0] / r[1] for r in rounds)
    return (
        f"{k:>3}  {s:>13,.0f}  {g_:>7,.0f}  {ratio:>5.1f}×  {ops[0]:>14.1f}  {ops[1]:>5.1f}  "
        f"{err_seq:>11.2e}  {err_gemm:>8.2e}  {moved:>8.2e}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--k", default="8,22,64", help="updates per flush (async at λ = 30 averages ~22 here)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_flush_gemm: --device cuda: no CUDA device here")
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    gs = groups(dev)
    n_params = sum(p.numel() for _, _, ps in gs for p in ps)
    print(
        f"device={args.device} torch {torch.__version__} threads={torch.get_num_threads()}; CIFAR CNN, "
        f"{n_params:,} weights in {len(gs)} (lr_mult, decay_mult) groups; momentum {M}, weight decay {WD}"
    )
    print(
        f"{'k':>3}  {'µs/update seq':>13}  {'GEMM':>7}  {'ratio':>6}  {'ops/update seq':>14}  {'GEMM':>5}  "
        f"{'max err seq':>11}  {'GEMM':>8}  {'moved':>8}"
    )
    for k in (int(x) for x in args.k.split(",")):
        print(measure(k, gs, dev, rng, args.repeats), flush=True)


if __name__ == "__main__":
    main()
