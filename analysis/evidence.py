"""What a claim about learning is decided on: one configuration's final errors over its seeds (:class:`Errors`), with
the noise around their mean (the seeds' spread plus the test set's own sampling noise).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from analysis.runs import Run
from analysis.verdicts import LEARN_MARGIN, span

#: classes and test images of each data set (the test set's size sets its noise)
DATASETS = {"cifar10": (10, 10_000), "cifar10_subset": (10, 1_017), "mnist": (10, 10_000),
            "fashion_mnist": (10, 10_000), "digits": (10, 360)}


@dataclass(frozen=True)
class Errors:
    """One configuration's final errors (fractions, lower is better), one per seed.

    ``chance`` is the error of guessing (1 − 1/classes); ``images`` the test-set size (its sampling noise
    enters the standard error), None for a training metric averaged over many batches.
    """

    label: str
    values: tuple[float, ...]
    chance: float = 0.9
    images: int | None = None
    #: learned when the mean is at most this (default chance − LEARN_MARGIN)
    bar: float | None = None
    #: "%" for error fractions; "" for losses (nats)
    unit: str = "%"

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def learned_at(self) -> float:
        return self.chance - LEARN_MARGIN if self.bar is None else self.bar

    @property
    def learned(self) -> bool:
        return self.mean <= self.learned_at

    def fmt(self, x: float) -> str:
        return f"{x * 100:.2f}%" if self.unit == "%" else f"{x:.4g}"

    def diff(self, x: float) -> str:
        return f"{x * 100:.2f} pp" if self.unit == "%" else f"{x:.4g}"

    @property
    def var(self) -> float:
        """Variance of the mean: seeds' spread / n plus the test set's binomial noise."""
        seeds = statistics.variance(self.values) / self.n if self.n > 1 else 0.0
        p = min(max(self.mean, 0.0), 1.0)
        return seeds + (p * (1 - p) / self.images if self.images else 0.0)

    def __str__(self) -> str:
        return f"{self.label} {self.fmt(self.mean)} (n={self.n})"


def errors(label: str, values: Iterable[float | None], dataset: str | None = None, *,
           classes: int | None = None, images: int | None = None) -> Errors | None:
    """:class:`Errors` of the finite ``values`` (test errors of one configuration's seeds) on ``dataset`` (its
    classes and test images from :data:`DATASETS`, or given); None when no value is finite."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    k, m = DATASETS.get(dataset or "", (10, None))
    return Errors(label, vals, 1 - 1 / (classes or k), images if images is not None else m)


def run_errors(label: str, runs: Iterable[Run], key: str = "test_error") -> Errors | None:
    """:func:`errors` of ``key`` over ``runs``; a diverged run counts as chance (it learned nothing)."""
    runs = list(runs)
    ds = next((r.tags.get("dataset") or r.params.get("dataset.name") for r in runs), None)
    chance = 1 - 1 / DATASETS.get(ds or "", (10, 0))[0]
    vals = [chance if _diverged(r) else r.metrics.get(key) for r in runs]
    return errors(label, vals, ds)


def objective(label: str, values: Iterable[float | None], classes: int) -> Errors | None:
    """A training objective (cross-entropy, nats) of one configuration's seeds: chance is ln(classes), the loss
    of guessing; learned when 10 % below it."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    return Errors(label, vals, math.log(classes), None, 0.9 * math.log(classes), "") if vals else None


def _diverged(r: Run) -> bool:
    return (r.tags.get("diverged") == "true" or r.metrics.get("diverged", 0.0) >= 1.0
            or (r.summary or {}).get("diverged") is True)


def seeds_of(groups: Iterable[Errors | None]) -> str:
    """Seeds per configuration of ``groups`` ("3", "1–3")."""
    return span(g.n for g in groups if g is not None)


def two_se(*gs: Errors) -> float:
    """Two standard errors of the sum (or difference) of the means of ``gs``."""
    return 2 * math.sqrt(sum(g.var for g in gs))


def listed(groups: Sequence[Errors | None]) -> str:
    """The measured ``groups`` as the deciding numbers show them (``a 30.00% (n=3), b …``)."""
    return ", ".join(str(g) for g in groups if g is not None)
