"""Staleness accounting with vector clocks (Rudra §3.1, Eq 2).

The staleness of a gradient computed on weights with timestamp ``ts_k`` and applied by
the update that advances the PS from ``ts_{i}`` to ``ts_{i+1}`` is σ = i − k. The
timestamps of the gradients of one update form its vector clock; its mean staleness is
⟨σ⟩ = i − mean(k) (Eq 2, indices shifted so the first update is i = 0).

:class:`StalenessStats` keeps a histogram, not per-gradient values: memory is O(σ_max),
independent of the number of gradients, so it can follow a streamed schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class StalenessStats:
    hist: list[int] = field(default_factory=list)
    gradients: int = 0
    total: int = 0
    max: int = 0
    updates: int = 0

    def add(self, update_index: int, timestamps) -> float:
        """Record one update's vector clock; return its ⟨σ⟩ (Eq 2)."""
        s = 0
        hist = self.hist
        for k in timestamps:
            sigma = update_index - k
            if sigma >= len(hist):
                hist.extend([0] * (sigma + 1 - len(hist)))
            hist[sigma] += 1
            s += sigma
            if sigma > self.max:
                self.max = sigma
        n = len(timestamps)
        self.gradients += n
        self.total += s
        self.updates += 1
        return s / n

    @property
    def mean(self) -> float:
        return self.total / self.gradients if self.gradients else 0.0

    def tail(self, threshold: int) -> float:
        """P(σ > threshold) over all recorded gradients."""
        return sum(self.hist[threshold + 1 :]) / self.gradients if self.gradients else 0.0

    def as_dict(self) -> dict[int, int]:
        return {s: c for s, c in enumerate(self.hist) if c}


def draw_staleness(ax, hist: Mapping[int, int], title: str) -> None:
    """The histogram of σ as fractions of all gradients on ``ax`` (the look of :func:`plot_staleness`).

    The bars are those of ``ax.bar(σ, fraction, width=0.9)`` (the same pixels) drawn as one collection: a
    thousand bars (async, λ = 1,000) take 0.05 s instead of 0.5 s.
    """
    from matplotlib.collections import PolyCollection

    total = sum(hist.values()) or 1
    bars = PolyCollection(
        [((s - 0.45, 0), (s - 0.45, c / total), (s + 0.45, c / total), (s + 0.45, 0)) for s, c in hist.items()],
        facecolors="C0",
        edgecolors="none",
        linewidths=0,
    )
    bars.sticky_edges.y.append(0)
    ax.add_collection(bars)
    ax.autoscale_view()
    ax.set_xlabel("staleness σ")
    ax.set_ylabel("fraction of gradients")
    ax.set_title(title)


def plot_staleness(hist: Mapping[int, int], label: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    draw_staleness(ax, hist, f"{label} (Rudra Fig 4 / Zhang Fig 1)")
    fig.tight_layout()
    from psbench.files import write_atomic

    try:  # whole or not at all: a full disk leaves no half picture (psbench.files)
        write_atomic(path, lambda fh: fig.savefig(fh, dpi=100, format=Path(path).suffix[1:] or "png"))
    finally:
        plt.close(fig)
    return path
