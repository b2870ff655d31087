"""Claims about learning, each decided by the verdict rule (:mod:`analysis.verdicts`): only on configurations that
learned, with ≥ MIN_SEEDS seeds each, and only when the difference a claim asserts lies outside two standard errors
(:meth:`analysis.evidence.Errors.var`); otherwise "not measured" or "not resolvable", with the reason.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence

from analysis.evidence import Errors, listed, seeds_of, two_se, why_unresolved
from analysis.verdicts import FAILS, HOLDS, MIN_SEEDS, NOT_MEASURED, NOT_RESOLVABLE, Claim, span, unmet


def _gate(
    groups: Sequence[Errors | None], must_learn: Sequence[Errors | None], premise: Claim | None, labels: Sequence[str]
) -> str | None:
    """Why a learning claim cannot be decided (None: it can)."""
    why = []
    if premise is not None and premise.verdict != HOLDS:
        why.append(unmet(premise))
    missing = [lab for lab, g in zip(labels, groups, strict=True) if g is None]
    if missing:
        why.append("no runs of " + ", ".join(missing))
    few = [g for g in groups if g is not None and g.n < MIN_SEEDS and not g.borrowed]
    if few:
        why.append(
            ", ".join(f"{g.label} has {g.n} seed{'s' if g.n != 1 else ''}" for g in few)
            + f" (the rule needs ≥ {MIN_SEEDS})"
        )
    flat = [g for g in must_learn if g is not None and not g.learned]
    if flat:
        why.append(
            ", ".join(f"{g.label} {g.fmt(g.mean)}" for g in flat)
            + f" did not learn (chance {flat[0].fmt(flat[0].chance)}, learned ≤ "
            f"{flat[0].fmt(flat[0].learned_at)})"
        )
    return "; ".join(why) or None


def lower(
    text: str,
    a: Errors | None,
    b: Errors | None,
    *,
    premise: Claim | None = None,
    ours: bool = False,
    labels: Sequence[str] = ("a", "b"),
) -> Claim:
    """ "``a``'s error is lower than ``b``'s": held when b − a > 2 SE, failed when a − b > 2 SE; ``a`` (the
    configuration claimed better) must have learned."""
    why = _gate([a, b], [a], premise, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{listed([a, b])}; {why}".lstrip("; "), ours, seeds=seeds_of([a, b]))
    assert a is not None and b is not None
    d, noise = b.mean - a.mean, two_se(a, b)
    v = HOLDS if d > noise else FAILS if -d > noise else NOT_RESOLVABLE
    return Claim(
        text,
        v,
        f"{a}, {b}: difference {a.diff(d)}, 2 SE {a.diff(noise)}"
        + (" (inside the noise)" + why_unresolved([a, b]) if v == NOT_RESOLVABLE else ""),
        ours,
        seeds=seeds_of([a, b]),
    )


def increasing(text: str, series: Sequence[Errors | None], *, ours: bool = False, labels: Sequence[str] = ()) -> Claim:
    """Errors increase along ``series``: every neighbour pair :func:`lower`; failed if one pair is decided the
    other way, not resolvable if a pair is inside the noise; the lowest must have learned."""
    labels = list(labels) or [f"#{i}" for i in range(len(series))]
    why = _gate(series, [min((g for g in series if g), key=lambda g: g.mean, default=None)], None, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{listed(series)}; {why}".lstrip("; "), ours, seeds=seeds_of(series))
    pairs = [lower("", a, b) for a, b in itertools.pairwise(series)]
    vs = [p.verdict for p in pairs]  # a pair whose lower member did not learn is not measured: so is the claim
    v = (
        FAILS
        if FAILS in vs
        else NOT_MEASURED
        if NOT_MEASURED in vs
        else NOT_RESOLVABLE
        if NOT_RESOLVABLE in vs
        else HOLDS
    )
    steps = "; ".join(p.numbers.split(": ", 1)[1] if p.verdict != NOT_MEASURED else p.numbers for p in pairs)
    return Claim(text, v, f"{listed(series)}; steps: {steps}", ours, seeds=seeds_of(series))


def equal(
    text: str,
    groups: Sequence[Errors | None],
    tol: float,
    *,
    premise: Claim | None = None,
    ours: bool = False,
    labels: Sequence[str] = (),
) -> Claim:
    """The errors of ``groups`` differ by at most ``tol`` (a fraction): held when the spread plus 2 SE is within
    ``tol``, failed when the spread minus 2 SE exceeds it, otherwise not resolvable; all must have learned
    (equal at chance says nothing)."""
    labels = list(labels) or [g.label if g else f"#{i}" for i, g in enumerate(groups)]
    why = _gate(groups, groups, premise, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{listed(groups)}; {why}".lstrip("; "), ours, seeds=seeds_of(groups))
    gs = [g for g in groups if g is not None]
    hi, lo = max(gs, key=lambda g: g.mean), min(gs, key=lambda g: g.mean)
    spread, noise = hi.mean - lo.mean, two_se(hi, lo)
    v = HOLDS if spread + noise <= tol else FAILS if spread - noise > tol else NOT_RESOLVABLE
    reason = (
        why_unresolved([hi, lo], tol)
        or f"; not resolvable with this test set: 2 SE {hi.diff(noise)} vs the claim's {hi.diff(tol)}"
        if v == NOT_RESOLVABLE
        else ""
    )
    return Claim(
        text, v, f"{listed(gs)}: spread {hi.diff(spread)}, 2 SE {hi.diff(noise)}{reason}", ours, seeds=seeds_of(groups)
    )


def at_chance(
    text: str,
    a: Errors | None,
    reference: Sequence[Errors | None],
    *,
    ours: bool = False,
    labels: Sequence[str] = ("a",),
) -> Claim:
    """ "``a`` fails to learn": held when ``a`` is at chance (not learned) while a ``reference`` run learned,
    failed when ``a`` learned beyond 2 SE; undecided when no reference learned (vacuous)."""
    refs = [g for g in reference if g is not None]
    why = _gate([a, *refs], [], None, [labels[0], *(g.label for g in refs)])
    if not why and not any(g.learned for g in refs):
        why = "no reference run learned (" + listed(refs) + "): failing to learn says nothing"
    if why:
        return Claim(text, NOT_MEASURED, f"{listed([a])}; {why}".lstrip("; "), ours, seeds=seeds_of([a, *refs]))
    assert a is not None
    bar, noise = a.learned_at, two_se(a)
    v = HOLDS if a.mean >= bar else FAILS if a.mean + noise < bar else NOT_RESOLVABLE
    return Claim(
        text,
        v,
        f"{a} vs learned ≤ {a.fmt(bar)} (2 SE {a.diff(noise)}); reference " + listed([g for g in refs if g.learned]),
        ours,
        seeds=seeds_of([a, *refs]),
    )


def near(text: str, a: Errors | None, target: float, tol: float, *, ours: bool = False) -> Claim:
    """``a``'s error is within ``tol`` of ``target`` (fractions), noise as in :func:`equal`."""
    why = _gate([a], [a], None, ["a"])
    if why:
        return Claim(text, NOT_MEASURED, f"{listed([a])}; {why}".lstrip("; "), ours, seeds=seeds_of([a]))
    assert a is not None
    d, noise = abs(a.mean - target), two_se(a)
    v = HOLDS if d + noise <= tol else FAILS if d - noise > tol else NOT_RESOLVABLE
    return Claim(text, v, f"{a} vs {a.fmt(target)}: |Δ| {a.diff(d)}, 2 SE {a.diff(noise)}", ours, seeds=seeds_of([a]))


def no_worse(
    text: str,
    pairs: Sequence[tuple[Errors | None, Errors | None]],
    tol: float,
    *,
    ours: bool = False,
    labels: Sequence[str] = (),
) -> Claim:
    """For every (a, ref) pair, ``a``'s error is at most ``ref``'s + ``tol``: a pair holds when a − ref + 2 SE ≤
    tol, fails when a − ref − 2 SE > tol; held when all hold, failed when one fails, else not resolvable.
    Both of each pair must have learned."""
    flat = [g for pair in pairs for g in pair]
    labels = list(labels) or [g.label if g else f"#{i}" for i, g in enumerate(flat)]
    why = _gate(flat, flat, None, labels) if pairs else "no pairs measured"
    if why:
        return Claim(text, NOT_MEASURED, f"{listed(flat)}; {why}".lstrip("; "), ours, seeds=seeds_of(flat))
    out, vs, open_ = [], [], []
    for a, ref in pairs:
        assert a is not None and ref is not None
        d, noise = a.mean - ref.mean, two_se(a, ref)
        vs.append(HOLDS if d + noise <= tol else FAILS if d - noise > tol else NOT_RESOLVABLE)
        out.append(f"{a.label} − {ref.label} {a.diff(d)} ± {a.diff(noise)}")
        open_ += [(d - tol, a, ref)] if vs[-1] == NOT_RESOLVABLE else []
    v = FAILS if FAILS in vs else NOT_RESOLVABLE if NOT_RESOLVABLE in vs else HOLDS
    open_.sort(key=lambda o: -o[0])  # the pair nearest to failing says why it is open
    reason = (
        "".join(why_unresolved([a, ref], tol, excess) for excess, a, ref in open_[:1])
        or f"; not resolvable with this test set: the claim's {flat[0].diff(tol)} is inside 2 SE"
        if v == NOT_RESOLVABLE
        else ""
    )
    return Claim(text, v, "; ".join(out) + reason, ours, seeds=seeds_of(flat))


def gap_lower(
    text: str,
    small: tuple[Errors | None, Errors | None],
    large: tuple[Errors | None, Errors | None],
    *,
    ours: bool = False,
) -> Claim:
    """The gap b − a of pair ``large`` is smaller than that of pair ``small`` by more than 2 SE (all four
    configurations learned, ≥ MIN_SEEDS seeds each)."""
    flat = [*small, *large]
    why = _gate(flat, flat, None, [g.label if g else "?" for g in flat])
    if why:
        return Claim(text, NOT_MEASURED, f"{listed(flat)}; {why}".lstrip("; "), ours, seeds=seeds_of(flat))
    (a1, b1), (a2, b2) = small, large
    assert a1 and b1 and a2 and b2
    g1, g2, noise = b1.mean - a1.mean, b2.mean - a2.mean, two_se(a1, b1, a2, b2)
    v = HOLDS if g1 - g2 > noise else FAILS if g2 - g1 > noise else NOT_RESOLVABLE
    return Claim(
        text,
        v,
        f"gap {a2.diff(g2)} vs {a1.diff(g1)}, 2 SE {a1.diff(noise)}"
        + (why_unresolved(flat) if v == NOT_RESOLVABLE else ""),
        ours,
        seeds=seeds_of(flat),
    )


def majority(
    text: str,
    cells: Mapping[str, Sequence[float]],
    above: float,
    *,
    gate: Sequence[Errors | None] = (),
    need: str = "most",
    unit: str = "",
    ours: bool = False,
    premise: Claim | None = None,
) -> Claim:
    """Per cell, a quantity measured once per seed (a ratio, a drop) lies above ``above``: a cell wins when its
    mean − 2 SE > above and loses when mean + 2 SE < above. ``need`` "most": held when more than half the
    cells win, failed when at least half lose; "all": held when all win, failed when one loses; otherwise not
    resolvable. Every cell needs ≥ MIN_SEEDS values and every ``gate`` configuration must have learned."""
    why = [] if premise is None or premise.verdict == HOLDS else [unmet(premise)]
    few = [k for k, v in cells.items() if len(v) < MIN_SEEDS]
    if not cells:
        why.append("no cells measured")
    if few:
        why.append(
            ", ".join(f"{k} has {len(cells[k])} seed{'s' if len(cells[k]) != 1 else ''}" for k in few)
            + f" (the rule needs ≥ {MIN_SEEDS})"
        )
    g = _gate(list(gate), list(gate), None, [x.label if x else "?" for x in gate])
    why += [g] if g else []
    scale = 100.0 if unit == "pp" else 1.0
    shown = ", ".join(f"{k} {statistics.fmean(v) * scale:.3g}{unit}" for k, v in cells.items() if v)
    if why:
        return Claim(
            text,
            NOT_MEASURED,
            f"{shown}; {'; '.join(why)}".lstrip("; "),
            ours,
            seeds=span([len(v) for v in cells.values()]),
        )
    wins = losses = 0
    parts = []
    for k, v in cells.items():
        m, two_se = statistics.fmean(v), 2 * statistics.stdev(v) / math.sqrt(len(v))
        wins += m - two_se > above
        losses += m + two_se < above
        parts.append(f"{k} {m * scale:.3g} ± {two_se * scale:.2g}{unit} (n={len(v)})")
    k = len(cells)
    if need == "all":
        v = HOLDS if wins == k else FAILS if losses else NOT_RESOLVABLE
    else:
        v = HOLDS if wins > k / 2 else FAILS if losses >= k / 2 else NOT_RESOLVABLE
    return Claim(
        text,
        v,
        f"above {above * scale:g}{unit} (mean ± 2 SE): {wins} of {k} cells, below: {losses}; " + ", ".join(parts),
        ours,
        seeds=span([len(v) for v in cells.values()]),
    )


def by_means(
    text: str, groups: Sequence[Errors | None], ok: bool | None, numbers: str, resolution: float, *, ours: bool = False
) -> Claim:
    """A claim decided by a rule on the groups' means (a ranking, a top-k): only when every group learned and
    has ≥ MIN_SEEDS seeds, and when every group's 2 SE is below the rule's ``resolution`` (else not resolvable)."""
    why = _gate(groups, groups, None, [g.label if g else "?" for g in groups]) if groups else "no runs"
    if why:
        return Claim(text, NOT_MEASURED, f"{numbers}; {why}", ours, seeds=seeds_of(groups))
    worst = max((g for g in groups if g is not None), key=two_se)
    if two_se(worst) > resolution:
        why = why_unresolved([worst], resolution)
        return Claim(
            text,
            NOT_RESOLVABLE,
            f"{numbers}; {'' if why else 'not resolvable with this test set: '}2 SE "
            f"up to {two_se(worst) * 100:.2f} pp > the rule's {resolution * 100:.2f} pp{why}",
            ours,
            seeds=seeds_of(groups),
        )
    return Claim(text, NOT_MEASURED if ok is None else HOLDS if ok else FAILS, numbers, ours, seeds=seeds_of(groups))


def learned(label: str, a: Errors | None) -> Claim:
    """The premise "``a`` learned" (a run at chance makes a claim that needs it vacuous)."""
    if a is None:
        return Claim(f"{label} learned", NOT_MEASURED, "no runs")
    return Claim(f"{label} learned", HOLDS if a.learned else FAILS, f"{a}; learned ≤ {a.fmt(a.learned_at)}")
