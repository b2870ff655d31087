"""Divergence a researcher would call divergence: a non-finite loss (:func:`psbench.optimizer.build.finite_update`),
or a training loss that climbs to ``trainer.divergence_factor`` times its start.

The rule, a pure function of the per-update training losses (each update's mean loss over its gradients' samples):
the run's *start* is the mean of its first :data:`WINDOW` updates' losses; update i diverged when the mean of the
:data:`WINDOW` losses ending at i exceeds factor × start. The window smooths a single unlucky mini-batch (μ = 1
gives one sample per gradient). :data:`DEFAULT_FACTOR` = 4 is Lightning's own threshold for a loss that blew up:
``Tuner.lr_find(early_stop_threshold=4.0)`` stops its search when the (smoothed) loss exceeds 4× the best
(``pytorch_lightning/tuner/lr_finder.py``); the start is the reference here, so a run that first learned and then
returned above 4× where it began is diverged too. Issue 41: ResNet-18 at SGD lr 0.1 reached a train loss of
150,358 and passed as ``diverged: false`` under the non-finite check alone.

Pure, so it runs wherever the losses are read (today once per update in the strategy and the dist PS; per flush
of several updates just as well: pass the flush's losses with the window before them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: updates averaged for the start and for the trailing mean
WINDOW = 10
#: ``trainer.divergence_factor``'s default (Lightning's ``lr_find`` early_stop_threshold)
DEFAULT_FACTOR = 4.0


def start_loss(losses: Sequence[float], window: int = WINDOW) -> float | None:
    """The mean of the first ``window`` losses (None before there are that many, or when one is not finite)."""
    if len(losses) < window:
        return None
    head = [float(v) for v in losses[:window]]
    return sum(head) / window if all(math.isfinite(v) for v in head) else None


def first_exceeding(
    losses: Sequence[float], start: float | None, factor: float | None, window: int = WINDOW
) -> int | None:
    """The first index j ≥ window − 1 of ``losses`` whose trailing mean over ``window`` (losses[j−window+1 … j])
    exceeds ``factor`` × ``start``; None when none does, or the rule is off (factor None or 0, no positive start)."""
    if not factor or start is None or start <= 0 or len(losses) < window:
        return None
    limit = factor * start * window
    total = sum(float(v) for v in losses[: window - 1])
    for j in range(window - 1, len(losses)):
        total += float(losses[j])
        if total > limit:
            return j
        total -= float(losses[j - window + 1])
    return None


def reason(update: int, start: float, mean: float, factor: float) -> str:
    """The summary's words for a loss divergence at ``update``."""
    return (
        f"train loss {mean:.4g} (mean of {WINDOW} updates) above {factor:g}× its start {start:.4g} at update {update}"
    )
