"""A picture of the schedule: the simulated cluster over its first K PS updates (``timeline.png``).

One row per learner and one for the PS (Rudra §3.2, Fig 1), time to the right: each learner's
compute / push / pull / wait intervals and the root's busy periods, exactly as the simulator's
:class:`~psbench.ps.trace.Trace` recorded them, with every PS update marked (a dotted line and its
index) and each computation labelled with the weight timestamp it read, so the staleness of a
gradient, σ = i − k (Rudra Eq 2), is the distance from its label k to the update i its push lands
in. Beside it the run's staleness histogram (:func:`psbench.ps.staleness.draw_staleness`).

Rendered with matplotlib's Agg backend, without PNG metadata: the same trace gives the same bytes.

    python -m psbench.ps.timeline --out DIR

draws the pictures of the protocols on a small laptop cluster (:func:`concept_pictures`):
hardsync waits at the barrier, n-softsync's PS applies every c = ⌊λ/n⌋ pushes, async never waits,
SSP waits at its bound, and the local-step protocols compute H mini-batches between pushes.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from psbench.ps.protocols import Protocol
from psbench.ps.trace import APPLY, COMPUTE, KINDS, PS, PULL, PUSH, WAIT, Trace

#: one colour per kind (a colour-blind-safe set: blue, orange, green, red, purple)
COLOURS = {COMPUTE: "#4c72b0", PUSH: "#dd8452", PULL: "#55a868", WAIT: "#c44e52", APPLY: "#8172b3"}
#: learners drawn (rows 1…); a larger cluster shows its first ones and says so
MAX_LEARNERS = 32
ROW_HEIGHT = 0.8  # of a row's unit height; a background push takes the lower LANE_HEIGHT of it
LANE_HEIGHT = 0.3


class Rect(NamedTuple):
    """A drawn rectangle: ``x``…``x + width`` in simulated seconds, ``y``…``y + height`` in rows (PS = row 0)."""

    x: float
    y: float
    width: float
    height: float
    kind: str
    label: int
    lane: int


#: the most gradients the default K traces (hardsync on λ = 1,000: 4 updates, not 12)
TRACE_GRADIENTS = 4096


def default_updates(protocol: Protocol) -> int:
    """K when ``trainer.timeline_updates`` is null: three pushes of every learner (3·⌈λ/c⌉ updates), 12 to 64,
    and at most :data:`TRACE_GRADIENTS` gradients (c·K) but 3 updates, so that tracing stays cheap."""
    c = protocol.gradients_per_update
    k = min(64, max(12, 3 * -(-protocol.learners // c)))
    return max(3, min(k, TRACE_GRADIENTS // c))


def timeline_title(protocol: Protocol, batch_size: int, hardware: str, topology: str) -> str:
    c = protocol.gradients_per_update
    per = f" (c = {c} gradients per update)" if c > 1 else ""
    return (
        f"{protocol.label}{per}   λ = {protocol.learners}   μ = {batch_size}   hardware = {hardware}   "
        f"topology = {topology}"
    )


def row_of(row: int) -> int:
    """The drawn row of a trace row: the PS on top (0), learner l below it (l + 1)."""
    return 0 if row == PS else row + 1


def rectangles(trace: Trace, max_learners: int = MAX_LEARNERS) -> list[Rect]:
    """The rectangles :func:`plot_timeline` draws: one per interval of the PS and of the first ``max_learners``
    learners, clipped at the window's end ``trace.t_end``."""
    out = []
    for iv in trace.intervals:
        if iv.row >= max_learners:
            continue
        r = row_of(iv.row)
        y, h = (r + ROW_HEIGHT / 2 - LANE_HEIGHT, LANE_HEIGHT) if iv.lane else (r - ROW_HEIGHT / 2, ROW_HEIGHT)
        out.append(Rect(iv.start, y, min(iv.end, trace.t_end) - iv.start, h, iv.kind, iv.label, iv.lane))
    return out


def _time_unit(t: float) -> tuple[float, str]:
    return (1e6, "µs") if t < 1e-3 else (1e3, "ms") if t < 1.0 else (1.0, "s")


def draw_timeline(ax, trace: Trace, max_learners: int = MAX_LEARNERS) -> list[Rect]:
    """Draw ``trace`` on ``ax`` (one :class:`~matplotlib.collections.PolyCollection` per kind, its label the
    kind); return the rectangles."""
    from matplotlib.collections import PolyCollection
    from matplotlib.ticker import FuncFormatter

    rects = rectangles(trace, max_learners)
    t_end = trace.t_end if trace.t_end > 0 else 1.0
    shown = min(trace.learners, max_learners)
    for lane in (0, 1):  # a background push over its learner's compute
        for kind in KINDS:
            verts = [
                ((r.x, r.y), (r.x + r.width, r.y), (r.x + r.width, r.y + r.height), (r.x, r.y + r.height))
                for r in rects
                if r.kind == kind and r.lane == lane
            ]
            if verts:
                ax.add_collection(
                    PolyCollection(
                        verts, facecolors=COLOURS[kind], edgecolors="none", linewidths=0, label=kind, zorder=2 + lane
                    )
                )
    h = trace.local_steps
    min_w = 0.025 * t_end  # label a computation with its weight timestamp where the label fits (in its 1st step)
    for r in rects:
        if r.kind == COMPUTE and r.width >= min_w:
            x = r.x + r.width / 2 if h == 1 else r.x + min(r.width, (trace.t_end - r.x) / h) / 2
            ax.text(x, r.y + r.height / 2, str(r.label), ha="center", va="center", fontsize=7, color="white", zorder=3)
    if h > 1:  # H local steps of equal length in one window (one compute draw, Simulator)
        xs, rows = [], []
        for iv in trace.intervals:
            if iv.kind == COMPUTE and iv.row < max_learners:
                for k in range(1, h):
                    x = iv.start + k * (iv.end - iv.start) / h
                    if x < trace.t_end:
                        xs.append(x)
                        rows.append(row_of(iv.row))
        ax.vlines(
            xs,
            [r - ROW_HEIGHT / 2 for r in rows],
            [r + ROW_HEIGHT / 2 for r in rows],
            colors="white",
            linewidth=0.8,
            zorder=3,
        )
    ax.vlines(
        trace.update_time, -0.5, shown + 0.5, colors=COLOURS[APPLY], alpha=0.6, linewidth=0.7, linestyles=":", zorder=1
    )
    last = -math.inf
    for i, t in enumerate(trace.update_time):  # the index of every update whose label does not overlap the last
        if t - last >= 0.018 * t_end:
            ax.text(t, -0.5, str(i), ha="center", va="bottom", fontsize=7, color=COLOURS[APPLY])
            last = t
    ax.set_ylim(shown + 0.6, -0.5)
    ax.set_yticks(range(shown + 1), ["PS", *(f"learner {l}" for l in range(shown))], fontsize=8)
    scale, unit = _time_unit(t_end)
    ax.set_xlim(0, t_end * 1.01)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * scale:g}"))
    more = f" (learners 0–{shown - 1} of {trace.learners})" if shown < trace.learners else ""
    ax.set_xlabel(f"simulated time ({unit}); PS updates 0–{len(trace.update_time) - 1} numbered above{more}")
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return rects


def _legend(fig, trace: Trace) -> None:
    from matplotlib.patches import Patch

    steps = f" of H = {trace.local_steps} steps" if trace.local_steps > 1 else ""
    words = {
        COMPUTE: f"compute{steps} (number: weight timestamp read)",
        PUSH: "push",
        PULL: "pull",
        WAIT: f"wait ({trace.wait})" if trace.wait else "wait",
        APPLY: "PS applies update i (dotted line, i above)",
    }
    kinds = {iv.kind for iv in trace.intervals} | {APPLY}
    handles = [Patch(color=COLOURS[k], label=words[k]) for k in KINDS if k in kinds]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)


def plot_timeline(
    trace: Trace, hist: Mapping[int, int], title: str, path: str | Path, max_learners: int = MAX_LEARNERS
) -> Path:
    """Write the timeline of ``trace`` with the staleness histogram ``hist`` (σ → count) beside it to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from psbench.ps.staleness import draw_staleness

    rows = min(trace.learners, max_learners) + 1
    height = min(11.0, max(3.4, 1.5 + 0.32 * rows))
    fig, (ax, side) = plt.subplots(1, 2, figsize=(12, height), gridspec_kw={"width_ratios": [3.4, 1]})
    draw_timeline(ax, trace, max_learners)
    draw_staleness(side, hist, "staleness, whole run")
    if hist:
        lo, hi = min(hist), max(hist)
        side.set_xticks(range(lo, hi + 1, max(1, math.ceil((hi - lo + 1) / 10))))
        side.set_xlim(lo - 0.6, hi + 0.6)
    side.set_box_aspect(0.85)  # as plot_staleness's, however many rows the timeline has
    fig.suptitle(title, fontsize=11)
    _legend(fig, trace)
    fig.tight_layout(rect=(0, 0.3 / height, 1, 1))  # the legend's band: 0.3 in
    path = Path(path)
    from psbench.files import write_atomic

    try:  # whole or not at all: a full disk leaves no half picture (psbench.files)
        write_atomic(
            path, lambda fh: fig.savefig(fh, dpi=100, metadata={"Software": None}, format=path.suffix[1:] or "png")
        )
    finally:
        plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------- the concept pictures
def _concepts(lam: int) -> list[tuple[str, Protocol, int | None]]:
    """(file stem, protocol, K or None for :func:`default_updates`) of :func:`concept_pictures` for λ learners."""
    return [
        ("hardsync", Protocol("hardsync", lam), 8),
        ("softsync", Protocol("softsync", lam, n=4), None),
        ("async", Protocol("async", lam), None),
        ("ssp", Protocol("ssp", lam, staleness_bound=1), None),
        ("local_steps", Protocol("downpour", lam, local_steps=4), None),
    ]


def concept_traces(
    learners: int = 8,
    batch_size: int = 32,
    message_bytes: int = 4 * 9_610,
    stragglers: float = 0.125,
    slowdown: float = 2.0,
    seed: int = 0,
) -> list[tuple[str, Trace, dict[int, int], str]]:
    """(file stem, trace, staleness histogram, title) of each picture of :func:`concept_pictures`."""
    from psbench.cluster import CostModel, Topology
    from psbench.cluster.cost import JitterStreams
    from psbench.ps.schedule import Schedule
    from psbench.ps.simulator import Simulator

    cost = CostModel.from_profile("laptop", message_bytes, straggler_fraction=stragglers, straggler_slowdown=slowdown)
    slow = sorted(JitterStreams(cost, learners, seed).stragglers)
    out = []
    for stem, protocol, k in _concepts(learners):
        sim = Simulator(
            protocol, cost, Topology(), batch_size, 400 * learners, seed, trace_updates=k or default_updates(protocol)
        )
        Schedule.collect(sim.run())
        title = timeline_title(protocol, batch_size, "laptop", "rudra_base")
        if protocol.local_steps > 1:
            title = title.replace(protocol.label, f"downpour | agn | aeasgd | dynsgd, H = {protocol.local_steps}")
        if slow:
            title += f"   (learner {', '.join(map(str, slow))}: {slowdown:g}× slower)"
        assert sim.trace is not None
        out.append((stem, sim.trace, sim.stats.staleness.as_dict(), title))
    return out


def concept_pictures(
    out: str | Path,
    learners: int = 8,
    batch_size: int = 32,
    message_bytes: int = 4 * 9_610,
    stragglers: float = 0.125,
    slowdown: float = 2.0,
    seed: int = 0,
) -> list[Path]:
    """The timelines of the Concepts page: hardsync, 4-softsync, async, SSP (s = 1) and a local-step protocol
    (H = 4: the schedule of downpour, agn, aeasgd and dynsgd alike: they differ only in what a commit holds and
    how the PS scales it, not in who pushes when) on λ = ``learners`` laptop learners, one of them ``slowdown``
    times slower, so that the barrier's and the bound's waits show; the default ``message_bytes`` is the
    default MLP's. Returns the PNG paths (``timeline_<protocol>.png``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [
        plot_timeline(trace, hist, title, out / f"timeline_{stem}.png")
        for stem, trace, hist, title in concept_traces(learners, batch_size, message_bytes, stragglers, slowdown, seed)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m psbench.ps.timeline", description=concept_pictures.__doc__)
    ap.add_argument("--out", required=True, help="directory for the PNGs")
    ap.add_argument("--learners", type=int, default=8, help="λ (default 8)")
    ap.add_argument("--batch-size", type=int, default=32, help="μ (default 32)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from psbench.errors import ConfigError
    from psbench.schema import check_writable_dir

    try:  # odd arguments are one line naming the argument, exit 2 (they used to end in a traceback)
        checks = (
            ("--learners", args.learners, 4, 64, "an integer in [4, 64] (the pictures include 4-softsync: n <= λ)"),
            ("--batch-size", args.batch_size, 1, 4096, "an integer in [1, 4096]"),
            ("--seed", args.seed, 0, 2**32 - 1, "an integer in [0, 2**32-1]"),
        )
        for key, value, lo, hi, allowed in checks:
            if not lo <= value <= hi:
                raise ConfigError(key, value, allowed)
        check_writable_dir("--out", args.out)
    except ConfigError as err:
        print(f"{ap.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    for p in concept_pictures(args.out, args.learners, args.batch_size, seed=args.seed):
        print(p)


if __name__ == "__main__":
    main()
