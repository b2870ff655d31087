"""AGN (Hermans et al.): Figs 2, 4 and 6 (DOWNPOUR's divergence, AGN's path) and Figs 8–12 (Table 1's runs
as curves); the figures that only illustrate (1, 3, 5) are listed with that reason.

Figs 8–12 read the runs of ``python -m sweeps agn_table1`` (every Table 1 cell logs ``train_accuracy`` and
``sim_time_s`` per update). Figs 2 and 4 read runs tagged ``paper=agn``, ``figure=2|4``, ``case=downpour_n<n>_H<H>``,
which no sweep makes yet: the page prints the command that does.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from analysis.evidence import Errors
from analysis.learning import gap_lower, majority
from analysis.page import NO_RUNS, Context, Page, Shown, coverage
from analysis.pages.agn import BUDGET, CASE, _curve, _drop, _final, _pct, _train_errors
from analysis.pages.agn_paper import TABLE1
from analysis.render import figure, legend, md_table
from analysis.runs import Run, scales_of, select
from analysis.verdicts import Claim, all_of, not_measured, simulated

ORDER = 3
DOWNPOUR = re.compile(r"^downpour_n(\d+)_H(\d+)$")


def _cells(ctx: Context, runs: list[Run]) -> dict[tuple[str, int, int], list[tuple[np.ndarray, np.ndarray]]]:
    """(protocol, n, H) -> the training-accuracy curves of its seeds."""
    out: dict[tuple[str, int, int], list] = {}
    for r in runs:
        case = r.tags.get("case", "")
        if m := CASE.match(case):
            key = (m[1], int(m[2]), int(m[3]))
        elif m := DOWNPOUR.match(case):
            key = ("downpour", int(m[1]), int(m[2]))
        else:
            continue
        c = _curve(ctx.tracking_uri, r)
        if c is not None:
            out.setdefault(key, []).append(c)
    return out


def _err(label: str, curves: list) -> Errors | None:
    return _train_errors(label, curves)


def _mean_final(curves: list) -> float | None:
    return float(np.mean([_final(c) for c in curves])) if curves else None


# --------------------------------------------------------------------------- Figs 8–12 (Table 1's runs)
def agn_figs8_12(ctx: Context) -> tuple[Shown, str]:
    runs = [r for r in select(ctx.runs, paper="agn", table="1") if CASE.match(r.tags.get("case", ""))]
    md = [
        "# AGN Figs 8–12 — training accuracy of AGN and AEASGD per (n, H), from Table 1's runs\n\n",
        "Paper (MNIST, m = 128, 40 epochs): Fig 8, the final training accuracy declines with the number of "
        'workers n, AGN\'s less ("only starts to decrease from n = 25"); Figs 9–10, training accuracy over time '
        "per configuration with E(AGN, AEASGD) (Table 1 prints E); Fig 11, n fixed, H varied; Fig 12, H fixed, n "
        'varied ("doubling the number of workers, reducing the training time by half"). Ours: the runs of '
        "Table 1 (`python -m sweeps agn_table1 scale=ci|paper`), the learners' mini-batch training accuracy "
        "(mean of the last 5 samples) over simulated time.\n",
    ]
    cmd = "python -m sweeps agn_table1 scale=ci"
    if not scales_of(runs):
        return Shown(runs=runs, command=cmd), "".join(md) + NO_RUNS
    claims: list[Claim] = []
    for scale in scales_of(runs):
        rs = select(runs, scale=scale)
        cells = _cells(ctx, rs)
        ns, hs = sorted({k[1] for k in cells}), sorted({k[2] for k in cells})
        rows = [
            [str(n)] + [_pct(_mean_final(cells.get((p, n, h), []))) for h in hs for p in ("agn", "aeasgd")] for n in ns
        ]
        md += [
            f"\n## scale = {scale}\n\n### Fig 8: final training accuracy % (mean over seeds) per n\n\n",
            md_table(["n", *(f"{p.upper()} H={h}" for h in hs for p in ("agn", "aeasgd"))], rows),
        ]
        png = _fig8_plot(cells, ctx.out / f"agn_fig8_{scale}.png")
        if png:
            md.append(f"\n![training accuracy vs workers]({png.name})\n")
        for fig, fixed, label in (("11", "n", "n fixed, H varied"), ("12", "H", "H fixed, n varied")):
            png = _curves_plot(cells, fixed, ctx.out / f"agn_fig{fig}_{scale}.png", f"AGN Fig {fig}: {label}")
            if png:
                md.append(f"\n### Fig {fig}: {label}\n\n![training accuracy over simulated time]({png.name})\n")
        # Fig 8: AGN's decline from the fewest to the most workers is smaller than AEASGD's, per H
        lo, hi = (ns[0], ns[-1]) if ns else (None, None)
        parts = (
            [
                gap_lower(
                    f"H={h}",
                    (
                        _err(f"AEASGD n={lo} H={h}", cells.get(("aeasgd", lo, h), [])),
                        _err(f"AEASGD n={hi} H={h}", cells.get(("aeasgd", hi, h), [])),
                    ),
                    (
                        _err(f"AGN n={lo} H={h}", cells.get(("agn", lo, h), [])),
                        _err(f"AGN n={hi} H={h}", cells.get(("agn", hi, h), [])),
                    ),
                )
                for h in hs
            ]
            if lo != hi
            else []
        )
        claims = [
            all_of(
                f"Fig 8: AGN's training accuracy declines less than AEASGD's from n = {lo} to n = {hi} (every H)", parts
            )
            if parts
            else not_measured("Fig 8: AGN's training accuracy declines less than AEASGD's as n grows", "one n measured")
        ]
        times = {}
        for r in rs:
            m = CASE.match(r.tags["case"])
            if m and m[1] == "agn" and r.metrics.get("sim_time_s") is not None:
                times.setdefault((int(m[3]), int(m[2])), []).append(r.metrics["sim_time_s"])
        halves = [
            (h, a, b, np.mean(times[(h, a)]) / np.mean(times[(h, b)]))
            for h in hs
            for a, b in itertools.pairwise(ns)
            if b == 2 * a and (h, a) in times and (h, b) in times
        ]
        claims.append(
            simulated(
                "Fig 12: at fixed H, doubling the number of workers about halves AGN's training time (ratio ≥ 1.6)",
                all(x[3] >= 1.6 for x in halves) if halves else None,
                ", ".join(f"H={h}: n={a}→{b} {q:.2f}×" for h, a, b, q in halves) or "no n doubled",
            )
        )
    want = [f"{p}_n{n}_H{h}" for n, h in TABLE1 for p in ("agn", "aeasgd")]
    return Shown(coverage(runs, want), claims, runs, cmd), "".join(md)


def _fig8_plot(cells: Mapping, path: Path) -> Path | None:
    hs = sorted({k[2] for k in cells if k[0] in ("agn", "aeasgd")})
    if not hs:
        return None
    with figure(path, figsize=(6.5, 4)) as ax:
        for h in hs:
            for p, style in (("agn", "-o"), ("aeasgd", "--s")):
                pts = sorted(
                    (k[1], 100 * np.mean([_final(c) for c in v]))
                    for k, v in cells.items()
                    if k[0] == p and k[2] == h and v
                )
                if pts:
                    (line,) = ax.plot([n for n, _ in pts], [a for _, a in pts], style, ms=4, label=f"{p.upper()} H={h}")
                    paper = sorted((n, v[1 if p == "agn" else 3]) for (n, hh), v in TABLE1.items() if hh == h)
                    if paper:  # the paper's Table 1 accuracies of the same H, hollow markers of the same colour
                        ax.plot(
                            [n for n, _ in paper],
                            [a for _, a in paper],
                            style[-1],
                            ms=6,
                            mfc="none",
                            color=line.get_color(),
                            ls=":",
                            lw=0.8,
                            label=f"paper {p.upper()} H={h}",
                        )
        ax.set_xlabel("workers n")
        ax.set_ylabel("final training accuracy (%)")
        ax.set_title("AGN Fig 8: training accuracy vs workers (hollow: the paper's Table 1)")
        legend(ax, fontsize=7)
    return path


def _curves_plot(cells: Mapping, fixed: str, path: Path, title: str) -> Path | None:
    keys = sorted(k for k in cells if k[0] in ("agn", "aeasgd") and cells[k])
    groups = sorted({k[1] if fixed == "n" else k[2] for k in keys})
    if not groups:
        return None
    with figure(path, 1, len(groups), figsize=(4.5 * len(groups), 3.5), squeeze=False) as axes:
        for ax, g in zip(axes[0], groups, strict=True):
            for k in keys:
                if (k[1] if fixed == "n" else k[2]) != g:
                    continue
                t, a = cells[k][0]
                ax.plot(
                    t,
                    100 * a,
                    "-" if k[0] == "agn" else "--",
                    lw=1,
                    label=f"{k[0].upper()} {'H' if fixed == 'n' else 'n'}={k[2] if fixed == 'n' else k[1]}",
                )
            ax.set_title(f"{title.split(':')[0]}, {fixed} = {g}", fontsize=9)
            ax.set_xlabel("simulated time (s)")
            legend(ax, fontsize=6)
        axes[0][0].set_ylabel("training accuracy (%)")
    return path


# --------------------------------------------------------------------------- Figs 2 and 4 (DOWNPOUR)
FIG2_CMD = (
    "psbench -m experiment=agn/table1 protocol=downpour learners=10,20 protocol.local_steps=1 "
    "++tags.table=null ++tags.figure=2 '++tags.case=downpour_n${learners}_H${protocol.local_steps}' "
    "++tags.scale=ci epochs=4"
)
FIG4_CMD = (
    "psbench -m experiment=agn/table1 protocol=downpour learners=10 protocol.local_steps=1,10 "
    "++tags.table=null ++tags.figure=4 '++tags.case=downpour_n${learners}_H${protocol.local_steps}' "
    "++tags.scale=ci epochs=4"
)


def _downpour(ctx: Context, fig: str, title: str, paper: str, cmd: str, vary: str) -> tuple[Shown, str]:
    runs = select(ctx.runs, paper="agn", figure=fig)
    md = [
        f"# AGN Fig {fig} — {title}\n\n",
        f"Paper: {paper} No sweep makes these runs yet; this command does "
        f"(MNIST, m = 128, the Table 1 set-up):\n\n    {cmd}\n",
    ]
    want = ["downpour_n10_H1", "downpour_n20_H1"] if vary == "n" else ["downpour_n10_H1", "downpour_n10_H10"]
    if not scales_of(runs):
        claim = not_measured(
            f"Fig {fig}: "
            + (
                "DOWNPOUR diverges with n = 20 workers and converges with n = 10"
                if vary == "n"
                else "accumulating H = 10 gradients makes DOWNPOUR with n = 10 diverge where H = 1 converges"
            ),
            "no runs (" + cmd + ")",
        )
        return Shown(claims=[claim], runs=runs, command=cmd), "".join(md) + NO_RUNS
    claims: list[Claim] = []
    for scale in scales_of(runs):
        cells = _cells(ctx, select(runs, scale=scale))
        rows = [
            [f"n={k[1]}, H={k[2]}", str(len(v)), _pct(_mean_final(v)), _pct(np.mean([_drop(c[1]) for c in v]))]
            for k, v in sorted(cells.items())
        ]
        md += [
            f"\n## scale = {scale}\n\n",
            md_table(["DOWNPOUR", "seeds", "final train acc %", "drop from peak pp"], rows),
        ]
        calm, wild = (
            cells.get(("downpour", 10, 1), []),
            cells.get(("downpour", 20, 1) if vary == "n" else ("downpour", 10, 10), []),
        )
        diverges = majority(
            f"Fig {fig}: DOWNPOUR {'n = 20' if vary == 'n' else 'n = 10, H = 10'} diverges "
            "(training accuracy falls ≥ 10 pp from its peak)",
            {"drop": [_drop(c[1]) for c in wild]},
            0.10,
            need="all",
            unit="pp",
            gate=[_train_errors("peak", wild, peak=True)],
        )
        converges = majority(
            f"Fig {fig}: DOWNPOUR n = 10, H = 1 converges (falls < 10 pp from its peak)",
            {"drop": [-_drop(c[1]) for c in calm]},
            -0.10,
            need="all",
            unit="pp",
            gate=[_train_errors("DOWNPOUR n=10 H=1", calm)],
        )
        claims = [diverges, converges]
    covered = coverage(runs, want, key=lambda r: r.tags.get("case"))
    return Shown(covered, claims, runs, cmd), "".join(md)


def agn_fig2(ctx: Context) -> tuple[Shown, str]:
    return _downpour(
        ctx,
        "2",
        "DOWNPOUR diverges with n = 20 asynchronous workers",
        "DOWNPOUR (H = 1: a commit every step) diverges with n = 20 workers, converges with n = 10.",
        FIG2_CMD,
        "n",
    )


def agn_fig4(ctx: Context) -> tuple[Shown, str]:
    return _downpour(
        ctx,
        "4",
        "DOWNPOUR diverges when it accumulates gradients",
        "with n = 10, DOWNPOUR converges committing every step (Fig 2) and diverges when it commits "
        "accumulated gradients less often (larger λ = H).",
        FIG4_CMD,
        "H",
    )


def agn_fig6(ctx: Context) -> tuple[Shown, str]:
    md = (
        "# AGN Fig 6 — AGN's path for different λ on a toy problem\n\n"
        'Paper: "a small experiment" on a two-dimensional objective: with λ = ∞ the central variable moves on '
        "a straight line to the minimum. psbench trains networks on data sets; it has no two-dimensional toy "
        "objective, so no run can reproduce this figure.\n"
    )
    claim = not_measured(
        "Fig 6: with λ = ∞ the central variable's path is a straight line to the minimum",
        "needs a 2-D toy objective psbench does not have",
    )
    return Shown(claims=[claim], note="not reproducible here (a toy 2-D objective)"), md


PAGES = [
    Page("AGN", "Figs 1, 3, 5", reason="illustrations (the PS, accumulated gradients, AGN's update): no numbers"),
    Page("AGN", "Fig 2", "agn_fig2", agn_fig2, budget=BUDGET),
    Page("AGN", "Fig 4", "agn_fig4", agn_fig4, budget=BUDGET),
    Page("AGN", "Fig 6", "agn_fig6", agn_fig6),
    Page("AGN", "Figs 8–12", "agn_figs8_12", agn_figs8_12, budget=BUDGET),
]
