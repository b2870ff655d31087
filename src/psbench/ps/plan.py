"""One plan of a simulated run, for both doors: the psbench command (:func:`psbench.assemble.build_run`) and
``ParameterServerStrategy.simulated`` at ``setup`` (:mod:`psbench.strategy.simulated`) call these and nothing else.

* :func:`gradient_count` — G, the gradients (or local-step commits) of the run: the fewest its limits allow
  (epochs or ``max_epochs``, ``trainer.max_updates`` or ``max_steps``), at least one update, at most what a
  schedule can hold in this machine's memory;
* :func:`codec_cost` — the codec's exact push and pull payloads in the cost model (they set the transfer times:
  codec sizes are data-independent, so the schedule still does not depend on gradient values);
* :func:`simulate` — the discrete-event simulation (Rudra §3, Zhang §2.2), its progress lines, a signal safe
  point every 256 updates, and the trace of the first updates (``timeline.png``); the schedule's metadata
  (:func:`schedule_meta`) is part of its hash;
* :func:`plot_timeline` and :func:`summary` — the picture of the trace and the :class:`~psbench.summary.RunSummary`
  fields that the schedule alone says (staleness, updates, samples, simulated time and bytes).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from psbench import lifecycle
from psbench.cluster import CostModel, Topology
from psbench.errors import require
from psbench.ps.protocols import Protocol
from psbench.ps.schedule import Schedule, Update, max_gradients
from psbench.ps.simulator import Simulator
from psbench.summary import RunSummary

#: a simulation shows progress once it has run this long (seconds) ...
PROGRESS_AFTER_S = 2.0
#: ... then a line every this many seconds (``rich`` on a terminal: every half second), looked at every
#: this many gradients
PROGRESS_EVERY_S = 5.0
PROGRESS_GRADIENTS = 1024


def gradient_count(
    protocol: Protocol, num_train: int, samples_per_gradient: int, limits: Mapping[str, tuple[Any, float]]
) -> int:
    """G = ⌊the fewest gradients any limit allows⌋ (``limits``: key → (its value, the gradients it allows), e.g.
    ``{"epochs": (2, 2·N/(μ·H))}``); a :class:`~psbench.errors.ConfigError` naming that key where G is less than
    one update's c or more than a schedule can hold in this machine's memory
    (:func:`~psbench.ps.schedule.max_gradients`)."""
    key = min(limits, key=lambda k: limits[k][1])
    value, wanted = limits[key]
    spg, c, most = samples_per_gradient, protocol.gradients_per_update, max_gradients()
    require(
        wanted <= most,
        key,
        value,
        f"a run of at most {most * spg / num_train:.4g} epochs here: its schedule would hold {wanted:.3g} gradients "
        f"of μ·H = {spg} samples (N = {num_train}), and at most {most:,} fit in this machine's memory",
    )
    g = int(wanted)
    require(g >= c, key, value, f"a run of at least one PS update (c = {c} gradients of μ·H = {spg} samples)")
    return g


def codec_cost(cost: CostModel, codecs, protocol: Protocol) -> CostModel:
    """``cost`` with the codec's exact payloads (``codecs``: :class:`~psbench.compression.pipeline.LearnerCompression`,
    or None for fp32 gradients: ``cost`` as it is)."""
    if codecs is None:
        return cost
    return replace(
        cost,
        push_bytes=codecs.push_bytes(),
        pull_bytes=codecs.pull_bytes(protocol.gradients_per_update),
        pull_delta=codecs.localize,
    )


def schedule_meta(protocol: Protocol, batch_size: int, topology: Topology, seed: int) -> dict[str, Any]:
    """The schedule's metadata (in its hash): protocol, λ, μ, topology, seed."""
    return {
        "protocol": protocol.label,
        "learners": protocol.learners,
        "batch_size": batch_size,
        "topology": topology.name,
        "seed": seed,
    }


@dataclass(frozen=True)
class SimulatedRun:
    """A simulated schedule, the simulator's statistics (:meth:`~psbench.ps.simulator.SimStats.as_dict`) and its
    trace of the first updates (None: none traced)."""

    schedule: Schedule
    stats: Mapping[str, Any]
    trace: Any  # psbench.ps.trace.Trace | None


def simulate(
    protocol: Protocol,
    cost: CostModel,
    topology: Topology,
    batch_size: int,
    gradients: int,
    seed: int,
    *,
    progress: str = "auto",
    timeline_updates: int | None = None,
) -> SimulatedRun:
    """Simulate the schedule of G = ``gradients`` (rounded down to a multiple of c), tracing the first
    ``timeline_updates`` updates (None: :func:`~psbench.ps.timeline.default_updates`; 0: none); progress lines on
    stderr (:func:`with_progress`; ``progress`` as ``trainer.progress``) and a signal safe point every 256 updates."""
    from psbench.ps.timeline import default_updates

    k = default_updates(protocol) if timeline_updates is None else timeline_updates
    sim = Simulator(protocol, cost, topology, batch_size, gradients, seed, trace_updates=k)
    meta = schedule_meta(protocol, batch_size, topology, seed)
    ended: list[float] = []  # when a long simulation ended: collecting its schedule's rows takes a while too
    schedule = Schedule.collect(with_progress(sim.run(), sim.total_gradients, progress, ended), meta=meta)
    stats = sim.stats.as_dict()
    if ended:  # the simulation said it was long (never with progress none): say what the rest took
        print(
            f"psbench: collected the schedule and its statistics in {time.perf_counter() - ended[0]:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return SimulatedRun(schedule, stats, sim.trace)


def with_progress(
    updates: Iterator[Update], total: int, mode: str, ended: list[float] | None = None
) -> Iterator[Update]:
    """``updates``, with a safe point for signals every 256 (:func:`psbench.lifecycle.checked`) and, once the
    simulation has run :data:`PROGRESS_AFTER_S`, a progress line every few seconds on stderr (``mode`` none: none);
    a simulation that ran that long appends its end time to ``ended``."""
    t0 = last = time.perf_counter()
    done = 0
    for u in lifecycle.checked(updates):
        done += len(u.contributions)
        yield u
        if mode != "none" and done % PROGRESS_GRADIENTS < len(u.contributions):
            now = time.perf_counter()
            every = 0.5 if mode == "rich" and sys.stderr.isatty() else PROGRESS_EVERY_S
            if now - t0 >= PROGRESS_AFTER_S and now - last >= every:
                last = now
                eta = (now - t0) * (total - done) / max(1, done)
                print(
                    f"psbench: simulating the schedule: {done:,} of {total:,} gradients "
                    f"({100 * done / total:.0f} %), {now - t0:.0f} s, ~{eta:.0f} s left",
                    file=sys.stderr,
                    flush=True,
                )
    if mode != "none" and time.perf_counter() - t0 >= PROGRESS_AFTER_S:
        print(
            f"psbench: simulated the schedule: {done:,} gradients in {time.perf_counter() - t0:.0f} s; collecting it",
            file=sys.stderr,
            flush=True,
        )
        if ended is not None:
            ended.append(time.perf_counter())


def plot_timeline(
    run: SimulatedRun, protocol: Protocol, batch_size: int, hardware: str, topology: Topology, path: str | Path
) -> str | None:
    """``timeline.png`` of the traced updates beside the run's staleness histogram
    (:func:`psbench.ps.timeline.plot_timeline`), titled with the protocol, λ, μ, hardware and topology; None when
    nothing was traced."""
    if run.trace is None:
        return None
    from psbench.ps.timeline import plot_timeline as plot
    from psbench.ps.timeline import timeline_title

    title = timeline_title(protocol, batch_size, hardware, topology.name)
    return str(plot(run.trace, run.stats["staleness_hist"], title, path))


def summary(run: SimulatedRun, samples_per_gradient: int, num_train: int, compression: str, **fields) -> RunSummary:
    """The :class:`~psbench.summary.RunSummary` of a simulated run: its protocol (the schedule's label), the
    simulator's counts (staleness, updates, simulated time, bytes), the samples of its schedule, its hash;
    ``compression`` the codec's name (``none``); ``fields``: what the run did besides."""
    samples = run.schedule.num_gradients * samples_per_gradient
    return RunSummary(
        engine="sim",
        protocol=str(run.schedule.meta["protocol"]),
        compression=compression,
        **run.stats,
        samples=samples,
        epochs_done=samples / num_train,
        schedule_sha256=run.schedule.sha256(),
        **fields,
    )
