"""What a claim about learning is decided on: one configuration's final errors over its seeds (:class:`Errors`), with
the noise around their mean (the seeds' spread plus the test set's own sampling noise).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from analysis.runs import Run
from analysis.verdicts import LEARN_MARGIN, MIN_SEEDS, span

#: classes and test images of each data set (the test set's size sets its noise); cifar10_jpeg is CIFAR-10's 60,000
#: images re-encoded as JPEG q75, its test set the same 10,000 images
DATASETS = {
    "cifar10": (10, 10_000),
    "cifar10_jpeg": (10, 10_000),
    "cifar10_subset": (10, 1_017),
    "mnist": (10, 10_000),
    "fashion_mnist": (10, 10_000),
    "digits": (10, 360),
}
#: data sets whose test set is the whole one the papers report on: noise on it is the papers' own, not a lack of
#: test images (:func:`why_unresolved` says what it is)
FULL_TEST_SETS = frozenset({"cifar10", "cifar10_jpeg", "mnist", "fashion_mnist"})
#: ``dataset=arrays`` runs of a preset (tag ``experiment``) whose arrays are a named data set's images in another
#: encoding: the test set, hence its noise, is that data set's (reference/cifar_jpeg_cost: the subset's 1,017 test
#: images as JPEG q75)
ARRAYS_OF = {"reference/cifar_jpeg_cost": "cifar10_subset"}


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
    #: the data set (a key of :data:`DATASETS`) the errors were measured on, "" if not known
    dataset: str = ""
    #: one seed's spread (the std of a seed's final error) standing in for the configuration's own where it has
    #: one seed: the same configuration's at another scale (:func:`stood_in`), None if none
    spread: float | None = None
    #: where :attr:`spread` was measured ("full, 5 epochs, 3 seeds")
    spread_from: str = ""

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
    def borrowed(self) -> bool:
        """Its seeds' spread stands in from elsewhere (:attr:`spread`): one seed, no spread of its own."""
        return self.spread is not None and self.n == 1

    @property
    def seed_var(self) -> float:
        """The seeds' part of the variance of the mean: their variance / n (the stood-in spread's where
        :attr:`borrowed`)."""
        if self.borrowed:
            assert self.spread is not None
            return self.spread**2 / self.n
        return statistics.variance(self.values) / self.n if self.n > 1 else 0.0

    @property
    def var(self) -> float:
        """Variance of the mean: seeds' spread / n plus the test set's binomial noise."""
        p = min(max(self.mean, 0.0), 1.0)
        return self.seed_var + (p * (1 - p) / self.images if self.images else 0.0)

    def __str__(self) -> str:
        shown = f"{self.label} {self.fmt(self.mean)} (n={self.n})"
        if self.borrowed:
            assert self.spread is not None
            shown += f" with the seeds' spread ± {self.diff(self.spread)} of {self.spread_from}"
        return shown


def errors(
    label: str,
    values: Iterable[float | None],
    dataset: str | None = None,
    *,
    classes: int | None = None,
    images: int | None = None,
) -> Errors | None:
    """:class:`Errors` of the finite ``values`` (test errors of one configuration's seeds) on ``dataset`` (its
    classes and test images from :data:`DATASETS`, or given); None when no value is finite."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    k, m = DATASETS.get(dataset or "", (10, None))
    return Errors(label, vals, 1 - 1 / (classes or k), images if images is not None else m, dataset=dataset or "")


def dataset_of(run: Run) -> str | None:
    """The data set whose test set ``run`` was scored on: its ``dataset`` tag (or param), an ``arrays`` run of a
    preset in :data:`ARRAYS_OF` the data set its arrays re-encode."""
    ds = run.tags.get("dataset") or run.params.get("dataset.name")
    return ARRAYS_OF.get(run.tags.get("experiment", ""), ds) if ds == "arrays" else ds


def run_errors(label: str, runs: Iterable[Run], key: str = "test_error") -> Errors | None:
    """:func:`errors` of ``key`` over ``runs``; a diverged run counts as chance (it learned nothing)."""
    runs = list(runs)
    ds = next((dataset_of(r) for r in runs), None)
    return errors(label, [run_value(r, key) for r in runs], ds)


def run_value(r: Run, key: str = "test_error") -> float | None:
    """``r``'s final ``key``; chance (1 − 1/classes of its data set) for a run that diverged."""
    return 1 - 1 / DATASETS.get(dataset_of(r) or "", (10, 0))[0] if _diverged(r) else r.metrics.get(key)


def stood_in(g: Errors | None, elsewhere: Errors | None, where: str) -> Errors | None:
    """``g`` (one seed: what fits at the paper's budget) with the seeds' spread of the same configuration
    ``elsewhere`` (≥ MIN_SEEDS seeds on the same data set, measured at ``where``) standing in for its own, so the
    verdict rule can weigh one seed against the noise a seed has; ``g`` unchanged when it has seeds of its own (two
    have a spread, if a poor one), when ``elsewhere`` has too few or other data, or when one learned and the other
    did not (the spread of runs at chance says nothing of a run that learned, nor the reverse)."""
    if g is None or g.n != 1 or elsewhere is None or elsewhere.n < MIN_SEEDS or g.dataset != elsewhere.dataset:
        return g
    if g.learned != elsewhere.learned:
        return g
    return replace(g, spread=statistics.stdev(elsewhere.values), spread_from=f"{where}, {elsewhere.n} seeds")


def objective(label: str, values: Iterable[float | None], classes: int) -> Errors | None:
    """A training objective (cross-entropy, nats) of one configuration's seeds: chance is ln(classes), the loss
    of guessing; learned when 10 % below it."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    return Errors(label, vals, math.log(classes), None, 0.9 * math.log(classes), "") if vals else None


def _diverged(r: Run) -> bool:
    return (
        r.tags.get("diverged") == "true"
        or r.metrics.get("diverged", 0.0) >= 1.0
        or (r.summary or {}).get("diverged") is True
    )


def seeds_of(groups: Iterable[Errors | None]) -> str:
    """Seeds per configuration of ``groups`` ("3", "1–3")."""
    return span(g.n for g in groups if g is not None)


def two_se(*gs: Errors) -> float:
    """Two standard errors of the sum (or difference) of the means of ``gs``."""
    return 2 * math.sqrt(sum(g.var for g in gs))


def noise_parts(*gs: Errors) -> tuple[float, float]:
    """Two standard errors of the sum (or difference) of the means of ``gs``, as its test sets' part (binomial) and
    its seeds' part: ``two_se(*gs)² = test² + seeds²``."""
    test = sum(min(max(g.mean, 0.0), 1.0) * (1 - min(max(g.mean, 0.0), 1.0)) / g.images for g in gs if g.images)
    seeds = sum(g.seed_var for g in gs)
    return 2 * math.sqrt(test), 2 * math.sqrt(seeds)


def why_unresolved(gs: Sequence[Errors | None], tol: float | None = None, excess: float | None = None) -> str:
    """Why a claim measured on the whole test set of its data set (:data:`FULL_TEST_SETS`, the papers' own) is
    inside the noise — never the lack of test images: the test set alone is noisier than the claim's ``tol`` at
    these errors, or the seeds' spread dominates, or the difference is below what the whole test set resolves at
    this budget. ``excess``: how far a one-sided "at most ``tol`` worse" claim's difference is beyond ``tol``; when
    it exceeds the test set's 2 SE, more seeds can still make the claim fail, and the reason says so. "" for any
    other test set (a subset: there it is the lack of test images)."""
    gs = [g for g in gs if g is not None]
    if not gs or any(g.dataset not in FULL_TEST_SETS or not g.images for g in gs):
        return ""
    test, seeds = noise_parts(*gs)
    g = gs[0]
    parts = f"2 SE {g.diff(two_se(*gs))} = test set {g.diff(test)} ⊕ seeds {g.diff(seeds)}"
    whole = f"{g.dataset}'s whole test set ({g.images:,} images, the paper's own)"
    if tol is not None and test >= tol and excess is not None and excess > test:
        return (
            f"; {parts}: it cannot hold on {whole} (its 2 SE alone exceeds the claim's {g.diff(tol)}), but it can "
            f"fail: the difference is {g.diff(excess)} beyond {g.diff(tol)}, and the seeds' spread (n = "
            f"{span(x.n for x in gs)}) is most of the noise: more seeds would decide whether it fails"
        )
    if tol is not None and test >= tol:
        return (
            f"; {parts}: {whole} alone is noisier than the claim's {g.diff(tol)} at these errors, so the claim "
            "is finer than any test of it on this test set resolves"
        )
    if seeds > test and any(x.borrowed for x in gs):
        lent = "; ".join(dict.fromkeys(x.spread_from for x in gs if x.borrowed))
        return (
            f"; {parts}: the seeds' spread lent by {lent} (early training) is most of the noise: seeds at this "
            "budget would measure their own and may decide it"
        )
    if seeds > test:
        return (
            f"; {parts}: the seeds' spread (n = {span(x.n for x in gs)}) is most of the noise: more seeds "
            "would decide it"
        )
    return f"; {parts}: at this budget the difference is inside the noise of {whole}"


def listed(groups: Sequence[Errors | None]) -> str:
    """The measured ``groups`` as the deciding numbers show them (``a 30.00% (n=3), b …``)."""
    return ", ".join(str(g) for g in groups if g is not None)
