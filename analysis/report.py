"""Build ``reports/``: per-table Markdown + HTML (paper beside measured), plots, claims, ``index.html``.

Pages come from the modules of :mod:`analysis.pages` (one per paper, each with ``ORDER`` and ``PAGES``);
a table without a builder is listed in ``index.html`` with the reason it has no numbers — never invented.
"""

from __future__ import annotations

import argparse
import html
import importlib
import os
import pkgutil
from collections.abc import Sequence
from pathlib import Path

from analysis import pages as pages_pkg
from analysis.core import Context, Page, load_runs, md_table, md_to_html


def all_pages() -> list[Page]:
    """Every page of every paper module, in index order."""
    mods = [importlib.import_module(f"{pages_pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pages_pkg.__path__)]
    mods = sorted((m for m in mods if hasattr(m, "PAGES")), key=lambda m: (m.ORDER, m.__name__))
    return [p for m in mods for p in m.PAGES]


def build(root: Path, out: Path, tracking_uri: str | None = None) -> dict[str, str]:
    """Write the report for the store under ``root`` into ``out``; return ``{page key: status}``."""
    uri = tracking_uri or f"sqlite:///{root / 'mlflow.db'}"
    runs = load_runs(uri) if (tracking_uri or (root / "mlflow.db").exists()) else []
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(runs, out, uri)
    status: dict[str, str] = {}
    rows, links = [], []
    for page in all_pages():
        if page.build is None:
            rows.append([page.paper, page.item, page.reason])
            continue
        st, md = page.build(ctx)
        status[page.key] = st
        (out / f"{page.key}.md").write_text(md)
        (out / f"{page.key}.html").write_text(md_to_html(page.key, md))
        rows.append([page.paper, f"[{page.item}]({page.key}.html)", st])
        links.append(page)
    index_md = ("# psbench reproducibility report\n\nEvery table/figure of the five papers and its status. "
                "Numbers come from the MLflow store only; nothing is invented.\n\n"
                + md_table(["paper", "table / figure", "status"], rows))
    (out / "index.md").write_text(index_md)
    index_html = md_to_html("psbench report", index_md)
    for page in links:
        text = html.escape(f"[{page.item}]({page.key}.html)")
        index_html = index_html.replace(text, f'<a href="{page.key}.html">{html.escape(page.item)}</a>')
    (out / "index.html").write_text(index_html)
    return status


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
