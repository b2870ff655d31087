"""Divergence a researcher would call divergence: a non-finite loss (:func:`psbench.optimizer.build.finite_update`),
or a training loss that climbs to ``trainer.divergence_factor`` times its start and stays there.

The rule, over the per-update training losses in order (each update's mean loss over its gradients' samples): the
run's *start* is the loss before it learned, the mean loss of its first updates whose gradients were all computed on
the initial weights (read timestamp 0: hardsync's first update, async's first λ; at most :data:`START`); update i
diverged when the mean of the trailing window ending at i exceeds factor × start. The window is the last
``max(START, ⌈SAMPLES / samples per update⌉)`` updates: it holds at least :data:`SAMPLES` samples whatever μ and the
updates' gradient count, because stale SGD has transients a run recovers from. Measured on real MNIST (6,000
images), 30-softsync at λ = 30, μ = 4 under α0/⟨σ⟩ (Rudra §5.1, Fig 5; all 5 seeds end at 8.4–9.9 % test error):
the loss climbs to 3.1–9.0× its start over 10 updates (40 samples), still 3.9× over 64 updates (256 samples), and
at most 2.5× over 256 updates (1,024 samples). :data:`DEFAULT_FACTOR` = 4 is Lightning's own threshold for a loss that
blew up: ``Tuner.lr_find(early_stop_threshold=4.0)`` stops its search when the (smoothed) loss exceeds 4× the best
(``pytorch_lightning/tuner/lr_finder.py``); the start is the reference here, so a run that first learned and then
returned above 4× where it began is diverged too. Issue 41: ResNet-18 at SGD lr 0.1 reached a train loss of
150,358 and passed as ``diverged: false`` under the non-finite check alone. A start from the first 10 updates
whatever their weights let such a run hide: async λ = 8 at α0 = 0.1 climbs from 3.0 to 110 by update 10, inflating
the start past what the explosion after it reached on average.

:class:`LossRule` is O(1) per update, so it runs wherever the losses are read: in the strategy once per look-ahead
flush, in the dist PS once per update, with the same result.
"""

from __future__ import annotations

import math
from collections import deque

#: most updates averaged for the start (those on the initial weights)
START = 10
#: the trailing window holds at least this many samples (and at least START updates)
SAMPLES = 1024
#: ``trainer.divergence_factor``'s default (Lightning's ``lr_find`` early_stop_threshold)
DEFAULT_FACTOR = 4.0


def window(samples_per_update: int) -> int:
    """Updates in the trailing window: at least :data:`START`, and at least :data:`SAMPLES` samples."""
    return max(START, math.ceil(SAMPLES / max(1, samples_per_update)))


class LossRule:
    """The rule over one run's finite losses, fed in update order (:meth:`add`); ``factor`` None or 0 turns it off.
    The window is fixed by the first update's sample count (a last partial batch does not change it)."""

    def __init__(self, factor: float | None) -> None:
        self.factor = factor
        self.head: list[float] = []  # the first losses on the initial weights (at most START)
        self.started = False  # the start is fixed (START of them, or an update on later weights came)
        self.window: int | None = None
        self.trail: deque[float] = deque()
        self._total = 0.0  # sum of trail, refreshed exactly every window updates
        self._since = 0

    @property
    def start(self) -> float | None:
        """The mean loss of the first updates on the initial weights (None until it is fixed)."""
        return sum(self.head) / len(self.head) if self.started and self.head else None

    def add(self, update: int, loss: float, samples: int, staleness_mean: float) -> str | None:
        """Update ``update``'s finite ``loss``, over ``samples`` samples, its gradients' mean staleness
        ``staleness_mean`` (Rudra Eq 2): why the run diverged at it, or None."""
        if not self.factor:
            return None
        if not self.started:
            initial = staleness_mean == update  # every σ = update (σ ≤ update): every gradient read timestamp 0
            if initial:
                self.head.append(loss)
            self.started = not initial or len(self.head) == START
        if self.window is None:
            self.window = window(samples)
        self.trail.append(loss)
        self._total += loss
        if len(self.trail) > self.window:
            self._total -= self.trail.popleft()
        self._since += 1
        if self._since >= self.window:  # no drift from adding and subtracting, whatever the run's length
            self._total, self._since = math.fsum(self.trail), 0
        start = self.start
        if start is None or start <= 0 or len(self.trail) < self.window:
            return None
        mean = self._total / self.window
        if mean <= self.factor * start:
            return None
        return (
            f"train loss {mean:.4g} (mean of {self.window} updates) above {self.factor:g}× its start {start:.4g} "
            f"at update {update}"
        )

    def state_dict(self) -> dict:
        return {
            "head": list(self.head),
            "started": self.started,
            "window": self.window,
            "trail": list(self.trail),
            "total": self._total,
            "since": self._since,
        }

    def load_state_dict(self, s: dict) -> None:
        """A saved rule (a resumed run continues exactly as one that was not stopped)."""
        self.head, self.started, self.window = list(s["head"]), s["started"], s["window"]
        self.trail = deque(s["trail"])
        self._total, self._since = s["total"], s["since"]
