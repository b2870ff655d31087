"""Rudra Eq 6 read both ways, for the Table 2 page: α = α0/⟨σ⟩ with ⟨σ⟩ each update's measured mean staleness
(Table 2's own study, ``lr_policy=mean_staleness``) beside α = α0/n, Eq 6 as written (``experiment=
reference/rudra_table2_nominal``, ``lr_policy=nominal_staleness``): per row the error under each reading and the LR per
sample it gives the row, what the paper's text supports, the reason the μλ ≈ 128 rows spread (re-decided from the two
readings through the verdict rule), and the 1-softsync anomaly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from analysis.evidence import Errors, run_errors, two_se
from analysis.learning import equal
from analysis.page import Context
from analysis.pages import rudra_paper as P
from analysis.pages.cifar_jpeg import curve
from analysis.render import md_table
from analysis.runs import Run, select
from analysis.verdicts import Claim, does_not_hold

#: Table 2's 23 rows under Eq 6 as written, α0/n (``python -m sweeps rudra_table2_nominal``)
NOMINAL = "reference/rudra_table2_nominal"
#: the rows its ``paper_jpeg`` scale trains for 140 epochs (seed 0): the two μλ ≈ 128 rows the ``full`` study
#: under α0/n was to put furthest apart
NOMINAL_PAPER_JPEG = ("s1_mu4_lam30", "s30_mu4_lam30")
#: the paper's claim's tolerance: for μλ ≈ 128 the rows within 1 pp (§5.3: 17.96–18.92 %)
SPREAD_TOL = 0.01
#: what the paper's text says about ⟨σ⟩ and Eq 6, with where (the page prints it; the reading it supports follows)
TEXT = (
    "**Which reading the paper's text supports: α = α0/n.** §5.1 measures the staleness of its own implementation and "
    'concludes "σ ∈ {0, 1, …, 2n} and ⟨σ⟩ = n for our implementation of the n-softsync protocol", then writes Eq 6 '
    'as α = α0/⟨σ⟩ = α0/n and, for Fig 5, reduces the learning rate "by a factor ⟨σ⟩ = n = 30"; §5.2 says '
    'λ-softsync has "⟨σ⟩ = λ" and 1-softsync "the average staleness is 1 irrespective of the number of learners"; '
    '§5.3 explains Table 2 by "an average gradient staleness of n". §3.2 has the parameter server keep track of the '
    "average staleness and multiply the learning rate by its reciprocal: the paper measured ⟨σ⟩, and what it "
    "measured, and divided by, was n. So in the paper's runs both readings are one number, and the LR each Table 2 "
    "row had is α0/n. psbench's schedule gives λ-softsync a mean staleness of about λ − 1 (the ⟨σ⟩ column below; "
    "Fig 4's page prints it against n and λ − 1 for λ = 2, 4, 10, 30), so dividing by the measured ⟨σ⟩ gives the "
    "rows other LRs than the paper's: that is psbench's reading of Eq 6, not the paper's."
)


def _num(r: Run, key: str, default: float | None = None) -> float | None:
    try:
        return float(r.params[key])
    except (KeyError, ValueError):
        return default


def _c_mu(r: Run) -> tuple[int, int] | None:
    """(c, μ) of an n-softsync run: c = ⌊λ/n⌋ gradients of μ samples per update."""
    lam, n, mu = _num(r, "learners"), _num(r, "protocol.n"), _num(r, "batch_size")
    if lam is None or mu is None:
        return None
    return max(int(lam) // max(int(n or 1), 1), 1), int(mu)


def lr_nominal(r: Run) -> float | None:
    """The LR per sample of an α0/n run, in units of the baseline's α0/128: (1/max(n, 1)) · 128/(c·μ)."""
    cm, n = _c_mu(r), _num(r, "protocol.n", 0.0)
    floor = _num(r, "lr_policy.min_staleness", 1.0) or 1.0
    return None if cm is None else P.BASELINE["mu"] / (max(n or 0.0, floor) * cm[0] * cm[1])


def lr_measured(ctx: Context, r: Run) -> tuple[float, bool] | None:
    """The mean LR per sample of an α0/⟨σ⟩ run over its updates, in units of α0/128: per update (1/max(⟨σ⟩, 1)) ·
    128/(c·μ), ⟨σ⟩ the mean staleness of that update's gradients, from the run's ``schedule.npz``; without the
    schedule, from the run's mean staleness (then ``True``: approximate). None without either."""
    cm = _c_mu(r)
    if cm is None:
        return None
    floor = _num(r, "lr_policy.min_staleness", 1.0) or 1.0
    sched = _schedule(ctx, r)
    if sched is not None:
        counts = np.diff(sched.offsets)
        sigma = np.add.reduceat(sched.staleness, sched.offsets[:-1]) / np.maximum(counts, 1)
        w = 1.0 / np.maximum(sigma, floor)
        return float(np.mean(w * P.BASELINE["mu"] / (counts * cm[1]))), False
    mean = r.metrics.get("staleness_mean")
    if mean is None:
        return None
    return P.BASELINE["mu"] / (max(mean, floor) * cm[0] * cm[1]), True


def _schedule(ctx: Context, r: Run):
    """The run's ``schedule.npz`` artifact, None when it has none."""
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        import mlflow

        from psbench.ps.schedule import Schedule

        mlflow.set_tracking_uri(ctx.tracking_uri)
        path = mlflow.artifacts.download_artifacts(run_id=r.run_id, artifact_path="schedule.npz")
        return Schedule.load(Path(path))
    except Exception:  # no artifact (an older run, a hand-made one): the approximate LR from ⟨σ⟩
        return None


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.fmean(vals) if vals else None


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation of ``xs`` and ``ys`` (average ranks for ties); None with fewer than 3 pairs."""
    if len(xs) < 3:
        return None
    from scipy.stats import spearmanr

    rho = float(spearmanr(xs, ys).statistic)
    return None if math.isnan(rho) else rho


class Reading:
    """One reading's rows of one scale: per Table 2 row (σ, μ, λ), its :class:`Errors` and its mean LR per sample
    (× α0/128, and whether approximate)."""

    def __init__(self, errs: Mapping[tuple, Errors | None], lrs: Mapping[tuple, tuple[float, bool] | None]) -> None:
        self.errs, self.lrs = errs, lrs

    def rows128(self) -> list[tuple[str, Errors, float]]:
        """The μλ ≈ 128 rows with an error and an LR: (label, errors, LR per sample)."""
        out = []
        for s, mu, lam, *_ in P.TABLE2[128]:
            e, x = self.errs.get((s, mu, lam)), self.lrs.get((s, mu, lam))
            if e is not None and x is not None:
                out.append((f"({s},{mu},{lam})", e, x[0]))
        return out


def readings(ctx: Context, measured_runs: Sequence[Run], nominal_runs: Sequence[Run]) -> tuple[Reading, Reading]:
    """The two readings of one scale from Table 2's runs (α0/⟨σ⟩) and the α0/n study's runs."""
    out = []
    for runs, lr in ((measured_runs, "measured"), (nominal_runs, "nominal")):
        errs, lrs = {}, {}
        for _, rows in P.TABLE2.items():
            for s, mu, lam, *_ in rows:
                rs = select(runs, case=P.case_label(s, mu, lam))
                errs[(s, mu, lam)] = run_errors(f"({s},{mu},{lam})", rs)
                if lr == "nominal":
                    x = _mean([lr_nominal(r) for r in rs])
                    lrs[(s, mu, lam)] = None if x is None else (x, False)
                else:
                    got = [lr_measured(ctx, r) for r in rs]
                    x = _mean([g[0] for g in got if g])
                    lrs[(s, mu, lam)] = None if x is None else (x, any(g[1] for g in got if g))
        out.append(Reading(errs, lrs))
    return out[0], out[1]


def _lr(x: tuple[float, bool] | None) -> str:
    return "—" if x is None else ("≈ " if x[1] else "") + f"{x[0]:.2f}"


def _pct(e: Errors | None) -> str:
    return "—" if e is None else f"{e.mean * 100:.2f} (n={e.n})"


def section(measured_runs: Sequence[Run], meas: Reading, nom: Reading, scale: str) -> str:
    """The "Eq 6 both ways" section of one scale: per row the mean staleness against n and λ − 1, each reading's LR
    per sample and error, their difference (± 2 SE), and the rank correlations of error with LR per sample."""
    rows = []
    for g, prow in P.TABLE2.items():
        for s, mu, lam, e, _ in prow:
            k = (s, mu, lam)
            rs = select(measured_runs, case=P.case_label(s, mu, lam))
            sig = _mean([r.metrics.get("staleness_mean") for r in rs])
            a, b = meas.errs.get(k), nom.errs.get(k)
            diff = f"{(b.mean - a.mean) * 100:+.2f} ± {two_se(a, b) * 100:.2f}" if a and b else "—"
            rows.append(
                [
                    f"≈ {g}",
                    f"({s},{mu},{lam})",
                    f"{e:.2f}",
                    "—" if sig is None else f"{sig:.2f}",
                    str(s),
                    str(lam - 1),
                    _lr(meas.lrs.get(k)),
                    _pct(a),
                    _lr(nom.lrs.get(k)),
                    _pct(b),
                    diff,
                ]
            )
    header = [
        "μλ",
        "row (σ,μ,λ)",
        "paper error %",
        "⟨σ⟩ measured",
        "n",
        "λ − 1",
        "α0/⟨σ⟩: LR per sample × α0/128",
        "α0/⟨σ⟩: error %",
        "α0/n: LR per sample × α0/128",
        "α0/n: error %",
        "α0/n − α0/⟨σ⟩ pp (± 2 SE)",
    ]
    corr = []
    for name, rd in (("α0/⟨σ⟩", meas), ("α0/n", nom)):
        pts = rd.rows128()
        rho = spearman([x for _, _, x in pts], [e.mean for _, e, _ in pts])
        if rho is not None:
            corr.append(f"{name} {rho:+.2f} ({len(pts)} rows)")
    return (
        f"\n### Eq 6 both ways (scale = {scale})\n\n{TEXT}\n\n"
        "Per row: its mean staleness ⟨σ⟩ (the α0/⟨σ⟩ runs, Rudra Eq 2) against n and λ − 1; under each reading the "
        "mean LR per sample over the row's updates in units of the baseline's α0/128 (α0/⟨σ⟩: 1/max(⟨σ⟩, 1) per "
        "update from the runs' schedules, ≈ where only the run's mean staleness is known; α0/n: 1/n) and the final "
        "test error (mean over the seeds); the last column is α0/n − α0/⟨σ⟩ with its 2 SE (the verdict rule's).\n\n"
        + md_table(header, rows)
        + (
            "\nRank correlation (Spearman) of the μλ ≈ 128 rows' error with their LR per sample: "
            + ", ".join(corr)
            + " (negative: the rows with more LR per sample end lower at this budget).\n"
            if corr
            else ""
        )
    )


def spread_claim(text: str, rd: Reading, *, ours: bool = False) -> Claim:
    """ "For μλ ≈ 128 the rows are within 1 pp" on one reading's rows, by the verdict rule."""
    rows = [(f"({s},{mu},{lam})", rd.errs.get((s, mu, lam))) for s, mu, lam, *_ in P.TABLE2[128]]
    return equal(text, [e for _, e in rows], SPREAD_TOL, labels=[lab for lab, _ in rows], ours=ours)


def reading_why(meas: Reading, nom: Reading, seeds: int) -> str:
    """Why the μλ ≈ 128 rows spread under psbench's reading (α0/⟨σ⟩), re-decided from the two readings by the verdict
    rule (:func:`spread_claim` on each): if the claim does not fail on the α0/n rows where it fails on the α0/⟨σ⟩
    ones, the reason is the reading of Eq 6; if it fails on both, the reading is not the whole reason. "" while a row
    of either reading lacks its ``seeds`` or has not learned (a reason is never read off a run at chance)."""
    m, n = meas.rows128(), nom.rows128()
    want = len(P.TABLE2[128])
    if len(m) < want or len(n) < want or any(e.n < seeds or not e.learned for _, e, _ in [*m, *n]):
        return ""
    on_nominal, mine = spread_claim("", nom), spread_claim("", meas)

    def spread(rows: list[tuple[str, Errors, float]]) -> str:
        hi, lo = max(rows, key=lambda r: r[1].mean), min(rows, key=lambda r: r[1].mean)
        xs = [x for _, _, x in rows]
        return (
            f"{(hi[1].mean - lo[1].mean) * 100:.2f} pp (2 SE {two_se(hi[1], lo[1]) * 100:.2f} pp; {lo[0]} "
            f"{lo[1].mean * 100:.2f} % … {hi[0]} {hi[1].mean * 100:.2f} %) at {min(xs):.2f}–{max(xs):.2f} × α0/128 "
            "per sample"
        )

    if not does_not_hold(mine):
        return ""
    if does_not_hold(on_nominal):
        return (
            f"not the reading of Eq 6 alone: under α = α0/n (Eq 6 as written) the rows still spread {spread(n)}, "
            f"beyond the claim's 1 pp as under psbench's α0/⟨σ⟩ ({spread(m)}); the rest is not yet found"
        )
    return (
        f"psbench's reading of Eq 6, not σ: dividing α0 by each update's measured ⟨σ⟩ (≈ λ − 1 for λ-softsync here, "
        f"not the paper's n) the rows spread {spread(m)}; under α = α0/n, the LR the paper's text gives them, they "
        f"spread {spread(n)}: {on_nominal.verdict} by the same rule. The paper's claim is about 140 epochs with its "
        "÷10 steps; the 140-epoch runs under α0/n say whether it holds there"
    )


def anomaly(
    ctx: Context, row: Sequence[Run], hardsync: Sequence[Run], nominal: Sequence[Run], twin: Sequence[Run]
) -> tuple[str, tuple[Errors | None, Errors | None]]:
    """The 1-softsync anomaly at one scale: (1,4,30) (σ ≈ 1) beside hardsync (0,4,30) (Table 3's run: Rudra Eq 7 makes
    it one learner of 120 samples), (1,4,30) under α0/n and its twin without staleness, their LR per sample and the
    gap to hardsync after each epoch. Returns the section and ((1,4,30), (0,4,30)) for the page's claim."""
    a, h = run_errors("(1,4,30)", row), run_errors("(0,4,30) hardsync", hardsync)
    if a is None or h is None:
        return "", (a, h)
    b, t = run_errors("(1,4,30) α0/n", nominal), run_errors("(1,4,30) without σ", twin)
    x_m = _mean([g[0] for r in row if (g := lr_measured(ctx, r))])
    x_n = _mean([lr_nominal(r) for r in nominal])

    def ends(runs: Sequence[Run]) -> dict[int, float]:
        per = [{math.ceil(e - 1e-9): v for e, v in sorted(curve(ctx, r))} for r in runs]
        common = set.intersection(*(set(p) for p in per)) if per else set()
        return {k: statistics.fmean(p[k] for p in per) for k in sorted(common) if k >= 1}

    ea, eh = ends(row), ends(hardsync)
    gaps = ", ".join(f"epoch {k}: {(ea[k] - eh[k]) * 100:+.2f} pp" for k in sorted(set(ea) & set(eh)))
    rows = [
        [
            lab,
            _pct(e),
            "—" if x is None else f"{x:.2f}",
        ]
        for lab, e, x in (
            ("(1,4,30), α0/⟨σ⟩ (Table 2's study)", a, x_m),
            ("(1,4,30), α0/n", b, x_n),
            ("(1,4,30)'s updates without σ (one learner, batch 120)", t, None),
            ("(0,4,30) hardsync (Table 3's study)", h, None),
        )
    ]
    same = x_m is not None and x_n is not None and abs(x_m / x_n - 1) <= 0.05
    reading = (
        f"Both readings of Eq 6 give it the same LR per sample ({x_m:.2f} and {x_n:.2f} × α0/128: ⟨σ⟩ ≈ n = 1, "
        "floored at 1), so the reading does not explain it."
        if same and x_m is not None and x_n is not None
        else "Its LR per sample under the two readings is in the table."
    )
    md = (
        "\n### The 1-softsync anomaly\n\n"
        "1-softsync (1,4,30) has σ ∈ {0, 1, 2} and ⟨σ⟩ ≈ 1, and both papers find it about as good as hardsync (Rudra "
        "Table 3: (1,4,30) 18.09 % vs (0,4,30) 18.15 % after 140 epochs; Zhang Fig 3's 1-softsync curves). Here it "
        f"ends {(a.mean - h.mean) * 100:+.2f} pp from hardsync (0,4,30) (2 SE {two_se(a, h) * 100:.2f} pp), and its "
        "twin without staleness (its updates on one learner) tells how much of that its σ ≈ 1 costs. "
        f"{reading}\n\n"
        + md_table(["configuration", "test error %", "LR per sample × α0/128"], rows)
        + (f"\n(1,4,30) − (0,4,30) after each epoch (means over the seeds both have): {gaps}.\n" if gaps else "")
    )
    return md, (a, h)
