"""How a page is written: measured cells (mean ± std (n)), Markdown tables, the Markdown → HTML of every page,
figures saved byte-identically, and the "Claims" and "Provenance" sections the report adds below a page.
"""

from __future__ import annotations

import html
import math
import re
import statistics
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from analysis.runs import Run, trained_epochs
from analysis.verdicts import RULE, Claim, budget_label
from psbench.tracking.provenance import recorded


def mean_std(values: Sequence[float]) -> tuple[float, float] | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def fmt(ms: tuple[float, float] | None, scale: float = 1.0, digits: int = 2, n: int = 1) -> str:
    """A measured cell: mean ± std over ``n`` seeds, with n (``0.18 ± 0.01 (n=3)``, ``0.18 (n=1)``)."""
    if ms is None:
        return "—"
    m, s = ms[0] * scale, ms[1] * scale
    return f"{m:.{digits}f}" + (f" ± {s:.{digits}f}" if n > 1 else "") + f" (n={n})"


def cell(values: Sequence[float | None], scale: float = 1.0, digits: int = 2) -> str:
    """:func:`fmt` of the finite ``values`` (one per seed); n counts those values."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return fmt(mean_std(vals), scale, digits, len(vals))


#: a ``data_note`` that names a JPEG re-encoding (every run on ``dataset=cifar10_jpeg`` carries ``cifar10_jpeg_q75``)
JPEG_NOTE = re.compile(r"cifar10_jpeg_q(\d+)")


def jpeg_quality(run: Run) -> str | None:
    """The JPEG quality of ``run``'s images ("75") when its ``data_note`` says they are a JPEG re-encoding."""
    m = JPEG_NOTE.match(run.tags.get("data_note", ""))
    return m[1] if m else None


def data_note(run: Run) -> str:
    """``run``'s data as a page shows it next to its numbers: its ``data_note`` tag (else its ``dataset``), a JPEG
    re-encoding said in words."""
    note = run.tags.get("data_note") or run.tags.get("dataset", "")
    q = jpeg_quality(run)
    return f"**JPEG q{q} re-encoding** of CIFAR-10 images, not the original pixels ({note})" if q else note


def scale_data(runs: Iterable[Run], paper_epochs: float | None = None) -> str:
    """What a scale's heading adds: " — early training: 2 of 140 epochs per run" when its runs trained fewer of
    the paper's ``paper_epochs``; " — images: JPEG q75 re-encoding …" when its images are a JPEG re-encoding."""
    runs = list(runs)
    said = ""
    got = min((e for r in runs if (e := trained_epochs(r)) is not None), default=None)
    if paper_epochs and got is not None and got < paper_epochs:
        said = f" — early training: {got:g} of {paper_epochs:g} epochs per run"
    qs = sorted({q for r in runs if (q := jpeg_quality(r))})
    if qs:
        said += (
            f" — images: JPEG q{'/'.join(qs)} re-encoding of CIFAR-10 (`dataset=cifar10_jpeg`), not the original pixels"
        )
    return said


_PIPE = re.compile(r"(?<!\\)\|")  # a cell boundary: a pipe not escaped


def _cell(text: object) -> str:
    """A table cell's text with its pipes escaped (``|x|`` would split the cell in Markdown and here)."""
    return _PIPE.sub(r"\|", str(text))


def _row_cells(row: str) -> list[str]:
    """A pipe-table row's cells, split at unescaped pipes, escaped pipes restored."""
    t = row.strip()
    t = t[1:] if t.startswith("|") else t
    t = t[:-1] if t.endswith("|") and not t.endswith("\\|") else t
    return [c.replace("\\|", "|") for c in _PIPE.split(t)]


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(map(_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_NUMBER = re.compile(r"^[−+\-–—≈≤≥<>~]?\s?[\d.,]+(\s|%|×|x|$)|^—$")


def _inline(text: str) -> str:
    """Escaped text with Markdown's inline forms rendered: ``code``, **strong**, *emphasis*, [label](href)."""
    codes: list[str] = []

    def keep(m: re.Match) -> str:  # code spans are literal: no emphasis or links inside
        codes.append(f"<code>{m.group(1)}</code>")
        return f"\x00{len(codes) - 1}\x00"

    out = _CODE.sub(keep, html.escape(text, quote=False))
    out = _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', out)
    out = _EM.sub(r"<em>\1</em>", _STRONG.sub(r"<strong>\1</strong>", out))
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], out)


def _td(tag: str, text: str) -> str:
    """A table cell: numbers right-aligned, text left-aligned."""
    cls = ' class="num"' if tag == "td" and _NUMBER.match(text.strip()) else ""
    return f"<{tag}{cls}>{_inline(text.strip())}</{tag}>"


def md_to_html(title: str, md: str) -> str:
    """Minimal Markdown (headings, pipe tables, bullet lists, indented code, images, links, ``code``, **strong**,
    *emphasis*, paragraphs) → HTML; table cells with numbers are right-aligned, text left-aligned."""
    out, table, items, pre = [], [], [], []

    def flush() -> None:
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= {"-"}]
            cells = [_row_cells(r) for r in rows]
            out.append(
                "<table>"
                + "".join(
                    "<tr>" + "".join(_td("th" if i == 0 else "td", c) for c in row) + "</tr>"
                    for i, row in enumerate(cells)
                )
                + "</table>"
            )
            table.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if pre:
            out.append("<pre>" + html.escape("\n".join(pre)) + "</pre>")
            pre.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        if line.startswith("    ") and line.strip():
            pre.append(line[4:])
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("![") and "](" in line:
            alt, src = line[2:].split("](", 1)
            out.append(f'<img alt="{html.escape(alt)}" src="{html.escape(src.rstrip(")"))}">')
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush()
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;max-width:80em;margin:2em auto;line-height:1.4}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #999;padding:2px 8px;"
        "text-align:left;vertical-align:top}th{background:#eee}td.num{text-align:right;white-space:nowrap}"
        "img{max-width:100%}code,pre{background:#f4f4f4}pre{padding:.5em;white-space:pre-wrap}"
        "</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n"
    )


#: what the "rests on" column of every claims table says (:func:`analysis.verdicts.budget_label`)
RESTS_ON_NOTE = (
    'The "rests on" column says what each verdict rests on: "early training (k of N epochs)" when its runs trained '
    "k of the paper's N epochs (or iterations), counted apart from the verdicts at the paper's budget; "
    '"simulation" for a claim about the schedule or the cost model (no training); "no runs" (in the counts, "—" '
    "beside a claim) for a learning claim no run decides."
)


def claims_md(claims: Sequence[Claim]) -> str:
    """The "Claims" section: the rule, then one row per claim (ours marked, not counted) with what its verdict rests
    on (early training with its "k of N epochs", the paper's budget, simulation)."""
    rows = [
        [("*ours, not counted:* " if c.ours else "") + c.text, c.verdict, budget_label(c), c.numbers] for c in claims
    ]
    return (
        "## Claims\n\n"
        + RULE
        + " "
        + RESTS_ON_NOTE
        + "\n\n"
        + md_table(["claim (paper)", "verdict", "rests on", "deciding numbers"], rows)
    )


def savefig(fig, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None})


@contextmanager
def figure(path: Path, nrows: int = 1, ncols: int = 1, **subplots: Any) -> Iterator[Any]:
    """The axes of ``plt.subplots`` on the Agg backend; the figure is laid out, saved to ``path`` without a
    timestamp (so a rebuild is byte-identical) and closed on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, **subplots)
    try:
        yield axes
        fig.tight_layout()
        savefig(fig, path)
    finally:
        plt.close(fig)


def error_axis(ax: Any, min_span: float = 10.0) -> None:
    """A test-error axis in %: at least ``min_span`` pp tall within [0, 100], without offset notation. A run stuck
    at chance is a flat line at 90 % whose float noise (1e-6 pp) autoscaling would blow up to the whole panel, with
    ticks read as "1e-6 + 89.99999"."""
    lo, hi = ax.get_ylim()
    if hi - lo < min_span:
        mid = min(max((lo + hi) / 2, min_span / 2), 100 - min_span / 2)
        lo, hi = mid - min_span / 2, mid + min_span / 2
    ax.set_ylim(lo, hi)
    ax.ticklabel_format(axis="y", useOffset=False)


def legend(ax: Any, **kwargs: Any) -> None:
    """``ax.legend(**kwargs)`` where some artist has a label: a panel without runs gets no empty legend (and no
    matplotlib warning)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


PROVENANCE = {  # MLflow tag → what the page calls it
    "psbench.version": "psbench",
    "psbench.torch_version": "torch",
    "psbench.lightning_version": "lightning",
    "psbench.mlflow_version": "mlflow",
    "psbench.host": "host",
    "psbench.threads": "threads",
}


def _counted(values: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    ranked = sorted(counts.items(), key=lambda x: (-x[1], x[0]))
    return ", ".join(f"{v} ({n} run{'s' if n != 1 else ''})" for v, n in ranked)


def provenance_md(runs: Sequence[Run]) -> str:
    """The "Provenance" section: distinct code versions, library versions, hosts and threads of ``runs``
    (MLflow tags ``psbench.*``; a run from before those tags shows "unknown")."""
    runs = sorted(runs, key=lambda r: r.run_id)
    md = "## Provenance\n\n"
    if not runs:
        return md + "No runs.\n"
    untagged = sum(not r.tags.get("scale") for r in runs)

    def commit(r: Run) -> str:
        """The commit a run started under, then each one a resume continued it under (``a → b``)."""
        c, dirty = r.tags.get("psbench.git_commit"), r.tags.get("psbench.git_dirty")
        states = [(c, dirty)]
        for ch in recorded(r.tags):
            if "git_commit" in ch or "git_dirty" in ch:
                c, dirty = ch.get("git_commit", c), ch.get("git_dirty", dirty)
                states.append((c, dirty))
        return " → ".join((c[:7] + ("-dirty" if d == "true" else "")) if c else "unknown" for c, d in states)

    lines = [
        f"- runs: {len(runs)}" + (f" ({untagged} without a scale tag: not counted in any scale)" if untagged else ""),
        f"- commit: {_counted(commit(r) for r in runs)}",
    ]
    lines += [f"- {name}: {_counted(r.tags.get(tag) or 'unknown' for r in runs)}" for tag, name in PROVENANCE.items()]
    lines.append(f"- data: {_counted(data_note(r) or 'unknown' for r in runs)}")
    resumed = [
        f"{r.run_id[:8]} from update {ch['update']:,}: "
        + ", ".join(_changed(k, v) for k, v in ch.items() if k != "update")
        for r in runs
        for ch in recorded(r.tags)
    ]
    if resumed:
        lines.append(
            "- resumed under other code, libraries, host or threads (the lines above count what each run started "
            "with, its host where it ran last): " + "; ".join(resumed)
        )
    return md + "\n".join(lines) + "\n"


def _changed(key: str, value: Any) -> str:
    if value is None:
        value = "unknown"
    elif key == "git_commit":
        value = str(value)[:7]
    return f"{'commit' if key == 'git_commit' else PROVENANCE.get('psbench.' + key, key.replace('_', ' '))} {value}"
