"""Build ``reports/``: per-table Markdown + HTML (paper beside measured), plots, claims, ``index.html``.

Only Rudra Table 1, Table 2 and Fig 4 have sweeps so far (``sweeps/``); every other table of the
five papers is listed in ``index.html`` with the reason it has no numbers yet — never invented.
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import paper_rudra as P

HOLDS, FAILS, NOT_MEASURED = "holds", "does not hold", "not measured"


# --------------------------------------------------------------------------- reading MLflow
@dataclass
class Run:
    run_id: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    start_time: int
    summary: dict[str, Any] = field(default_factory=dict)


def load_runs(tracking_uri: str, experiment: str = "psbench") -> list[Run]:
    """FINISHED runs of ``experiment``; for one (table, scale, case, seed) the latest run wins."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=1000,
                                  page_token=token)
        runs += [Run(r.info.run_id, dict(r.data.tags), dict(r.data.params), dict(r.data.metrics), r.info.start_time)
                 for r in page]
        token = page.token
        if not token:
            break
    latest: dict[tuple, Run] = {}
    for r in sorted(runs, key=lambda r: (r.start_time, r.run_id)):
        key = (r.tags.get("paper"), r.tags.get("table"), r.tags.get("figure"), r.tags.get("scale"),
               r.tags.get("case"), r.params.get("seed"))
        latest[key] = r
    return sorted(latest.values(), key=lambda r: (r.tags.get("case", ""), r.params.get("seed", ""), r.run_id))


def attach_summaries(tracking_uri: str, runs: Iterable[Run]) -> None:
    """Read each run's ``summary.json`` artifact (staleness histograms live there)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    for r in runs:
        try:
            path = mlflow.artifacts.download_artifacts(run_id=r.run_id, artifact_path="summary.json")
            r.summary = json.loads(Path(path).read_text())
        except Exception:  # an artifact that is gone: the histogram is "not measured"
            r.summary = {}


def select(runs: Iterable[Run], **tags: str) -> list[Run]:
    return [r for r in runs if all(r.tags.get(k) == v for k, v in tags.items())]


# --------------------------------------------------------------------------- formatting
def mean_std(values: Sequence[float]) -> tuple[float, float] | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def fmt(ms: tuple[float, float] | None, scale: float = 1.0, digits: int = 2, n: int = 1) -> str:
    if ms is None:
        return "—"
    m, s = ms[0] * scale, ms[1] * scale
    return f"{m:.{digits}f}" + (f" ± {s:.{digits}f}" if n > 1 else "")


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def md_to_html(title: str, md: str) -> str:
    """Minimal Markdown (headings, pipe tables, bullet lists, images, paragraphs) → HTML."""
    out, table, items = [], [], []

    def flush() -> None:
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= {"-"}]
            cells = [[html.escape(c.strip()) for c in r.strip().strip("|").split("|")] for r in rows]
            out.append("<table>" + "".join(
                "<tr>" + "".join(f"<{'th' if i == 0 else 'td'}>{c}</{'th' if i == 0 else 'td'}>" for c in row)
                + "</tr>" for i, row in enumerate(cells)) + "</table>")
            table.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("![") and "](" in line:
            alt, src = line[2:].split("](", 1)
            out.append(f'<img alt="{html.escape(alt)}" src="{html.escape(src.rstrip(")"))}">')
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:2px 8px;text-align:right}</style></head><body>\n"
            + "\n".join(out) + "\n</body></html>\n")


def claims_md(claims: Sequence[tuple[str, str, str]]) -> str:
    return "## Claims\n\n" + md_table(["claim (paper)", "verdict", "deciding numbers"], claims)


def _savefig(fig, path: Path) -> None:
    fig.savefig(path, dpi=90, metadata={"Software": None})


def scales_of(runs: Iterable[Run]) -> list[str]:
    order = {"ci": 0, "small": 1, "paper": 2}
    return sorted({r.tags.get("scale", "?") for r in runs}, key=lambda s: (order.get(s, 9), s))


# --------------------------------------------------------------------------- Rudra Table 1
def rudra_table1(runs: list[Run], out: Path) -> tuple[str, str]:
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
def rudra_fig4(runs: list[Run], out: Path, tracking_uri: str) -> tuple[str, str]:
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
    _savefig(fig, path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- Rudra Table 2
def rudra_table2(runs: list[Run], out: Path) -> tuple[str, str]:
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
    _savefig(fig, path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- index
# every table/figure the issue names; status filled for those with a builder
PAPER_ITEMS: list[tuple[str, str, str]] = [
    ("rudra", "Table 1", "rudra_table1"), ("rudra", "Table 2", "rudra_table2"),
    ("rudra", "Table 3", "not yet available: needs the Table 2 sweep plus the hardsync rows (0,8,30), (0,4,30)"),
    ("rudra", "Table 4", "needs data not available here (ImageNet, AlexNet); no sweep yet"),
    ("rudra", "Fig 4", "rudra_fig4"),
    ("rudra", "Fig 5", "not yet available: presets conf/experiment/rudra/fig5_*.yaml exist, no sweep/report yet"),
    ("rudra", "Figs 6–8", "not yet available: no sweep yet (λ × μ grid per protocol)"),
    ("staleness-aware ASGD", "Figs 1–4", "not yet available: no sweep yet"),
    ("TernGrad", "Tables 1–3, Figs 3 and 5", "not yet available: compression is issue 4 (open)"),
    ("AGN", "Table 1, Fig 7", "not yet available: local-step optimizers are issue 5 (open)"),
    ("SSP", "Figs 2–5", "not yet available: no sweep yet (TIMIT / ImageNet-63K would be synthetic stand-ins)"),
]


def build(root: Path, out: Path, tracking_uri: str | None = None) -> dict[str, str]:
    """Write the report for the store under ``root`` into ``out``; return ``{page: status}``."""
    uri = tracking_uri or f"sqlite:///{root / 'mlflow.db'}"
    runs = load_runs(uri) if (tracking_uri or (root / "mlflow.db").exists()) else []
    out.mkdir(parents=True, exist_ok=True)
    pages = {"rudra_table1": lambda: rudra_table1(runs, out), "rudra_table2": lambda: rudra_table2(runs, out),
             "rudra_fig4": lambda: rudra_fig4(runs, out, uri)}
    status: dict[str, str] = {}
    for name, fn in pages.items():
        st, md = fn()
        status[name] = st
        (out / f"{name}.md").write_text(md)
        (out / f"{name}.html").write_text(md_to_html(name, md))
    rows = []
    for paper, item, key in PAPER_ITEMS:
        if key in status:
            rows.append([paper, f"[{item}]({key}.html)", status[key]])
        else:
            rows.append([paper, item, key])
    index_md = ("# psbench reproducibility report\n\nEvery table/figure of the five papers and its status. "
                "Numbers come from the MLflow store only; nothing is invented.\n\n"
                + md_table(["paper", "table / figure", "status"], rows))
    (out / "index.md").write_text(index_md)
    index_html = md_to_html("psbench report", index_md)
    for key in pages:  # link the built pages
        index_html = index_html.replace(f"[{_item(key)}]({key}.html)", f'<a href="{key}.html">{_item(key)}</a>')
    (out / "index.html").write_text(index_html)
    return status


def _item(key: str) -> str:
    return next(item for _, item, k in PAPER_ITEMS if k == key)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.environ.get("PSBENCH_ROOT", "."), help="dir holding mlflow.db")
    ap.add_argument("--out", default=None, help="report dir (default <root>/reports)")
    ap.add_argument("--tracking-uri", default=None)
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    out = Path(a.out) if a.out else root / "reports"
    for page, st in build(root, out, a.tracking_uri).items():
        print(f"{page}: {st}")
    print(f"report: {out / 'index.html'}")
    return 0
