"""A learner process (rank l + 1): pull weights, compute one gradient, push it, repeat until STOP.

Started by :mod:`psbench.engine.launcher` as ``python -m psbench.engine.learner SPEC RANK`` (or by
torchrun, with ``RANK`` from the environment — see the README). ``SPEC`` is the JSON written by
the PS: rendezvous address, model, training-data file, sample-stream seed, samples per gradient,
threads and artificial delays. Imports only torch and the model code (no Lightning), so λ
learners start fast. The learner never decides anything: the PS tells it which weights
(timestamp), which samples and which scale to use, or to stop.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from psbench.engine import messages as m
from psbench.engine.aggregate import learner_gradient
from psbench.engine.samples import SampleStream


def per_sample_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy, as :meth:`psbench.strategy.ClassifierModule.loss`."""
    return F.cross_entropy(logits, y, reduction="none")


def die_with_parent() -> None:
    """Linux: get SIGKILL when the process that started us exits (no orphan learners)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run(spec: dict, rank: int) -> int:
    """The learner loop; returns the number of gradients pushed."""
    from psbench.models import build_model

    torch.set_num_threads(int(spec["threads"]))
    l = rank - 1
    delay = float(spec.get("delay_s", {}).get(str(l), 0.0))
    data = torch.load(spec["data_file"], mmap=True)
    x, y = data["x"], data["y"]
    stream = SampleStream(len(x), int(spec["seed"]))
    spg = int(spec["samples_per_gradient"])
    torch.manual_seed(int(spec["seed"]))
    net = build_model(spec["model"], spec["input_shape"], spec["num_classes"], **spec["model_kwargs"])
    names = [k for k, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [p.numel() for _, p in net.named_parameters()]
    flat = torch.zeros(sum(sizes))
    params = dict(zip(names, (t.view(s) for t, s in zip(flat.split(sizes), shapes, strict=True)), strict=True))

    timeout = datetime.timedelta(seconds=float(spec["timeout_s"]))
    store = dist.TCPStore(spec["addr"], int(spec["port"]), int(spec["world_size"]), False,
                          timeout=datetime.timedelta(seconds=float(spec["connect_timeout_s"])))
    store.set(m.READY_KEY.format(rank=rank), str(os.getpid()))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=int(spec["world_size"]), timeout=timeout)
    dist.send(m.encode(m.HELLO), 0)
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
        grads, per = learner_gradient(net, per_sample_loss, params, x[idx], y[idx],
                                      torch.tensor(r.weight, dtype=torch.float32))
        if delay:
            time.sleep(delay)
        g = torch.cat([t.reshape(-1) for t in grads])
        t1 = time.time()
        dist.send(m.encode(m.PUSH, r.ts, pushed, r.sample_start, t0, t1, float(per.sum()), len(per), r.row), 0)
        dist.send(g, 0)
        pushed += 1
    dist.destroy_process_group()
    return pushed


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    with open(argv[0]) as fh:
        spec = json.load(fh)
    rank = int(argv[1]) if len(argv) > 1 else int(os.environ["RANK"]) + int(spec.get("rank_offset", 0))
    run(spec, rank)


if __name__ == "__main__":
    main()
