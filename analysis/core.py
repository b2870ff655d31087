"""What every report page shares: reading runs from MLflow, metric curves, mean ± std (n), Markdown/HTML,
the :class:`Page` spec and the one rule that turns what a page shows into its status in the index.

A page module lives in ``analysis/pages/`` and declares ``ORDER`` (its place in the index) and
``PAGES`` (one :class:`Page` per table/figure of its paper, with a builder or the reason it has none).
A builder returns a :class:`Shown` (per scale, which of the table's configurations have runs; its
claims and the runs it read) and its Markdown; :func:`status` alone decides what the index says.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOLDS, FAILS, NOT_MEASURED = "holds", "does not hold", "not measured"
NO_RUNS = ("\nNo runs of a scale in the store (a run without a scale tag, e.g. an ad-hoc run of the preset, "
           "is not counted).\n")


# --------------------------------------------------------------------------- reading MLflow
@dataclass
class Run:
    run_id: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    start_time: int
    summary: dict[str, Any] = field(default_factory=dict)
    #: (step, timestamp) at which the run summary was logged (under the same keys as per-update values), if known
    summary_at: tuple[int, int] | None = None


#: keys only the run summary logs: where they sit is where the summary's copies of per-update keys sit
SUMMARY_ONLY = ("ps_updates", "epochs_done")


def _summary_at(metrics: Iterable[Any]) -> tuple[int, int] | None:
    at = {m.key: (int(m.step), int(m.timestamp)) for m in metrics}
    return next((at[k] for k in SUMMARY_ONLY if k in at), None)


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
                     r.info.start_time, summary_at=_summary_at(getattr(r.data, "_metric_objs", ())))  # step, time
                 for r in page if r.data.tags.get("psbench.sweep_parent") != "true"]
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


def history(tracking_uri: str, run: Run, key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of a metric as training logged it, one value per step (the last), by step.

    psbench logs the run summary under the same keys as the per-update values (``train_loss``,
    ``sim_time_s``, ``test_error``, …): at step 0 in older stores, at the last update's step since. That copy
    is a total, not a point of the curve (a final ``train_loss`` of 3.08 after 0.27), so the value logged at
    the summary's (step, timestamp) — found from keys only the summary logs, :data:`SUMMARY_ONLY` — is left
    out. A store whose summary uses keys of its own has no such copy, and nothing is left out.
    """
    from mlflow import MlflowClient

    pts = sorted((m.step, m.timestamp, m.value) for m in MlflowClient(tracking_uri).get_metric_history(run.run_id, key))
    copy = [i for i, (s, t, _) in enumerate(pts) if (s, t) == run.summary_at]
    if copy:
        del pts[copy[-1]]
    return sorted({s: v for s, _, v in pts}.items())


def select(runs: Iterable[Run], **tags: str) -> list[Run]:
    return [r for r in runs if all(r.tags.get(k) == v for k, v in tags.items())]


# --------------------------------------------------------------------------- formatting
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


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text: str) -> str:
    """Escaped text with ``[label](href)`` links as anchors."""
    return _LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', html.escape(text, quote=False))


def md_to_html(title: str, md: str) -> str:
    """Minimal Markdown (headings, pipe tables, bullet lists, images, links, paragraphs) → HTML."""
    out, table, items = [], [], []

    def flush() -> None:
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= {"-"}]
            cells = [[_inline(c.strip()) for c in r.strip().strip("|").split("|")] for r in rows]
            out.append("<table>" + "".join(
                "<tr>" + "".join(f"<{'th' if i == 0 else 'td'}>{c}</{'th' if i == 0 else 'td'}>" for c in row)
                + "</tr>" for i, row in enumerate(cells)) + "</table>")
            table.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
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
            out.append(f"<p>{_inline(line)}</p>")
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


_SCALE_ORDER = {"ci": 0, "small": 1, "paper": 2}


def scales_of(runs: Iterable[Run]) -> list[str]:
    """The ``scale`` tags of ``runs``, ci → small → paper; a run without one (an ad-hoc run) has no scale."""
    return sorted({r.tags["scale"] for r in runs if r.tags.get("scale")}, key=lambda s: (_SCALE_ORDER.get(s, 9), s))


def preset_cases(experiment: str) -> list[str]:
    """The case labels of ``psbench/conf/experiment/<experiment>.yaml``'s sweep: the configurations of its table."""
    import yaml

    from psbench.cli import CONF_DIR

    conf = CONF_DIR / "experiment" / f"{experiment}.yaml"
    return list(((yaml.safe_load(conf.read_text()).get("hydra") or {}).get("sweeper") or {}).get("cases") or [])


def coverage(runs: Iterable[Run], configs: Iterable[str], key: Callable[[Run], str | None] | None = None,
             measured: Callable[[Run], bool] | None = None) -> dict[str, tuple[int, int]]:
    """``{scale: (configurations with a measured run, configurations)}`` over the scale-tagged ``runs``.

    A run counts for the configuration ``key(run)`` (default its ``case`` tag) when ``measured(run)``
    (default: always); runs of other labels count for nothing.
    """
    want = set(configs)
    key = key or (lambda r: r.tags.get("case"))
    runs = list(runs)
    out = {}
    for scale in scales_of(runs):
        got = {key(r) for r in runs if r.tags.get("scale") == scale and (measured is None or measured(r))}
        out[scale] = (len(got & want), len(want))
    return out


# --------------------------------------------------------------------------- page spec
@dataclass(frozen=True)
class Context:
    """What a page builder reads: the runs of the store, the report dir, the tracking URI (for artifacts)."""

    runs: list[Run]
    out: Path
    tracking_uri: str


@dataclass(frozen=True)
class Shown:
    """What a page shows, the only input of its index :func:`status`.

    ``configs``: per scale, (configurations of the table with measured runs, configurations of the table);
    ``claims``: (claim, verdict, deciding numbers), rendered by the report below the page's Markdown;
    ``runs``: the runs the page read (their provenance is printed); ``command``: the sweep that makes the
    runs; ``note``: what the status adds (simulation only, data not available); a page with neither configs
    nor command (analytic, or needing data not here) has ``note`` as its status, with its claims' count.
    """

    configs: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    claims: Sequence[tuple[str, str, str]] = ()
    runs: Sequence[Run] = ()
    command: str = ""
    note: str = ""


def status(shown: Shown) -> str:
    """The index's line for a page: "reproduced at scale X" only when every configuration of scale X has
    measured runs and every claim was decided; "no runs", "partial (k of N …)" or "measured at scale X,
    k of M claims not decided" otherwise."""
    claims = list(shown.claims)
    undecided = sum(c[1] == NOT_MEASURED for c in claims)
    verdicts = (f"{undecided} of {len(claims)} claims not decided" if undecided else "no claims decided"
                if not claims else f"{sum(c[1] == HOLDS for c in claims)} of {len(claims)} claims hold")
    note = f"; {shown.note}" if shown.note else ""
    if not shown.configs and not shown.command:
        return shown.note + (f": {verdicts}" if claims else "")
    seen = sorted(((s, kn) for s, kn in shown.configs.items() if kn[0] > 0),
                  key=lambda x: (_SCALE_ORDER.get(x[0], 9), x[0]))
    if not seen:
        return f"no runs ({shown.command})" + note
    full = ", ".join(s for s, (k, n) in seen if k >= n)
    part = "; ".join(f"{k} of {n} configurations at scale {s}" for s, (k, n) in seen if k < n)
    if not full:
        return f"partial ({part})" + note
    text = (f"reproduced at scale {full}: {verdicts}" if claims and not undecided
            else f"measured at scale {full}, {verdicts}")
    return text + (f"; partial ({part})" if part else "") + note


PROVENANCE = {  # MLflow tag → what the page calls it
    "psbench.version": "psbench", "psbench.torch_version": "torch", "psbench.lightning_version": "lightning",
    "psbench.mlflow_version": "mlflow", "psbench.host": "host", "psbench.threads": "threads"}


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
        c = r.tags.get("psbench.git_commit")
        if not c:
            return "unknown"
        return c[:7] + ("-dirty" if r.tags.get("psbench.git_dirty") == "true" else "")

    lines = [f"- runs: {len(runs)}" + (f" ({untagged} without a scale tag: not counted in any scale)"
                                       if untagged else ""),
             f"- commit: {_counted(commit(r) for r in runs)}"]
    lines += [f"- {name}: {_counted(r.tags.get(tag) or 'unknown' for r in runs)}" for tag, name in PROVENANCE.items()]
    return md + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Page:
    """One table/figure of a paper: ``build(ctx) -> (Shown, markdown)`` writes ``<key>.md/.html`` (the report
    adds a link to the index, the claims and the provenance); a page without a builder shows ``reason`` as
    its status in the index (never invented numbers)."""

    paper: str
    item: str
    key: str = ""
    build: Callable[[Context], tuple[Shown, str]] | None = None
    reason: str = ""


def verdict(ok: bool | None) -> str:
    """holds / does not hold / not measured (``None``)."""
    return NOT_MEASURED if ok is None else HOLDS if ok else FAILS
