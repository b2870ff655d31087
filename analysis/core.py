"""What every report page shares: reading runs from MLflow, mean ± std, Markdown/HTML, the :class:`Page` spec.

A page module lives in ``analysis/pages/`` and declares ``ORDER`` (its place in the index) and
``PAGES`` (one :class:`Page` per table/figure of its paper, with a builder or the reason it has none).
"""

from __future__ import annotations

import html
import json
import math
import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    """FINISHED job runs of ``experiment`` (sweep parents left out); for one (table, scale, case, seed) the latest
    run wins."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=1000,
                                  page_token=token)
        runs += [Run(r.info.run_id, dict(r.data.tags), dict(r.data.params), run_metrics(r.data.metrics),
                     r.info.start_time) for r in page if r.data.tags.get("psbench.sweep_parent") != "true"]
        token = page.token
        if not token:
            break
    latest: dict[tuple, Run] = {}
    for r in sorted(runs, key=lambda r: (r.start_time, r.run_id)):
        key = (r.tags.get("paper"), r.tags.get("table"), r.tags.get("figure"), r.tags.get("scale"),
               r.tags.get("case"), r.params.get("seed"))
        latest[key] = r
    return sorted(latest.values(), key=lambda r: (r.tags.get("case", ""), r.params.get("seed", ""), r.run_id))


def run_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """A run's metrics by name, its totals first: ``summary/<key>`` (psbench logs summary.json's numbers
    apart from the per-update series) is read as ``<key>``; runs without them keep their latest values."""
    prefix = "summary/"
    out = {k: v for k, v in metrics.items() if not k.startswith(prefix)}
    out.update({k[len(prefix):]: v for k, v in metrics.items() if k.startswith(prefix)})
    return out


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


def savefig(fig, path: Path) -> None:
    fig.savefig(path, dpi=90, metadata={"Software": None})


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


def scales_of(runs: Iterable[Run]) -> list[str]:
    order = {"ci": 0, "small": 1, "paper": 2}
    return sorted({r.tags.get("scale", "?") for r in runs}, key=lambda s: (order.get(s, 9), s))


# --------------------------------------------------------------------------- page spec
@dataclass(frozen=True)
class Context:
    """What a page builder reads: the runs of the store, the report dir, the tracking URI (for artifacts)."""

    runs: list[Run]
    out: Path
    tracking_uri: str


@dataclass(frozen=True)
class Page:
    """One table/figure of a paper: ``build(ctx) -> (status, markdown)`` writes ``<key>.md/.html``; a page
    without a builder shows ``reason`` as its status in the index (never invented numbers)."""

    paper: str
    item: str
    key: str = ""
    build: Callable[[Context], tuple[str, str]] | None = None
    reason: str = ""


def verdict(ok: bool | None) -> str:
    """holds / does not hold / not measured (``None``)."""
    return NOT_MEASURED if ok is None else HOLDS if ok else FAILS
