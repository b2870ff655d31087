"""The verdict rule: the verdicts, the rule as every page prints it (:data:`RULE`), a :class:`Claim`, and the claims
decided without seeds — on a schedule or the cost model (deterministic), on a tail's samples, or on other claims.
Claims about learning (runs, seeds, two standard errors) are :mod:`analysis.learning`'s; no page writes a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

HOLDS, FAILS, NOT_MEASURED, NOT_RESOLVABLE = "holds", "does not hold", "not measured", "not resolvable"
UNDETERMINED = "undetermined within the model's error"
#: a claim of a scale whose runs are not all finished: not decided yet ("pending (n of N runs)", :func:`pending`)
PENDING = "pending"
#: every verdict, in the order the counts show them
VERDICTS = (HOLDS, FAILS, NOT_RESOLVABLE, UNDETERMINED, PENDING, NOT_MEASURED)

# Every claim of every page is a :class:`Claim` made by one of the functions below or of :mod:`analysis.learning`.
#
# * A learning claim is decided only on runs that learned: a test error at least LEARN_MARGIN below chance
#   (1 − 1/classes of the data set), and only when the difference it asserts is outside the noise: each
#   configuration has ≥ MIN_SEEDS seeds and the difference of two means is compared with two standard
#   errors, SE² = Σ (seed variance / n + p(1 − p) / test images) — the seeds' spread plus the test set's
#   own sampling noise. Otherwise it is "not measured" (too few seeds, nothing learned, a premise missing)
#   or "not resolvable" (the difference, or the claim's tolerance, is inside the noise). At the paper's budget
#   one seed is what fits: there the seed variance of the same configuration's ``full`` study (≥ MIN_SEEDS seeds,
#   early training) stands in for its own (analysis.evidence.stood_in), named beside each number it enters.
# * A claim the paper did not make is ours: shown with its verdict, never counted.
# * A conditional claim needs its premise to hold.
# * A tail claim P(x) < b needs enough samples: held only when the 95 % Clopper–Pearson upper bound of the
#   measured rate is below b (≈ 3/b samples with no event), failed when the lower bound is above it.
# * A simulation claim (schedule, cost model: deterministic) is decided on its numbers as they are.
# * A cost-model prediction of a claimed range is a band: the model over the choices the papers leave open,
#   widened by the model's own measured error on published timings it was not fitted to. It holds when the
#   band lies inside the range, fails when the band lies wholly outside, and is otherwise "undetermined
#   within the model's error".
MIN_SEEDS = 3
LEARN_MARGIN = 0.05
RULE = (
    f"Verdict rule (every page): a claim about learning is decided only on runs that learned (test error ≥ "
    f"{LEARN_MARGIN * 100:g} pp below chance, 1 − 1/classes) with ≥ {MIN_SEEDS} seeds per configuration, and a "
    "difference counts only outside mean ± 2 SE (SE² = seed variance / n + p(1 − p) / test images, per "
    "configuration); at the paper's budget, where one seed is what fits, the seed variance of the same "
    f"configuration's `full` study (≥ {MIN_SEEDS} seeds, early training: an assumption about the end, named beside "
    'each number) stands in for its own; otherwise "not measured" or "not resolvable", with the reason. Claims '
    "marked *ours* are psbench's, not the paper's, and are not counted; a conditional claim needs its premise; a tail "
    "probability P < b needs its 95 % upper bound below b (≈ 3/b samples). A cost-model prediction of a claimed "
    "range is a band (the model over the choices the papers leave open, widened by its own measured error on "
    "published timings it was not fitted to): held when the band lies inside the range, failed when wholly "
    f'outside, otherwise "{UNDETERMINED}". A claim of a scale whose sweep has not finished all its runs is '
    f'"{PENDING} (n of N runs)", never decided on part of them.'
)


class Claim(NamedTuple):
    """One row of a page's claims: the claim, its verdict, the numbers that decided it; ``ours``: not the
    paper's claim (shown, not counted)."""

    text: str
    verdict: str
    numbers: str
    ours: bool = False
    #: "learning" (decided on trained runs, by the rule), "simulation" (schedule or cost model), "tail"
    kind: str = "learning"
    #: seeds per configuration of a learning claim ("3", "1–3"); "" where seeds do not enter
    seeds: str = ""
    #: the scale it was decided at ("" : the page's largest measured scale)
    scale: str = ""
    #: why a claim that does not hold does not, as measured ("" : not found); shown after its numbers
    why: str = ""
    #: a learning claim's training budget (k, N, unit): its runs trained k of the paper's N epochs (or iterations);
    #: set by the report from the page's :class:`analysis.page.Budget` and runs (None: no runs, or not learning)
    budget: tuple[float, float, str] | None = None


#: what a claim rests on, the three kinds every count keeps apart: learning at the paper's own budget, learning from
#: runs that trained only part of it, and the schedule or the cost model (deterministic, no training)
PAPER_BUDGET, EARLY, SIMULATION = "at the paper's budget", "early training", "simulation"
RESTS_ON = (PAPER_BUDGET, EARLY, SIMULATION)
#: the claim kinds decided on a schedule or the cost model, not on training
SIMULATED_KINDS = ("simulation", "tail")


def _amount(x: float) -> str:
    """An epoch or iteration count as a label says it: 2, 0.32, 10,000."""
    return f"{x:,.0f}" if x >= 100 or float(x).is_integer() else f"{x:.3g}"


def rests_on(c: Claim) -> str:
    """Which of :data:`RESTS_ON` ``c`` is counted under: a schedule or cost-model claim is :data:`SIMULATION`; a
    learning claim whose runs trained less than the paper's budget is :data:`EARLY`; any other learning claim (at
    the paper's budget, or without runs) is :data:`PAPER_BUDGET`."""
    if c.kind in SIMULATED_KINDS:
        return SIMULATION
    return EARLY if c.budget is not None and is_early(c.budget) else PAPER_BUDGET


def is_early(budget: tuple[float, float, str]) -> bool:
    """Whether ``budget`` (k, N, unit) is short of the paper's N."""
    k, n, _ = budget
    return k < n * (1 - 1e-6)


def budget_label(c: Claim) -> str:
    """What ``c``'s verdict rests on, as every page, the index and the docs print it beside the verdict: "early
    training (2 of 140 epochs)", "at the paper's budget (140 epochs)", "simulation", or "—" (a learning claim without
    runs)."""
    if c.kind in SIMULATED_KINDS:
        return SIMULATION
    if c.budget is None:
        return "—"
    k, n, unit = c.budget
    return (
        f"{EARLY} ({_amount(k)} of {_amount(n)} {unit})"
        if is_early(c.budget)
        else f"{PAPER_BUDGET} ({_amount(n)} {unit})"
    )


def budgets_label(budgets: Iterable[tuple[float, float, str]]) -> str:
    """The early-training budgets of several claims in one label: "early training (1–2 of 140 epochs; 300 of
    10,000 iterations)" (the k range per paper's N and unit)."""
    by: dict[tuple[float, str], list[float]] = {}
    for k, n, unit in budgets:
        by.setdefault((n, unit), []).append(k)
    parts = []
    for (n, unit), ks in sorted(by.items(), key=lambda x: (x[0][1], x[0][0])):
        lo, hi = min(ks), max(ks)
        k = _amount(lo) if lo == hi else f"{_amount(lo)}–{_amount(hi)}"
        parts.append(f"{k} of {_amount(n)} {unit}")
    return f"{EARLY} ({'; '.join(parts)})"


def paper_budget_label(budgets: Iterable[tuple[float, float, str]]) -> str:
    """The label of claims at the paper's budget: "at the paper's budget (140 epochs)" (each budget once)."""
    ns = sorted({(unit, n) for _, n, unit in budgets})
    return PAPER_BUDGET + (f" ({'; '.join(f'{_amount(n)} {unit}' for unit, n in ns)})" if ns else "")


def unmet(premise: Claim) -> str:
    """Why a claim with an undecided or failed premise is not measured: "its premise "…" does not hold"."""
    return f'its premise "{premise.text}" {"is " + premise.verdict if premise.verdict != FAILS else FAILS}'


def span(ns: Iterable[int]) -> str:
    """The range of seed counts ``ns`` ("3", "1–3"; "" for none)."""
    ns = sorted(set(ns))
    return "" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


def all_of(text: str, parts: Sequence[Claim], *, ours: bool = False) -> Claim:
    """The conjunction of ``parts``: failed if one fails, not measured if one is, not resolvable (or undetermined
    within the model's error) if one is."""
    vs = [c.verdict for c in parts]
    v = (
        NOT_MEASURED
        if not parts
        else FAILS
        if FAILS in vs
        else NOT_MEASURED
        if NOT_MEASURED in vs
        else NOT_RESOLVABLE
        if NOT_RESOLVABLE in vs
        else UNDETERMINED
        if UNDETERMINED in vs
        else HOLDS
    )
    numbers = "; ".join(f"{c.text}: {c.numbers}" if c.text else c.numbers for c in parts) or "—"
    return Claim(
        text,
        v,
        numbers,
        ours,
        parts[0].kind if parts else "learning",
        span(int(n) for c in parts for n in c.seeds.split("–") if n),
    )


def simulated(text: str, ok: bool | None, numbers: str, *, premise: Claim | None = None, ours: bool = False) -> Claim:
    """A claim about the schedule or the cost model (deterministic): decided on ``ok`` as it is; None (or a
    premise that does not hold) is not measured."""
    if premise is not None and premise.verdict != HOLDS:
        return Claim(text, NOT_MEASURED, f"{numbers}; {unmet(premise)}", ours, "simulation")
    return Claim(text, NOT_MEASURED if ok is None else HOLDS if ok else FAILS, numbers or "—", ours, "simulation")


def band(lo: float, hi: float, error: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """The band of a prediction: its range ``[lo, hi]`` over the choices left open, widened (never shifted) by the
    model's measured relative error (min, max) of model / published − 1: a published value is the model's
    × (1 + e), so the band reaches lo·(1 + min(e, 0)) … hi·(1 + max(e, 0))."""
    return lo * (1 + min(error[0], 0.0)), hi * (1 + max(error[1], 0.0))


def in_range(
    text: str,
    bands: Mapping[str, tuple[float, float] | None],
    claimed: tuple[float, float],
    numbers: str = "",
    *,
    unit: str = "",
    first: str = "",
    ours: bool = False,
) -> Claim:
    """A claimed range ``[lo, hi]`` (an end may be ±inf) against cost-model prediction bands (:func:`band`), one per
    cell: a cell holds when its band lies inside the range, fails when it lies wholly outside; the claim holds
    when every cell holds, fails when one fails, and is otherwise "undetermined within the model's error" (a
    band straddles an end). A missing cell leaves the claim not measured. The deciding numbers are ``first`` (the
    strongest evidence), the bands, then ``numbers``."""
    lo, hi = claimed
    missing = [k for k, b in bands.items() if b is None]
    parts, vs = [], []
    for k, b in bands.items():
        if b is None:
            continue
        v = HOLDS if lo <= b[0] and b[1] <= hi else FAILS if b[1] < lo or b[0] > hi else UNDETERMINED
        vs.append(v)
        where = (
            "inside"
            if v == HOLDS
            else "outside"
            if v == FAILS
            else "straddles " + " and ".join(f"{e:g}{unit}" for e in (lo, hi) if b[0] < e < b[1])
        )
        parts.append(f"{k} [{b[0]:.3g}, {b[1]:.3g}]{unit} {where}")
    v = NOT_MEASURED if missing or not vs else FAILS if FAILS in vs else UNDETERMINED if UNDETERMINED in vs else HOLDS
    ends = " … ".join("∞" if math.isinf(e) else f"{e:g}{unit}" for e in claimed)
    head = (
        f"band vs the claimed {ends}: " + "; ".join(parts) + (f"; no runs of {', '.join(missing)}" if missing else "")
    )
    return Claim(text, v, ". ".join(x for x in (first, head, numbers) if x), ours, "simulation")


def tail(text: str, events: int, total: int, bound: float, what: str = "samples", *, ours: bool = False) -> Claim:
    """ "P(event) < ``bound``" from ``events`` of ``total``: held when the 95 % Clopper–Pearson upper bound is
    below ``bound``, failed when the lower bound is above it, otherwise not resolvable with so few."""
    if total <= 0:
        return Claim(text, NOT_MEASURED, f"no {what}", ours, "tail")
    from scipy.stats import beta

    hi = 1.0 if events >= total else float(beta.ppf(0.975, events + 1, total - events))
    lo = 0.0 if events == 0 else float(beta.ppf(0.025, events, total - events + 1))
    v = HOLDS if hi < bound else FAILS if lo > bound else NOT_RESOLVABLE
    nums = f"{events} of {total} {what} = {events / total:.2e} (95 % CI {lo:.1e}–{hi:.1e})"
    if v == NOT_RESOLVABLE:
        nums += f"; not resolvable with {total} {what}: P < {bound:g} needs ≥ {math.ceil(3.7 / bound):,} with none"
    return Claim(text, v, nums, ours, "tail")


def not_measured(text: str, reason: str, *, ours: bool = False, kind: str = "learning") -> Claim:
    """A claim no run here can decide (data not available, a scale not run), with the reason."""
    return Claim(text, NOT_MEASURED, reason, ours, kind)


#: what a claim that does not hold at ``full`` (all of CIFAR-10) says until its page names the reason
NOT_YET_WHY = (
    "; why it does not hold on all of CIFAR-10 is not yet found (the recipe, the budget, the schedule or a "
    "real difference)"
)


def _unexplained(scale: str, c: Claim) -> Claim:
    """``c`` with its ``why`` after its numbers when it does not hold, or at ``full`` without one :data:`NOT_YET_WHY`:
    a reader sees the reason measured, or that none was found."""
    if c.verdict != FAILS:
        return c
    if c.why:
        return c._replace(numbers=f"{c.numbers}; why: {c.why}")
    return c._replace(numbers=c.numbers + NOT_YET_WHY) if scale == "full" else c


def at_scale(scale: str, claims: Iterable[Claim]) -> list[Claim]:
    """``claims`` decided at ``scale``, which prefixes their text (``[ci] …``); at ``full`` one that does not hold
    says its reason, or that it is not yet found."""
    return [_unexplained(scale, c)._replace(text=f"[{scale}] {c.text}", scale=scale) for c in claims]


def at_scales(scale: str, scales: Sequence[str], claims: Iterable[Claim]) -> list[Claim]:
    """``claims`` decided at ``scale``, one of the ``scales`` a page decides claims at: prefixed ``[scale]`` where
    there are several (the page shows each scale's verdicts, ci beside full), only tagged with it where one."""
    return (
        at_scale(scale, claims) if len(scales) > 1 else [_unexplained(scale, c)._replace(scale=scale) for c in claims]
    )


def pending(claims: Iterable[Claim], done: int, planned: int, running: int = 0) -> list[Claim]:
    """``claims`` of a scale of which ``done`` of the ``planned`` runs have finished: none is decided on part of its
    runs (a missing configuration or seed can change it), each says "pending (done of planned runs)" and shows the
    numbers so far — of the finished runs only, so ``running`` (runs of the scale still RUNNING, whose page section
    says where they are) is said first, lest "no runs of X" read as if X had not started; all of them as they are
    once ``done`` reaches ``planned``."""
    if done >= planned:
        return list(claims)
    runs = f"{running} run{'s' if running != 1 else ''}"
    going = f"{runs} still running (where: the page's paper-budget table); finished: "
    return [
        c._replace(
            verdict=f"{PENDING} ({done} of {planned} runs)",
            numbers=f"so far, not final: {going if running else ''}{c.numbers}",
        )
        for c in claims
    ]


def does_not_hold(c: Claim) -> bool:
    """Whether the rule decided that ``c`` does not hold: a page asks, and never names a verdict itself."""
    return c.verdict == FAILS


def verdict_of(claim_verdict: str) -> str:
    """The verdict a claim's verdict text counts as (``pending (3 of 21 runs)`` is :data:`PENDING`)."""
    return PENDING if claim_verdict.startswith(PENDING + " (") else claim_verdict
