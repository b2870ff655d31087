"""A learner process (rank l + 1): pull weights, compute one gradient, push it, repeat until STOP.

With a local-step protocol (``downpour``, ``agn``, ``aeasgd``, ``dynsgd``; spec key ``window``) a
"gradient" is one window: H local optimizer steps on the learner's own model from the pulled
weights (:func:`psbench.ps.local_window.local_window`, the simulator's code with k = 1), and the
push carries the commit (Σ_h d_h, or the elastic −ρ(θ_l − θ̃)); the PS scales and applies it.

Started by :mod:`psbench.distributed.launcher` as ``python -m psbench.distributed.learner SPEC RANK`` (or by
torchrun, with ``RANK`` from the environment — see the README). ``SPEC`` is the JSON written by the PS
(:class:`~psbench.distributed.spec.LearnerSpec`, read back there before any learner starts): rendezvous address, the
model's config node (built as the run built it, :func:`psbench.models.net.build_net`, a user's ``_target_`` imported
from the PS's ``sys.path``) and its loss, training-data file, sample-stream seed, samples per gradient, threads and
artificial delays. Imports only torch and the model code (no Lightning), so λ learners start fast. The learner never
decides anything: the PS tells it which weights (timestamp), which samples and which scale to use, or to stop.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from psbench.compression.wire import GradientWire
from psbench.distributed import messages as m
from psbench.distributed.spec import LearnerSpec, Window
from psbench.ps.aggregate import learner_gradient
from psbench.ps.local_window import LearnerOptimizer, elastic_commit, local_window
from psbench.ps.samples import SampleStream


def per_sample_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy, as :meth:`psbench.strategy.ClassifierModule.loss` (the default ``model.loss``)."""
    return F.cross_entropy(logits, y, reduction="none")


def die_with_parent() -> None:
    """Linux: get SIGKILL when the process that started us exits (no orphan learners)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LocalLearner:
    """The learner's own model θ_l, optimizer buffers and step count across windows (k = 1 stacks)."""

    def __init__(self, net: torch.nn.Module, window: Window, loss=per_sample_loss) -> None:
        self.net, self.H, self.mu, self.loss = net, window.local_steps, window.batch_size, loss
        self.elastic, self.rho = window.elastic, float(window.rho or 0.0)
        self.opt = LearnerOptimizer(dict(window.optimizer))
        self.theta: dict[str, torch.Tensor] = {}
        self.state: dict[str, dict[str, torch.Tensor]] = {}
        self.steps = torch.zeros(1, dtype=torch.int64)

    def commit(
        self, center: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, lr: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(flat commit of one window from the pulled weights ``center``, its per-sample losses)."""
        pulled = {k: v.detach().unsqueeze(0) for k, v in center.items()}  # views of the receive buffer
        if not self.theta:  # the learner's model starts at the center it first pulls
            self.theta = {k: v.clone() for k, v in pulled.items()}
            self.state = self.opt.init_state(self.theta)
        if self.elastic:
            theta, commit = elastic_commit(self.theta, pulled, self.rho, lr)
        else:
            theta, commit = pulled, {}
        xs = x.view(self.H, 1, self.mu, *x.shape[1:])
        ys = y.view(self.H, 1, self.mu, *y.shape[1:])
        theta, acc, seen, _ = local_window(
            self.net, self.loss, self.opt, theta, self.state, self.steps, xs, ys, lr, accumulate=not self.elastic
        )
        self.theta = theta
        self.steps += self.H
        out = acc if not self.elastic else commit
        per = seen / (self.H * self.mu)  # mean loss of the window: the PS logs loss_sum / samples
        return torch.cat([v.reshape(-1) for v in out.values()]), per.expand(self.H * self.mu)


def run(spec: LearnerSpec, rank: int) -> int:
    """The learner loop; returns the number of gradients pushed."""
    from psbench.models.loss import build_loss
    from psbench.models.net import build_net

    torch.set_num_threads(spec.threads)
    sys.path += [p for p in spec.python_path if p not in sys.path]  # after the installed packages
    l = rank - 1
    delay = float(spec.delay_s.get(str(l), 0.0))
    data = torch.load(spec.data_file, mmap=True)
    x, y = data["x"], data["y"]
    stream = SampleStream(len(x), spec.seed)
    spg = spec.samples_per_gradient
    torch.manual_seed(spec.seed)
    net = build_net(spec.model, spec.input_shape, spec.output_size)
    loss = build_loss(spec.model.get("loss"), spec.task)
    names = [k for k, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [p.numel() for _, p in net.named_parameters()]
    flat = torch.zeros(sum(sizes))
    params = dict(zip(names, (t.view(s) for t, s in zip(flat.split(sizes), shapes, strict=True)), strict=True))

    timeout = datetime.timedelta(seconds=spec.timeout_s)
    try:
        store = dist.TCPStore(
            spec.addr, spec.port, spec.world_size, False, timeout=datetime.timedelta(seconds=spec.connect_timeout_s)
        )
    except RuntimeError:  # one line, not the c10d traceback
        raise SystemExit(
            f"psbench learner rank {rank}: error: no PS at {spec.addr}:{spec.port} within "
            f"{spec.connect_timeout_s:g} s (engine.connect_timeout_s)"
        ) from None
    store.set(m.READY_KEY.format(rank=rank), str(os.getpid()))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=spec.world_size, timeout=timeout)
    dist.send(m.encode(m.HELLO), 0)
    local = LocalLearner(net, spec.window, loss) if spec.window is not None else None
    wire = (
        GradientWire(dict(spec.compression), dict(zip(names, shapes, strict=True)), spec.seed)
        if spec.compression
        else None
    )
    header = m.empty_header()
    pushed = 0
    while True:
        dist.recv(header, 0)
        r = m.decode_reply(header)
        if r.kind == m.STOP:
            break
        if r.has_weights:
            dist.recv(flat, 0)
        t0 = time.time()
        idx = stream.indices(r.sample_start, spg)
        if local is None:
            grads, per = learner_gradient(
                net, loss, params, x[idx], y[idx], torch.tensor(r.weight, dtype=torch.float32)
            )
            g = (
                wire.encode(l, dict(zip(names, grads, strict=True)))
                if wire is not None
                else torch.cat([t.reshape(-1) for t in grads])
            )
        else:
            g, per = local.commit(params, x[idx], y[idx], r.lr)
            if r.weight != 1.0:
                g = g * r.weight
        if delay:
            time.sleep(delay)
        t1 = time.time()
        dist.send(m.encode(m.PUSH, r.ts, pushed, r.sample_start, t0, t1, float(per.sum()), len(per), r.row), 0)
        dist.send(g, 0)
        pushed += 1
    dist.destroy_process_group()
    return pushed


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    if os.environ.get("PSBENCH_SPAWNED") == "1":  # Ctrl-C or a closed terminal reaches the group: the PS stops us
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    spec = LearnerSpec.load(argv[0])
    rank = int(argv[1]) if len(argv) > 1 else int(os.environ["RANK"]) + spec.rank_offset
    run(spec, rank)


if __name__ == "__main__":
    main()
