"""Intra-op threads that fit a run's gradients, when ``trainer.num_threads`` is unset (issue 38 item 4).

torch's default is one intra-op thread per core, whatever the work: a 4-sample gradient of a small network is
split over every core, and the threads spend more time meeting than computing (issue 38: on the H100 machine's
16-core CPU, torch's 16 threads made 4-sample CIFAR CNN gradients slower than 2 cores do). :func:`pick` gives a
gradient of ``F`` floating-point operations (one unit of the look-ahead: μ samples' forward and backward;
hardsync's λμ on one snapshot) one thread per :data:`FLOPS_PER_THREAD` of it, at least one and at most torch's
default::

    threads = min(default, max(1, F // FLOPS_PER_THREAD))

``F`` is counted, not timed (:func:`gradient_flops`: :class:`torch.utils.flop_counter.FlopCounterMode` over one
sample's forward and backward on the ``meta`` device, × the unit's samples), so the count is a function of the
config and of the machine's cores only: the same config on the same machine always trains with the same
threads, and so to the same ``weights_sha256`` (a weight's last bits depend on the thread count). The pick and
why are in the run's provenance (``summary.json``'s ``provenance.threads``/``threads_from``, MLflow tags
``psbench.threads``/``psbench.threads_from``). A configured ``trainer.num_threads`` is used as it is, as before;
``engine=dist`` keeps torch's default (its learners name theirs, ``engine.learner_threads``), and
``ParameterServerStrategy.simulated`` in a user's own Trainer leaves that process's threads alone.

The measurement behind it (``python benchmarks/bench_threads.py``; ``docs/performance.md``, "Threads"): one training
step of the built-in networks at μ = 4 / 32 / 128 on a shared 2-core Intel Xeon VM, 2026-11-28, load average 9 from
other work, 1 thread's time over 2 threads' (medians of 5 interleaved rounds) — CIFAR CNN (69 MFLOP per sample):
0.08 / 0.05 / 0.27; LeNet (13 MFLOP per sample): 0.11 / 0.09 / 0.19; MLP on MNIST (0.4 MFLOP): 0.01 / 0.02 / 0.02; on
8×8 digits (0.04 MFLOP): 0.12 / 0.02 / 0.12. Loaded, a second thread loses at every size: the rule's one-thread
picks are never slower than torch's default there (whole runs: 10.3× for the digits MLP, 7.6× for LeNet at μ = 4),
and its two-thread picks are the default. Quiet (the same CIFAR CNN, 2-core AMD EPYC VM, 2026-11-24) a second thread
gave 1.06–1.4× at μ = 4 (276 MFLOP) and 1.7× at 128 samples, so a 276 MFLOP gradient keeps two threads: at most
138 MFLOP per thread; on a 16-core CPU torch's 16 threads made the same 4-sample gradient slower than two cores do
(issue 38), so not 17 MFLOP per thread. 100 MFLOP lies between; LeNet at μ = 4 (53 MFLOP) and every MLP take one
thread. Where the third, eighth, sixteenth thread start to pay on a quiet many-core machine is what
``bench_threads.py`` prints there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: FLOPs of one gradient per intra-op thread (the module docstring says which measurements bound it)
FLOPS_PER_THREAD = 100e6

_DEFAULT: list[int] = []  # torch's intra-op threads in this process before psbench first set them


def default_threads() -> int:
    """torch's intra-op thread count in this process as psbench first found it (one per core, or
    ``OMP_NUM_THREADS``): the most :func:`pick` gives, whatever psbench set since."""
    if not _DEFAULT:
        _DEFAULT.append(torch.get_num_threads())
    return _DEFAULT[0]


def pick(flops: float, default: int) -> int:
    """Threads for a gradient of ``flops`` floating-point operations, at most ``default``."""
    return max(1, min(int(default), int(flops // FLOPS_PER_THREAD)))


def gradient_flops(net: torch.nn.Module, input_shape: Sequence[int]) -> float | None:
    """FLOPs of one sample's forward and backward through ``net`` (its output summed), counted on the ``meta``
    device (nothing computed, nothing allocated); None for a network that cannot run there. In eval mode, as the
    one-batch check (:func:`psbench.models.loss.check_trains`): a user's training-mode side effects run only in
    training."""
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    was_training = net.training
    net.eval()
    try:
        params = {k: torch.empty_like(p, device="meta").requires_grad_() for k, p in net.named_parameters()}
        buffers = {k: torch.empty_like(b, device="meta") for k, b in net.named_buffers()}
        x = torch.empty((1, *input_shape), device="meta")
        with FlopCounterMode(display=False) as counter:
            out = functional_call(net, {**params, **buffers}, (x,))
            if params:
                torch.autograd.grad(out.float().sum(), list(params.values()), allow_unused=True)
    except Exception:  # a user's network that needs real tensors
        return None
    finally:
        net.train(was_training)
    return float(counter.get_total_flops())


@dataclass(frozen=True)
class Threads:
    """The intra-op threads a run trains with, and where the count comes from (``threads_from``)."""

    threads: int
    threads_from: str


def unit_samples(resolved: Mapping[str, Any]) -> int:
    """Samples of one look-ahead unit of the run: μ (one learner's mini-batch on its own snapshot), λμ for
    hardsync (every learner's on the same snapshot: one forward/backward)."""
    mu = int(resolved["batch_size"])
    protocol = resolved.get("protocol") or {}
    return mu * int(resolved["learners"]) if protocol.get("name") == "hardsync" else mu


def run_threads(resolved: Mapping[str, Any], net: torch.nn.Module, input_shape: Sequence[int]) -> Threads:
    """``trainer.num_threads`` when it is set; else (``engine=sim``) :func:`pick` for the run's unit
    (:func:`unit_samples`) of ``net``; else (``engine=dist``, whose learners name their own threads) torch's."""
    configured = (resolved.get("trainer") or {}).get("num_threads")
    if configured:
        return Threads(int(configured), "trainer.num_threads")
    default = default_threads()
    if (resolved.get("engine") or {}).get("name", "sim") != "sim":
        return Threads(default, "torch's default (engine=dist)")
    per_sample = gradient_flops(net, input_shape)
    if per_sample is None:
        return Threads(default, "torch's default (the network's FLOPs cannot be counted on the meta device)")
    n = unit_samples(resolved)
    flops = per_sample * n
    return Threads(
        pick(flops, default),
        f"auto: {flops / 1e6:,.1f} MFLOP per gradient of {n} samples, 1 thread per "
        f"{FLOPS_PER_THREAD / 1e6:g} MFLOP, at most {default}",
    )


def apply(choice: Threads) -> None:
    """Set torch's intra-op threads to ``choice.threads`` (torch's default is read first: :func:`default_threads`)."""
    default_threads()
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
