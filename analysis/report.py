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
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from analysis import pages as pages_pkg
from analysis.arguments import refusal
from analysis.page import PAPER_SCALES, Budget, Context, Page, Shown, status
from analysis.pages.cifar_jpeg import COST, REFERENCE
from analysis.render import RESTS_ON_NOTE, claims_md, md_table, md_to_html, provenance_md
from analysis.runs import SCALE_ORDER, Run, load_runs, trained_epochs
from analysis.verdicts import (
    EARLY,
    NOT_MEASURED,
    PAPER_BUDGET,
    RESTS_ON,
    RULE,
    SIMULATED_KINDS,
    VERDICTS,
    Claim,
    budget_label,
    budgets_label,
    paper_budget_label,
    rests_on,
    verdict_of,
)


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


#: experiments a CIFAR page shows beside its own runs (what JPEG costs, the single-learner reference): their epochs are
#: not the budget its claims were decided at
CONTEXT = (COST, REFERENCE)


def trained(runs: Sequence[Run], scale: str) -> float | None:
    """The epochs ``runs`` of ``scale`` trained (the fewest, when they differ: SSP's one machine trains half of
    what two do, both the same share of their paper budgets), from each run's ``epochs`` (else its
    ``epochs_done``); the :data:`CONTEXT` runs left out. None without such runs."""
    ours = [r for r in runs if r.tags.get("scale") == scale and r.tags.get("experiment") not in CONTEXT]
    return min((e for r in ours if (e := trained_epochs(r)) is not None), default=None)


def with_budget(claims: Sequence[Claim], runs: Sequence[Run], budget: Budget | None, where: str) -> list[Claim]:
    """``claims`` with the budget of each learning claim (:attr:`Claim.budget`: its scale's runs trained k of the
    paper's N epochs; at a scale that trains the paper's budget, :data:`PAPER_SCALES`, that budget while its runs
    still run). A learning claim decided on runs (any verdict but "not measured") whose page declares no
    :class:`Budget`, or whose runs say no epochs, is refused (``ValueError``): no verdict is printed without the
    budget it rests on."""
    out = []
    for c in claims:
        if c.kind in SIMULATED_KINDS:
            out.append(c)
            continue
        k = trained(runs, c.scale) if budget is not None else None
        if k is None and budget is not None and c.scale in PAPER_SCALES:  # runs still running: the scale's budget
            k = budget.epochs
        if k is None and c.verdict != NOT_MEASURED:
            raise ValueError(
                f"{where}: the learning claim {c.text!r} ({c.verdict}) has no budget: its page declares none "
                "(Page.budget) or its runs of scale {c.scale!r} say no epochs"
            )
        out.append(c if k is None or budget is None else c._replace(budget=budget.of(k)))
    return out


def page_of(builder: Callable[[Context], tuple[Shown, str]]) -> Page | None:
    """The :class:`Page` whose builder is ``builder`` (None for a builder of no page)."""
    return next((p for p in all_pages() if p.build is builder), None)


def shown_page(
    builder: Callable[[Context], tuple[Shown, str]], ctx: Context, page: Page | None = None
) -> tuple[Shown, str]:
    """One page's :class:`Shown` (each claim with the scale it was decided at and, for a learning claim, the budget
    its runs trained: :func:`with_budget`) and Markdown: a link back to the index, the builder's Markdown, its claims
    and the provenance of its runs. ``page``: the :class:`Page` of ``builder`` (found when not given)."""
    page = page or page_of(builder)
    shown, md = builder(ctx)
    bad = [c for c in shown.claims if not isinstance(c, Claim)]
    if bad:  # every verdict comes from the rule in analysis.verdicts
        raise TypeError(f"a page's claims must be analysis.verdicts.Claim (made by the verdict rule), got {bad[0]!r}")
    measured = [s for s, (k, _) in shown.configs.items() if k > 0]
    top = max(measured, key=lambda s: (SCALE_ORDER.get(s, 9), s), default="")
    claims = [c if c.scale else c._replace(scale=top) for c in shown.claims]
    where = page.key if page else getattr(builder, "__name__", "a page")
    claims = with_budget(claims, shown.runs, page.budget if page else None, where)
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


CLAIM_COLUMNS = [
    "paper",
    "table / figure",
    "claim",
    "ours",
    "kind",
    "verdict",
    "rests on",
    "scale",
    "seeds",
    "deciding numbers",
]


@dataclass(frozen=True)
class ClaimRow:
    """One claim of the report, on its page (``paper``, ``item``): its ``claims.csv`` row is :meth:`cells`."""

    paper: str
    item: str
    claim: Claim

    def cells(self) -> list[str]:
        """The row under :data:`CLAIM_COLUMNS`."""
        c = self.claim
        return [
            self.paper,
            self.item,
            c.text,
            "yes" if c.ours else "",
            c.kind,
            c.verdict,
            budget_label(c),
            c.scale,
            c.seeds,
            c.numbers,
        ]


def claim_rows(page: Page, claims: Sequence[Claim]) -> list[ClaimRow]:
    return [ClaimRow(page.paper, page.item, c) for c in claims]


#: the row of the learning claims no run decides (data not here, nothing recorded): not "at the paper's budget"
UNRUN = "no runs"


def _counted_under(c: Claim) -> str:
    """The counts' row of ``c``: :func:`rests_on`'s, a learning claim without runs (no budget) apart."""
    kind = rests_on(c)
    return UNRUN if kind == PAPER_BUDGET and c.budget is None else kind


def counts_md(rows: Sequence[ClaimRow], papers: Sequence[str], by_scale: bool = False) -> str:
    """Per paper, its claims by verdict, kept apart by what they rest on (:data:`RESTS_ON`: the paper's budget,
    early training with its "k of N epochs", simulation), side by side; ``by_scale``: also per scale its claims were
    decided at, ci → … → paper. Ours are apart, never counted."""
    out = []
    for paper in papers:
        mine = [r.claim for r in rows if r.paper == paper]
        scales = sorted({c.scale for c in mine}, key=lambda s: (SCALE_ORDER.get(s, 9), s)) if by_scale else [None]
        for scale in scales:
            for kind in (*RESTS_ON, UNRUN):
                at = [c for c in mine if (scale is None or c.scale == scale) and _counted_under(c) == kind]
                if not at:
                    continue
                theirs = [c for c in at if not c.ours]
                budgets = [c.budget for c in at if c.budget]
                label = (
                    budgets_label(budgets)
                    if kind == EARLY
                    else paper_budget_label(budgets)
                    if kind == PAPER_BUDGET
                    else kind
                )
                out.append(
                    [
                        paper,
                        *([scale or "—"] if by_scale else []),
                        label,
                        str(len(theirs)),
                        *(str(sum(verdict_of(c.verdict) == v for c in theirs)) for v in VERDICTS),
                        str(len(at) - len(theirs)),
                    ]
                )
    header = ["paper", *(["scale"] if by_scale else []), "rests on", "claims", *VERDICTS, "ours (not counted)"]
    return md_table(header, out)


def write_claims(out: Path, claims: Sequence[ClaimRow], papers: Sequence[str]) -> None:
    """``claims.md`` and ``claims.csv``: every claim of every page with its verdict, what it rests on, scale, seeds
    and numbers."""
    import csv
    import io

    rows = [r.cells() for r in claims]
    body = [[*r[:2], ("*ours, not counted:* " if r[3] else "") + r[2], *r[4:]] for r in rows]
    (out / "claims.md").write_text(
        "# Every claim, with its verdict\n\n[← index](index.html)\n\n"
        + RULE
        + "\n\n## Counts per paper\n\n"
        + counts_md(claims, papers)
        + "\n## Counts per paper and scale\n\n"
        + counts_md(claims, papers, by_scale=True)
        + "\n## Claims\n\n"
        + md_table([c for c in CLAIM_COLUMNS if c != "ours"], [[c.replace("|", "/") for c in r] for r in body])
    )
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CLAIM_COLUMNS)
    w.writerows(rows)
    (out / "claims.csv").write_text(buf.getvalue())


#: the first line of the docs page :func:`docs_page` writes: what made it (a test checks the committed one has it)
DOCS_MARK = "<!-- generated by `python -m analysis --docs`: do not edit; rerun the command in its first paragraph -->"


def _docs_cell(text: str) -> str:
    """``text`` inside a table cell of the documentation site (MkDocs, Python-Markdown): no pipes, no HTML, no
    braces (``attr_list`` would read a trailing ``{…}``), no emphasis from ``*`` or ``_`` but a page's own bold
    (``**…**``)."""
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "/"), ("**", "\0"), ("*", "\\*"), ("_", "\\_")):
        text = text.replace(a, b)
    return text.replace("{", "&#123;").replace("}", "&#125;").replace("\n", " ").replace("\0", "**")


def budget_md(rows: Sequence[Sequence[str]], ctx: Context, cell: Callable[[str], str] = str) -> str:
    """Every page's runs at the paper's own budget in one table (paper, table / figure, then the page's block:
    :data:`~analysis.pages.paper_budget.HEADER`: each run's final test error beside the paper's, its time and MLflow
    run, or where it is while it runs), each cell through ``cell``; under it the recipe's single-learner reference."""
    from analysis.pages import paper_budget

    said = paper_budget.reference_said(ctx)
    if not rows:
        return f"No run at the papers' own budget in this store (`scale=paper_jpeg`). {said}\n"
    header = ["paper", "table / figure", "scale", *paper_budget.HEADER]
    return md_table(header, [[cell(c) for c in row] for row in rows]) + f"\n{said}\n"


def docs_page(
    claims: Sequence[ClaimRow],
    statuses: Sequence[Sequence[str]],
    papers: Sequence[str],
    runs: Sequence[Run],
    command: str,
    budget: str = "",
) -> str:
    """The documentation site's page of the current verdicts (``--docs``), from the same report run as the pages:
    the counts per paper kept apart by what they rest on (the paper's budget, early training with its "k of N
    epochs", simulation), per scale, every table's status and every claim with its deciding numbers. Generated, never
    typed; deterministic for one store (it names the store's runs, not the time it was written)."""
    import datetime

    last = max((r.start_time for r in runs), default=0)
    when = datetime.datetime.fromtimestamp(last / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC") if last else "—"
    by_paper = []
    for paper in papers:
        mine = [r for r in claims if r.paper == paper]
        rows = [
            [
                _docs_cell(r.item),
                ("*ours, not counted:* " if r.claim.ours else "") + _docs_cell(r.claim.text),
                r.claim.verdict,
                _docs_cell(budget_label(r.claim)),
                r.claim.scale or "—",
                r.claim.seeds or "—",
                _docs_cell(r.claim.numbers),
            ]
            for r in mine
        ]
        if rows:
            header = ["table / figure", "claim", "verdict", "rests on", "scale", "seeds", "deciding numbers"]
            by_paper.append(f"\n### {paper}\n\n" + md_table(header, rows))
    return (
        f"{DOCS_MARK}\n# The current verdicts\n\n"
        f"Generated by `{command}` from the MLflow store it names, in the same run that writes the report's pages: "
        f"{len(runs)} finished runs, the latest started {when}. Rerun the command to refresh it; never edit it by "
        "hand. A verdict here is only what the store's runs show: a claim about training from runs that trained k of "
        "the paper's N epochs says so, and is counted apart from those at the paper's budget and from the claims "
        "about the schedule or the cost model (simulation).\n\n"
        + RULE
        + " "
        + RESTS_ON_NOTE
        + "\n\n## Per paper\n\n"
        + counts_md(claims, papers)
        + "\n## Per paper and scale\n\nA claim decided at several scales counts at each.\n\n"
        + counts_md(claims, papers, by_scale=True)
        + "\n## At the papers' budget\n\nThe runs of 140 epochs (÷10 after 120 and 130) on all 50,000 training "
        "images (`paper_jpeg`: one seed each), as each page shows them.\n\n"
        + budget
        + "\n## Every table and figure\n\n"
        + md_table(["paper", "table / figure", "status"], [[_docs_cell(c) for c in r] for r in statuses])
        + "\n## Every claim\n"
        + "".join(by_paper)
    )


def build(
    root: Path,
    out: Path,
    tracking_uri: str | None = None,
    experiment: str = "psbench",
    docs: Path | None = None,
    command: str = "python -m analysis",
) -> dict[str, str]:
    """Write the report of ``experiment`` in ``tracking_uri`` (default: the sqlite store ``root/mlflow.db``; a
    tracking server ``http://host:5000`` too) into ``out``, and with ``docs`` the documentation site's page of the
    current verdicts (:func:`docs_page`, ``command``: what made it); return ``{page key: status}``."""
    uri = tracking_uri or f"sqlite:///{root / 'mlflow.db'}"
    have = bool(tracking_uri) or (root / "mlflow.db").exists()
    runs = load_runs(uri, experiment) if have else []
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(runs, out, uri, load_runs(uri, experiment, "RUNNING") if have else [])
    statuses: dict[str, str] = {}
    rows, claims, plain = [], [], []
    at_budget: list[list[str]] = []
    pages = all_pages()
    for page in pages:
        if page.build is None:
            rows.append([page.paper, page.item, page.reason])
            plain.append([page.paper, page.item, page.reason])
            continue
        shown, md = shown_page(page.build, ctx, page)
        st = statuses[page.key] = status(shown)
        claims += claim_rows(page, shown.claims)
        at_budget += [[page.paper, page.item, *row] for row in shown.budget]  # row[0]: its scale
        (out / f"{page.key}.md").write_text(md)
        (out / f"{page.key}.html").write_text(md_to_html(page.key, md))
        rows.append([page.paper, f"[{page.item}]({page.key}.html)", st])
        plain.append([page.paper, page.item, st])
    papers = list(dict.fromkeys(p.paper for p in pages))
    write_claims(out, claims, papers)
    (out / "claims.html").write_text(md_to_html("psbench claims", (out / "claims.md").read_text()))
    index_md = (
        "# psbench reproducibility report\n\nEvery table/figure of the five papers and its status, computed "
        'from the page\'s rows and claims: "reproduced at scale X" when every configuration of scale X '
        'has measured runs and every claim was decided (held or not); "measured" when some claims could '
        'not be decided; "partial (k of N …)" when only k of the N configurations have runs; "no runs" '
        "when none has (runs without a scale tag never count). Numbers come from the MLflow store only; "
        "nothing is invented.\n\n## Verdicts per paper\n\n"
        + RULE
        + " "
        + RESTS_ON_NOTE
        + " Every claim: [claims](claims.html) "
        "(also claims.csv).\n\n" + counts_md(claims, papers) + "\nPer scale (a claim decided at several scales "
        "counts at each):\n\n"
        + counts_md(claims, papers, by_scale=True)
        + "\n## At the papers' budget\n\n"
        + budget_md(at_budget, ctx)
        + "\n## Tables and figures\n\n"
        + md_table(["paper", "table / figure", "status"], rows)
    )
    (out / "index.md").write_text(index_md)
    (out / "index.html").write_text(md_to_html("psbench report", index_md))
    if docs is not None:
        docs.parent.mkdir(parents=True, exist_ok=True)
        docs.write_text(docs_page(claims, plain, papers, runs, command, budget_md(at_budget, ctx, _docs_cell)))
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
    ap.add_argument(
        "--docs",
        default=None,
        metavar="PATH",
        help="also write the documentation site's page of the current verdicts there (docs/papers/verdicts.md): the "
        "counts per paper at the paper's budget, early training and simulation, every status and claim, generated "
        "from the same run as the pages",
    )
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    out = Path(a.out) if a.out else root / "reports"
    uri = a.tracking_uri or f"sqlite:///{root / 'mlflow.db'}"
    if why := refusal(root, uri, a.tracking_uri, a.experiment, out, Path(a.docs) if a.docs else None):
        print(f"python -m analysis: error: {why}", file=sys.stderr)
        return 2
    said = (
        ["python -m analysis", "--root", a.root]
        if not a.tracking_uri
        else ["python -m analysis", "--tracking-uri", a.tracking_uri]
    )
    said += ["--experiment", a.experiment] if a.experiment != "psbench" else []
    said += ["--docs", a.docs] if a.docs else []
    docs = Path(a.docs) if a.docs else None
    for page, st in build(root, out, a.tracking_uri, a.experiment, docs, " ".join(said)).items():
        print(f"{page}: {st}")
    print(f"report: {out / 'index.html'}")
    return 0
