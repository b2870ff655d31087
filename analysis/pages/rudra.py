"""Rudra (Gupta, Zhang, Milthorpe): Tables 1–4 and Figs 4–8 — paper numbers beside ours."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from analysis.core import (
    FAILS,
    HOLDS,
    NOT_MEASURED,
    Context,
    Page,
    attach_summaries,
    claims_md,
    fmt,
    md_table,
    mean_std,
    savefig,
    scales_of,
    select,
)
from analysis.pages import rudra_paper as P

ORDER = 0


# --------------------------------------------------------------------------- Rudra Table 1
def rudra_table1(ctx: Context) -> tuple[str, str]:
    runs = ctx.runs
    t1 = select(runs, paper="rudra", table="1")
    md = ["# Rudra Table 1 — communication overlap (%)\n\n",
          "Simulated (schedule only): μ = 4, λ = 60, a 297.6 MB MLP standing in for the 300 MB model, "
          "1-softsync, P775 cost model (see conf/experiment/rudra/table1.yaml).\n"]
    if not t1:
        return "not run (python sweeps/rudra_table1.py scale=paper)", "".join(md) + "\nNo runs in the store.\n"
    scales = scales_of(t1)
    ours: dict[str, tuple[float, float] | None] = {}
    for scale in scales:
        rows = []
        for case, paper in P.TABLE1.items():
            rs = select(t1, scale=scale, case=case)
            ms = mean_std([r.metrics.get("comm_overlap") for r in rs])
            ours[case] = ms
            rows.append([case, f"{paper:.2f}", fmt(ms, 100, 2, len(rs)), str(len(rs))])
        md += [f"\n## scale = {scale}\n\n", md_table(["implementation", "paper %", "ours %", "runs"], rows)]
    vals = {k: (v[0] * 100 if v else None) for k, v in ours.items()}
    nums = ", ".join(f"{k} {v:.2f}%" if v is not None else f"{k} —" for k, v in vals.items())
    order = (HOLDS if None not in vals.values() and vals["rudra_base"] < vals["rudra_adv"] < vals["rudra_adv_star"]
             else NOT_MEASURED if None in vals.values() else FAILS)
    star = vals.get("rudra_adv_star")
    almost = NOT_MEASURED if star is None else HOLDS if star >= 99 else FAILS
    md.append("\n" + claims_md([
        ("overlap: Rudra-base < Rudra-adv < Rudra-adv*", order, nums),
        ("Rudra-adv* almost completely overlaps computation with communication (≥ 99 %)", almost,
         f"adv* {star:.2f}%" if star is not None else "—"),
        ("Rudra-adv reaches about half overlap (paper 56.75 %, within ±15 pp)",
         NOT_MEASURED if vals["rudra_adv"] is None else HOLDS if abs(vals["rudra_adv"] - 56.75) <= 15 else FAILS,
         f"adv {vals['rudra_adv']:.2f}%" if vals["rudra_adv"] is not None else "—"),
    ]))
    return f"reproduced at scale {', '.join(scales)} (simulation)", "".join(md)


# --------------------------------------------------------------------------- Rudra Fig 4
def rudra_fig4(ctx: Context) -> tuple[str, str]:
    runs, out, tracking_uri = ctx.runs, ctx.out, ctx.tracking_uri
    f4 = select(runs, paper="rudra", figure="4")
    md = ["# Rudra Fig 4 — gradient staleness of n-softsync, λ = 30\n\n",
          "Simulated (schedule only), μ = 128, CIFAR10 network of §4.2, P775 cost model.\n"]
    if not f4:
        return "not run (python sweeps/rudra_fig4.py scale=paper)", "".join(md) + "\nNo runs in the store.\n"
    attach_summaries(tracking_uri, f4)
    scales = scales_of(f4)
    claims = []
    for scale in scales:
        rows, hists = [], {}
        for case, spec in P.FIG4.items():
            rs = select(f4, scale=scale, case=case)
            n = spec["n"]
            mean = mean_std([r.metrics.get("staleness_mean") for r in rs])
            smax = max((r.metrics.get("staleness_max", -1) for r in rs), default=None)
            hist: dict[int, int] = defaultdict(int)
            for r in rs:
                for k, v in (r.summary.get("staleness_hist") or {}).items():
                    hist[int(k)] += int(v)
            total = sum(hist.values())
            tail = sum(v for k, v in hist.items() if k > 2 * n) / total if total else None
            hists[case] = hist
            note = rs[0].tags.get("data_note", "") if rs else ""
            rows.append([f"{n}-softsync", f"≈ {spec['mean']:g}", fmt(mean, 1, 2, len(rs)),
                         f"≤ {2 * n}", "—" if smax is None else f"{smax:g}",
                         "—" if tail is None else f"{tail:.2e}", str(len(rs)), note])
            if scale == scales[-1] and mean is not None:
                claims.append((f"{n}-softsync: ⟨σ⟩ ≈ n (within 20 %)",
                               HOLDS if abs(mean[0] - n) <= 0.2 * n else FAILS, f"⟨σ⟩ = {mean[0]:.2f}, n = {n}"))
                if tail is not None:
                    claims.append((f"{n}-softsync: P(σ > 2n) < 0.0001", HOLDS if tail < 1e-4 else FAILS,
                                   f"P(σ > {2 * n}) = {tail:.2e} over {total} gradients"))
        md += [f"\n## scale = {scale}\n\n", md_table(
            ["protocol", "paper ⟨σ⟩", "ours ⟨σ⟩", "paper σ max", "ours σ max", "ours P(σ > 2n)", "runs", "data"], rows)]
        png = _fig4_plot(hists, out / f"rudra_fig4_{scale}.png")
        if png:
            md.append(f"\n![staleness histograms]({png.name})\n")
    md.append("\n" + claims_md(claims))
    return f"reproduced at scale {', '.join(scales)} (simulation)", "".join(md)


def _fig4_plot(hists: Mapping[str, Mapping[int, int]], path: Path) -> Path | None:
    if not any(hists.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(hists), figsize=(4 * len(hists), 3))
    for ax, (case, h) in zip(axes, sorted(hists.items()), strict=True):
        total = sum(h.values()) or 1
        ax.bar(sorted(h), [h[k] / total for k in sorted(h)], width=0.9)
        ax.set_title(f"{P.FIG4[case]['n']}-softsync (Rudra Fig 4)")
        ax.set_xlabel("staleness σ")
    axes[0].set_ylabel("fraction of gradients")
    fig.tight_layout()
    savefig(fig, path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- Rudra Table 2
def rudra_table2(ctx: Context) -> tuple[str, str]:
    runs, out = ctx.runs, ctx.out
    t2 = select(runs, paper="rudra", table="2")
    md = ["# Rudra Table 2 — μλ = const: test error and training time\n\n",
          "Paper: CIFAR10 (50,000 images), 140 epochs, P775. Ours: simulated training time from the P775 "
          "cost model; test error from training in the simulator. The data column names the substitution.\n"]
    rows_all = [(g, row) for g, rows in P.TABLE2.items() for row in rows]
    if not t2:
        md.append("\nNo runs in the store.\n")
        rows = [[f"≈ {g}", str(s), str(mu), str(lam), f"{e:.2f}", "—", f"{t:g}", "—", "0", ""]
                for g, (s, mu, lam, e, t) in rows_all]
        md.append(md_table(_T2_HEADER, rows))
        return "not run (python sweeps/rudra_table2.py scale=ci)", "".join(md)
    scales = scales_of(t2)
    claims: list[tuple[str, str, str]] = []
    status = []
    for scale in scales:
        rows, measured = [], {}
        for g, (s, mu, lam, e, t) in rows_all:
            rs = select(t2, scale=scale, case=P.case_label(s, mu, lam))
            err = mean_std([r.metrics.get("test_error") for r in rs])
            tim = mean_std([r.metrics.get("sim_time_s") for r in rs])
            measured[(g, s, mu, lam)] = (err, tim)
            note = rs[0].tags.get("data_note", rs[0].tags.get("dataset", "")) if rs else ""
            rows.append([f"≈ {g}", str(s), str(mu), str(lam), f"{e:.2f}", fmt(err, 100, 2, len(rs)), f"{t:g}",
                         fmt(tim, 1, 3, len(rs)), str(len(rs)), note])
        md += [f"\n## scale = {scale}\n\n", md_table(_T2_HEADER, rows)]
        done = sum(1 for v in measured.values() if v[0] is not None)
        status.append(f"{scale}: {done}/{len(rows_all)} rows")
        png = _t2_plot(measured, out / f"rudra_table2_{scale}.png")
        if png:
            md.append(f"\n![test error vs simulated time per μλ]({png.name})\n")
        if scale == scales[-1]:
            claims = _t2_claims(measured)
    md.append("\n" + claims_md(claims))
    full = all(s.split(": ")[1].startswith(f"{len(rows_all)}/") for s in status)
    return ("reproduced" if full else "partially reproduced") + f" at scale {', '.join(status)}", "".join(md)


_T2_HEADER = ["μλ", "σ", "μ", "λ", "paper error %", "ours error %", "paper time s", "ours sim time s", "runs", "data"]


def _t2_claims(measured: Mapping[tuple, tuple]) -> list[tuple[str, str, str]]:
    claims = []
    fastest, nums = [], []
    for g in P.TABLE2:
        times = {k: v[1][0] for k, v in measured.items() if k[0] == g and v[1] is not None}
        if not times:
            fastest.append(None)
            continue
        k = min(times, key=lambda k: (times[k], k))
        fastest.append(k[1] == 1)
        nums.append(f"μλ≈{g}: fastest (σ,μ,λ)=({k[1]},{k[2]},{k[3]}) {times[k]:.3g} s")
    verdict = NOT_MEASURED if None in fastest or not fastest else HOLDS if all(fastest) else FAILS
    claims.append(("1-softsync has the smallest training time for every μλ", verdict, "; ".join(nums) or "—"))
    means = []
    for g in P.TABLE2:
        errs = [v[0][0] for k, v in measured.items() if k[0] == g and v[0] is not None]
        means.append(statistics.fmean(errs) * 100 if errs else None)
    if None in means:
        verdict, text = NOT_MEASURED, "—"
    else:
        verdict = HOLDS if all(a < b for a, b in itertools.pairwise(means)) else FAILS
        text = ", ".join(f"μλ≈{g}: {m:.2f}%" for g, m in zip(P.TABLE2, means, strict=True))
    claims.append(("test error increases monotonically with μλ (mean over the rows of each μλ)", verdict, text))
    errs = [v[0][0] * 100 for k, v in measured.items() if k[0] == 128 and v[0] is not None]
    if len(errs) == len(P.TABLE2[128]):
        spread = max(errs) - min(errs)
        claims.append(("for μλ ≈ 128 the test error hardly depends on σ ∈ {1,…,30} (spread ≤ 1 pp; paper 0.96 pp)",
                       HOLDS if spread <= 1.0 else FAILS, f"spread {spread:.2f} pp ({min(errs):.2f}–{max(errs):.2f}%)"))
    else:
        claims.append(("for μλ ≈ 128 the test error hardly depends on σ (spread ≤ 1 pp)", NOT_MEASURED, "—"))
    return claims


def _t2_plot(measured: Mapping[tuple, tuple], path: Path) -> Path | None:
    pts = {k: v for k, v in measured.items() if v[0] is not None and v[1] is not None}
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for g in P.TABLE2:
        ks = sorted(k for k in pts if k[0] == g)
        if ks:
            ax.scatter([pts[k][1][0] for k in ks], [pts[k][0][0] * 100 for k in ks], label=f"μλ ≈ {g}")
            for k in ks:
                ax.annotate(f"({k[1]},{k[2]},{k[3]})", (pts[k][1][0], pts[k][0][0] * 100), fontsize=6)
    ax.set_xlabel("simulated training time (s)")
    ax.set_ylabel("test error (%)")
    ax.set_title("Rudra Table 2: (σ, μ, λ) tradeoff")
    ax.legend(fontsize=7)
    fig.tight_layout()
    savefig(fig, path)
    plt.close(fig)
    return path


PAGES = [
    Page("Rudra", "Table 1", "rudra_table1", rudra_table1),
    Page("Rudra", "Table 2", "rudra_table2", rudra_table2),
    Page("Rudra", "Table 3",
         reason="not yet available: needs the Table 2 sweep plus the hardsync rows (0,8,30), (0,4,30)"),
    Page("Rudra", "Table 4", reason="needs data not available here (ImageNet, AlexNet); no sweep yet"),
    Page("Rudra", "Fig 4", "rudra_fig4", rudra_fig4),
    Page("Rudra", "Fig 5",
         reason="not yet available: presets conf/experiment/rudra/fig5_*.yaml exist, no sweep/report yet"),
    Page("Rudra", "Figs 6–8", reason="not yet available: no sweep yet (λ × μ grid per protocol)"),
]
