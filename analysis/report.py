"""Build ``reports/``: per-table Markdown + HTML (paper beside measured), plots, claims, ``index.html``.

Pages come from the modules of :mod:`analysis.pages` (one per paper, each with ``ORDER`` and ``PAGES``);
a table without a builder is listed in ``index.html`` with the reason it has no numbers — never invented.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from analysis import pages as pages_pkg
from analysis.page import Context, Page, Shown, status
from analysis.render import claims_md, md_table, md_to_html, provenance_md
from analysis.runs import SCALE_ORDER, load_runs
from analysis.verdicts import RULE, VERDICTS, Claim, verdict_of


def all_pages() -> list[Page]:
    """Every page of every paper module, in index order: papers by their modules' ``ORDER``, then each paper's
    tables and its figures by number."""
    mods = [importlib.import_module(f"{pages_pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pages_pkg.__path__)]
    mods = sorted((m for m in mods if hasattr(m, "PAGES")), key=lambda m: (m.ORDER, m.__name__))
    pages = [(m.ORDER, p) for m in mods for p in m.PAGES]

    def number(item: str) -> int:
        digits = re.search(r"\d+", item)
        return int(digits.group()) if digits else 0

    pages.sort(key=lambda x: (x[0], not x[1].item.startswith("Table"), number(x[1].item)))
    return [p for _, p in pages]


def shown_page(builder: Callable[[Context], tuple[Shown, str]], ctx: Context) -> tuple[Shown, str]:
    """One page's :class:`Shown` (each claim with the scale it was decided at) and Markdown: a link back to the
    index, the builder's Markdown, its claims and the provenance of its runs."""
    shown, md = builder(ctx)
    bad = [c for c in shown.claims if not isinstance(c, Claim)]
    if bad:  # every verdict comes from the rule in analysis.verdicts
        raise TypeError(f"a page's claims must be analysis.verdicts.Claim (made by the verdict rule), got {bad[0]!r}")
    measured = [s for s, (k, _) in shown.configs.items() if k > 0]
    top = max(measured, key=lambda s: (SCALE_ORDER.get(s, 9), s), default="")
    claims = [c if c.scale else c._replace(scale=top) for c in shown.claims]
    shown = replace(shown, claims=claims)
    md = (
        f"[← index: every table and figure](index.html)\n\n{md}"
        + (f"\n{claims_md(claims)}" if claims else "")
        + "\n"
        + provenance_md(shown.runs)
    )
    return shown, md


def render(builder: Callable[[Context], tuple[Shown, str]], ctx: Context) -> tuple[str, str]:
    """One page's (index status, Markdown) (:func:`shown_page`); the status is :func:`analysis.page.status` of
    what the builder shows."""
    shown, md = shown_page(builder, ctx)
    return status(shown), md


CLAIM_COLUMNS = ["paper", "table / figure", "claim", "ours", "kind", "verdict", "scale", "seeds", "deciding numbers"]


def claim_rows(page: Page, claims: Sequence[Claim]) -> list[list[str]]:
    return [
        [page.paper, page.item, c.text, "yes" if c.ours else "", c.kind, c.verdict, c.scale, c.seeds, c.numbers]
        for c in claims
    ]


def counts_md(rows: Sequence[Sequence[str]], papers: Sequence[str], by_scale: bool = False) -> str:
    """Per paper (``by_scale``: per paper and the scale its claims were decided at, ci → … → paper): its claims by
    verdict (ours apart, never counted)."""
    out = []
    for paper in papers:
        mine = [r for r in rows if r[0] == paper]
        scales = sorted({r[6] for r in mine}, key=lambda s: (SCALE_ORDER.get(s, 9), s)) if by_scale else [None]
        for scale in scales:
            at = [r for r in mine if scale is None or r[6] == scale]
            theirs = [r for r in at if not r[3]]
            out.append(
                [
                    paper,
                    *([scale or "—"] if by_scale else []),
                    str(len(theirs)),
                    *(str(sum(verdict_of(r[5]) == v for r in theirs)) for v in VERDICTS),
                    str(len(at) - len(theirs)),
                ]
            )
    return md_table(["paper", *(["scale"] if by_scale else []), "claims", *VERDICTS, "ours (not counted)"], out)


def write_claims(out: Path, rows: Sequence[Sequence[str]], papers: Sequence[str]) -> None:
    """``claims.md`` and ``claims.csv``: every claim of every page with its verdict, scale, seeds and numbers."""
    import csv
    import io

    body = [[*r[:2], ("*ours, not counted:* " if r[3] else "") + r[2], *r[4:]] for r in rows]
    (out / "claims.md").write_text(
        "# Every claim, with its verdict\n\n[← index](index.html)\n\n"
        + RULE
        + "\n\n## Counts per paper\n\n"
        + counts_md(rows, papers)
        + "\n## Counts per paper and scale\n\n"
        + counts_md(rows, papers, by_scale=True)
        + "\n## Claims\n\n"
        + md_table([c for c in CLAIM_COLUMNS if c != "ours"], [[c.replace("|", "/") for c in r] for r in body])
    )
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CLAIM_COLUMNS)
    w.writerows(rows)
    (out / "claims.csv").write_text(buf.getvalue())


def build(root: Path, out: Path, tracking_uri: str | None = None, experiment: str = "psbench") -> dict[str, str]:
    """Write the report of ``experiment`` in ``tracking_uri`` (default: the sqlite store ``root/mlflow.db``; a
    tracking server ``http://host:5000`` too) into ``out``; return ``{page key: status}``."""
    uri = tracking_uri or f"sqlite:///{root / 'mlflow.db'}"
    have = bool(tracking_uri) or (root / "mlflow.db").exists()
    runs = load_runs(uri, experiment) if have else []
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(runs, out, uri, load_runs(uri, experiment, "RUNNING") if have else [])
    statuses: dict[str, str] = {}
    rows, claims = [], []
    pages = all_pages()
    for page in pages:
        if page.build is None:
            rows.append([page.paper, page.item, page.reason])
            continue
        shown, md = shown_page(page.build, ctx)
        st = statuses[page.key] = status(shown)
        claims += claim_rows(page, shown.claims)
        (out / f"{page.key}.md").write_text(md)
        (out / f"{page.key}.html").write_text(md_to_html(page.key, md))
        rows.append([page.paper, f"[{page.item}]({page.key}.html)", st])
    papers = list(dict.fromkeys(p.paper for p in pages))
    write_claims(out, claims, papers)
    (out / "claims.html").write_text(md_to_html("psbench claims", (out / "claims.md").read_text()))
    index_md = (
        "# psbench reproducibility report\n\nEvery table/figure of the five papers and its status, computed "
        'from the page\'s rows and claims: "reproduced at scale X" when every configuration of scale X '
        'has measured runs and every claim was decided (held or not); "measured" when some claims could '
        'not be decided; "partial (k of N …)" when only k of the N configurations have runs; "no runs" '
        "when none has (runs without a scale tag never count). Numbers come from the MLflow store only; "
        "nothing is invented.\n\n## Verdicts per paper\n\n" + RULE + " Every claim: [claims](claims.html) "
        "(also claims.csv).\n\n" + counts_md(claims, papers) + "\nPer scale (a claim decided at several scales "
        "counts at each):\n\n"
        + counts_md(claims, papers, by_scale=True)
        + "\n## Tables and figures\n\n"
        + md_table(["paper", "table / figure", "status"], rows)
    )
    (out / "index.md").write_text(index_md)
    (out / "index.html").write_text(md_to_html("psbench report", index_md))
    return statuses


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.environ.get("PSBENCH_ROOT", "."), help="dir holding mlflow.db")
    ap.add_argument("--out", default=None, help="report dir (default <root>/reports)")
    ap.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store to read (default sqlite:///<root>/mlflow.db), e.g. http://host:5000",
    )
    ap.add_argument("--experiment", default="psbench", help="MLflow experiment (logger.experiment_name)")
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    out = Path(a.out) if a.out else root / "reports"
    for page, st in build(root, out, a.tracking_uri, a.experiment).items():
        print(f"{page}: {st}")
    print(f"report: {out / 'index.html'}")
    return 0
