"""What every report page shares: reading runs from MLflow, metric curves, mean ± std (n), Markdown/HTML,
the :class:`Page` spec and the one rule that turns what a page shows into its status in the index.

A page module lives in ``analysis/pages/`` and declares ``ORDER`` (its place in the index) and
``PAGES`` (one :class:`Page` per table/figure of its paper, with a builder or the reason it has none).
A builder returns a :class:`Shown` (per scale, which of the table's configurations have runs; its
claims and the runs it read) and its Markdown; :func:`status` alone decides what the index says.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import os
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

HOLDS, FAILS, NOT_MEASURED, NOT_RESOLVABLE = "holds", "does not hold", "not measured", "not resolvable"
UNDETERMINED = "undetermined within the model's error"
#: every verdict, in the order the counts show them
VERDICTS = (HOLDS, FAILS, NOT_RESOLVABLE, UNDETERMINED, NOT_MEASURED)
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

    psbench logs a run's summary as ``summary/<key>`` metrics, apart from the series. Older stores have it
    under the per-update keys themselves (``train_loss``, ``sim_time_s``, ``test_error``, …), at step 0 or at
    the last update's step. That copy is a total, not a point of the curve (a final ``train_loss`` of 3.08
    after 0.27), so the value logged at the summary's (step, timestamp) — found from keys only the summary
    logs, :data:`SUMMARY_ONLY` — is left out; a ``summary/<key>`` store has no copy and nothing is left out.
    """
    from mlflow import MlflowClient

    pts = sorted((m.step, m.timestamp, m.value) for m in MlflowClient(tracking_uri).get_metric_history(run.run_id, key))
    copy = [i for i, (s, t, _) in enumerate(pts) if (s, t) == run.summary_at]
    if copy:
        del pts[copy[-1]]
    return sorted({s: v for s, _, v in pts}.items())


def epoch_means(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The per-epoch means of an ``(epoch, value)`` series logged per update: epoch k holds the points with
    k − 1 < epoch ≤ k (a point at epoch 0 counts in the first) and is drawn at its middle, k − 0.5; non-finite
    values (a diverged loss) are left out."""
    by_epoch: dict[int, list[float]] = {}
    for e, v in points:
        if math.isfinite(v):
            by_epoch.setdefault(max(1, math.ceil(e - 1e-9)), []).append(v)
    return [(k - 0.5, statistics.fmean(vs)) for k, vs in sorted(by_epoch.items())]


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
            cells = [r.strip().strip("|").split("|") for r in rows]
            out.append("<table>" + "".join(
                "<tr>" + "".join(_td("th" if i == 0 else "td", c) for c in row) + "</tr>"
                for i, row in enumerate(cells)) + "</table>")
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
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:80em;margin:2em auto;line-height:1.4}"
            "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #999;padding:2px 8px;"
            "text-align:left;vertical-align:top}th{background:#eee}td.num{text-align:right;white-space:nowrap}"
            "img{max-width:100%}code,pre{background:#f4f4f4}pre{padding:.5em;white-space:pre-wrap}"
            "</style></head><body>\n"
            + "\n".join(out) + "\n</body></html>\n")


def claims_md(claims: Sequence[Claim]) -> str:
    """The "Claims" section: the rule, then one row per claim (ours marked, not counted)."""
    rows = [[("*ours, not counted:* " if c.ours else "") + c.text, c.verdict, c.numbers] for c in claims]
    return "## Claims\n\n" + RULE + "\n\n" + md_table(["claim (paper)", "verdict", "deciding numbers"], rows)


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


SCALE_ORDER = {"ci": 0, "small": 1, "paper": 2}


def scales_of(runs: Iterable[Run]) -> list[str]:
    """The ``scale`` tags of ``runs``, ci → small → paper; a run without one (an ad-hoc run) has no scale."""
    return sorted({r.tags["scale"] for r in runs if r.tags.get("scale")}, key=lambda s: (SCALE_ORDER.get(s, 9), s))


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
    claims: Sequence[Claim] = ()
    runs: Sequence[Run] = ()
    command: str = ""
    note: str = ""


def status(shown: Shown) -> str:
    """The index's line for a page: "reproduced at scale X" only when every configuration of scale X has
    measured runs and every claim was decided; "no runs", "partial (k of N …)" or "measured at scale X,
    k of M claims not decided" otherwise."""
    claims = [c for c in shown.claims if not c.ours]  # ours are shown, never counted
    undecided = sum(c.verdict not in (HOLDS, FAILS) for c in claims)
    verdicts = (f"{undecided} of {len(claims)} claims not decided" if undecided else "no claims decided"
                if not claims else f"{sum(c.verdict == HOLDS for c in claims)} of {len(claims)} claims hold")
    note = f"; {shown.note}" if shown.note else ""
    if not shown.configs and not shown.command:
        return shown.note + (f": {verdicts}" if claims else "")
    seen = sorted(((s, kn) for s, kn in shown.configs.items() if kn[0] > 0),
                  key=lambda x: (SCALE_ORDER.get(x[0], 9), x[0]))
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




# --------------------------------------------------------------------------- the verdict rule
# Every claim of every page is a :class:`Claim` made by one of the functions below; no page writes a verdict.
#
# * A learning claim is decided only on runs that learned: a test error at least LEARN_MARGIN below chance
#   (1 − 1/classes of the data set), and only when the difference it asserts is outside the noise: each
#   configuration has ≥ MIN_SEEDS seeds and the difference of two means is compared with two standard
#   errors, SE² = Σ (seed variance / n + p(1 − p) / test images) — the seeds' spread plus the test set's
#   own sampling noise. Otherwise it is "not measured" (too few seeds, nothing learned, a premise missing)
#   or "not resolvable" (the difference, or the claim's tolerance, is inside the noise).
# * A claim the paper did not make is ours: shown with its verdict, never counted.
# * A conditional claim needs its premise to hold.
# * A tail claim P(x) < b needs enough samples: held only when the 95 % Clopper–Pearson upper bound of the
#   measured rate is below b (≈ 3/b samples with no event), failed when the lower bound is above it.
# * A simulation claim (schedule, cost model: deterministic) is decided on its numbers as they are.
# * A cost-model prediction of a claimed range is a band: the model over the choices the papers leave open,
#   widened by the model's own measured error on published timings it was not fitted to. It holds when the
#   band lies inside the range, fails when the band lies wholly outside, and is otherwise "undetermined
#   within the model's error".
MIN_SEEDS = 3
LEARN_MARGIN = 0.05
#: classes and test images of each data set (the test set's size sets its noise)
DATASETS = {"cifar10": (10, 10_000), "cifar10_subset": (10, 1_017), "mnist": (10, 10_000),
            "fashion_mnist": (10, 10_000), "digits": (10, 360)}
RULE = (f"Verdict rule (every page): a claim about learning is decided only on runs that learned (test error ≥ "
        f"{LEARN_MARGIN * 100:g} pp below chance, 1 − 1/classes) with ≥ {MIN_SEEDS} seeds per configuration, and a "
        "difference counts only outside mean ± 2 SE (SE² = seed variance / n + p(1 − p) / test images, per "
        "configuration); otherwise \"not measured\" or \"not resolvable\", with the reason. Claims marked *ours* "
        "are psbench's, not the paper's, and are not counted; a conditional claim needs its premise; a tail "
        "probability P < b needs its 95 % upper bound below b (≈ 3/b samples). A cost-model prediction of a claimed "
        "range is a band (the model over the choices the papers leave open, widened by its own measured error on "
        "published timings it was not fitted to): held when the band lies inside the range, failed when wholly "
        f"outside, otherwise \"{UNDETERMINED}\".")


class Claim(NamedTuple):
    """One row of a page's claims: the claim, its verdict, the numbers that decided it; ``ours``: not the
    paper's claim (shown, not counted)."""

    text: str
    verdict: str
    numbers: str
    ours: bool = False
    #: "learning" (decided on trained runs, by the rule), "simulation" (schedule or cost model), "tail"
    kind: str = "learning"
    #: seeds per configuration of a learning claim ("3", "1–3"); "" where seeds do not enter
    seeds: str = ""
    #: the scale it was decided at ("" : the page's largest measured scale)
    scale: str = ""


@dataclass(frozen=True)
class Errors:
    """One configuration's final errors (fractions, lower is better), one per seed.

    ``chance`` is the error of guessing (1 − 1/classes); ``images`` the test-set size (its sampling noise
    enters the standard error), None for a training metric averaged over many batches.
    """

    label: str
    values: tuple[float, ...]
    chance: float = 0.9
    images: int | None = None
    #: learned when the mean is at most this (default chance − LEARN_MARGIN)
    bar: float | None = None
    #: "%" for error fractions; "" for losses (nats)
    unit: str = "%"

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def learned_at(self) -> float:
        return self.chance - LEARN_MARGIN if self.bar is None else self.bar

    @property
    def learned(self) -> bool:
        return self.mean <= self.learned_at

    def fmt(self, x: float) -> str:
        return f"{x * 100:.2f}%" if self.unit == "%" else f"{x:.4g}"

    def diff(self, x: float) -> str:
        return f"{x * 100:.2f} pp" if self.unit == "%" else f"{x:.4g}"

    @property
    def var(self) -> float:
        """Variance of the mean: seeds' spread / n plus the test set's binomial noise."""
        seeds = statistics.variance(self.values) / self.n if self.n > 1 else 0.0
        p = min(max(self.mean, 0.0), 1.0)
        return seeds + (p * (1 - p) / self.images if self.images else 0.0)

    def __str__(self) -> str:
        return f"{self.label} {self.fmt(self.mean)} (n={self.n})"


def errors(label: str, values: Iterable[float | None], dataset: str | None = None, *,
           classes: int | None = None, images: int | None = None) -> Errors | None:
    """:class:`Errors` of the finite ``values`` (test errors of one configuration's seeds) on ``dataset`` (its
    classes and test images from :data:`DATASETS`, or given); None when no value is finite."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    k, m = DATASETS.get(dataset or "", (10, None))
    return Errors(label, vals, 1 - 1 / (classes or k), images if images is not None else m)


def run_errors(label: str, runs: Iterable[Run], key: str = "test_error") -> Errors | None:
    """:func:`errors` of ``key`` over ``runs``; a diverged run counts as chance (it learned nothing)."""
    runs = list(runs)
    ds = next((r.tags.get("dataset") or r.params.get("dataset.name") for r in runs), None)
    chance = 1 - 1 / DATASETS.get(ds or "", (10, 0))[0]
    vals = [chance if _diverged(r) else r.metrics.get(key) for r in runs]
    return errors(label, vals, ds)


def _diverged(r: Run) -> bool:
    return (r.tags.get("diverged") == "true" or r.metrics.get("diverged", 0.0) >= 1.0
            or (r.summary or {}).get("diverged") is True)


def _premise(premise: Claim) -> str:
    """Why a claim with an undecided or failed premise is not measured: "its premise "…" does not hold"."""
    return f"its premise \"{premise.text}\" {'is ' + premise.verdict if premise.verdict != FAILS else FAILS}"


def _gate(groups: Sequence[Errors | None], must_learn: Sequence[Errors | None], premise: Claim | None,
          labels: Sequence[str]) -> str | None:
    """Why a learning claim cannot be decided (None: it can)."""
    why = []
    if premise is not None and premise.verdict != HOLDS:
        why.append(_premise(premise))
    missing = [lab for lab, g in zip(labels, groups, strict=True) if g is None]
    if missing:
        why.append("no runs of " + ", ".join(missing))
    few = [g for g in groups if g is not None and g.n < MIN_SEEDS]
    if few:
        why.append(", ".join(f"{g.label} has {g.n} seed{'s' if g.n != 1 else ''}" for g in few)
                   + f" (the rule needs ≥ {MIN_SEEDS})")
    flat = [g for g in must_learn if g is not None and not g.learned]
    if flat:
        why.append(", ".join(f"{g.label} {g.fmt(g.mean)}" for g in flat)
                   + f" did not learn (chance {flat[0].fmt(flat[0].chance)}, learned ≤ "
                   f"{flat[0].fmt(flat[0].learned_at)})")
    return "; ".join(why) or None


def _span(ns: Iterable[int]) -> str:
    ns = sorted(set(ns))
    return "" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


def _seeds(groups: Iterable[Errors | None]) -> str:
    """Seeds per configuration of ``groups`` ("3", "1–3")."""
    return _span(g.n for g in groups if g is not None)


def _two_se(*gs: Errors) -> float:
    return 2 * math.sqrt(sum(g.var for g in gs))


def _shown(groups: Sequence[Errors | None]) -> str:
    return ", ".join(str(g) for g in groups if g is not None)


def lower(text: str, a: Errors | None, b: Errors | None, *, premise: Claim | None = None, ours: bool = False,
          labels: Sequence[str] = ("a", "b")) -> Claim:
    """"``a``'s error is lower than ``b``'s": held when b − a > 2 SE, failed when a − b > 2 SE; ``a`` (the
    configuration claimed better) must have learned."""
    why = _gate([a, b], [a], premise, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown([a, b])}; {why}".lstrip("; "), ours, seeds=_seeds([a, b]))
    assert a is not None and b is not None
    d, noise = b.mean - a.mean, _two_se(a, b)
    v = HOLDS if d > noise else FAILS if -d > noise else NOT_RESOLVABLE
    return Claim(text, v, f"{a}, {b}: difference {a.diff(d)}, 2 SE {a.diff(noise)}"
                 + (" (inside the noise)" if v == NOT_RESOLVABLE else ""), ours, seeds=_seeds([a, b]))


def increasing(text: str, series: Sequence[Errors | None], *, ours: bool = False,
               labels: Sequence[str] = ()) -> Claim:
    """Errors increase along ``series``: every neighbour pair :func:`lower`; failed if one pair is decided the
    other way, not resolvable if a pair is inside the noise; the lowest must have learned."""
    labels = list(labels) or [f"#{i}" for i in range(len(series))]
    why = _gate(series, [min((g for g in series if g), key=lambda g: g.mean, default=None)], None, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown(series)}; {why}".lstrip("; "), ours, seeds=_seeds(series))
    pairs = [lower("", a, b) for a, b in itertools.pairwise(series)]
    vs = [p.verdict for p in pairs]  # a pair whose lower member did not learn is not measured: so is the claim
    v = (FAILS if FAILS in vs else NOT_MEASURED if NOT_MEASURED in vs else NOT_RESOLVABLE if NOT_RESOLVABLE in vs
         else HOLDS)
    steps = "; ".join(p.numbers.split(": ", 1)[1] if p.verdict != NOT_MEASURED else p.numbers for p in pairs)
    return Claim(text, v, f"{_shown(series)}; steps: {steps}", ours, seeds=_seeds(series))


def equal(text: str, groups: Sequence[Errors | None], tol: float, *, premise: Claim | None = None,
          ours: bool = False, labels: Sequence[str] = ()) -> Claim:
    """The errors of ``groups`` differ by at most ``tol`` (a fraction): held when the spread plus 2 SE is within
    ``tol``, failed when the spread minus 2 SE exceeds it, otherwise not resolvable; all must have learned
    (equal at chance says nothing)."""
    labels = list(labels) or [g.label if g else f"#{i}" for i, g in enumerate(groups)]
    why = _gate(groups, groups, premise, labels)
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown(groups)}; {why}".lstrip("; "), ours, seeds=_seeds(groups))
    gs = [g for g in groups if g is not None]
    hi, lo = max(gs, key=lambda g: g.mean), min(gs, key=lambda g: g.mean)
    spread, noise = hi.mean - lo.mean, _two_se(hi, lo)
    v = HOLDS if spread + noise <= tol else FAILS if spread - noise > tol else NOT_RESOLVABLE
    reason = (f"; not resolvable with this test set: 2 SE {hi.diff(noise)} vs the claim's {hi.diff(tol)}"
              if v == NOT_RESOLVABLE else "")
    return Claim(text, v, f"{_shown(gs)}: spread {hi.diff(spread)}, 2 SE {hi.diff(noise)}{reason}", ours,
                 seeds=_seeds(groups))


def at_chance(text: str, a: Errors | None, reference: Sequence[Errors | None], *, ours: bool = False,
              labels: Sequence[str] = ("a",)) -> Claim:
    """"``a`` fails to learn": held when ``a`` is at chance (not learned) while a ``reference`` run learned,
    failed when ``a`` learned beyond 2 SE; undecided when no reference learned (vacuous)."""
    refs = [g for g in reference if g is not None]
    why = _gate([a, *refs], [], None, [labels[0], *(g.label for g in refs)])
    if not why and not any(g.learned for g in refs):
        why = "no reference run learned (" + _shown(refs) + "): failing to learn says nothing"
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown([a])}; {why}".lstrip("; "), ours, seeds=_seeds([a, *refs]))
    assert a is not None
    bar, noise = a.learned_at, _two_se(a)
    v = HOLDS if a.mean >= bar else FAILS if a.mean + noise < bar else NOT_RESOLVABLE
    return Claim(text, v, f"{a} vs learned ≤ {a.fmt(bar)} (2 SE {a.diff(noise)}); reference "
                 + _shown([g for g in refs if g.learned]), ours, seeds=_seeds([a, *refs]))


def near(text: str, a: Errors | None, target: float, tol: float, *, ours: bool = False) -> Claim:
    """``a``'s error is within ``tol`` of ``target`` (fractions), noise as in :func:`equal`."""
    why = _gate([a], [a], None, ["a"])
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown([a])}; {why}".lstrip("; "), ours, seeds=_seeds([a]))
    assert a is not None
    d, noise = abs(a.mean - target), _two_se(a)
    v = HOLDS if d + noise <= tol else FAILS if d - noise > tol else NOT_RESOLVABLE
    return Claim(text, v, f"{a} vs {a.fmt(target)}: |Δ| {a.diff(d)}, 2 SE {a.diff(noise)}", ours, seeds=_seeds([a]))


def no_worse(text: str, pairs: Sequence[tuple[Errors | None, Errors | None]], tol: float, *,
             ours: bool = False, labels: Sequence[str] = ()) -> Claim:
    """For every (a, ref) pair, ``a``'s error is at most ``ref``'s + ``tol``: a pair holds when a − ref + 2 SE ≤
    tol, fails when a − ref − 2 SE > tol; held when all hold, failed when one fails, else not resolvable.
    Both of each pair must have learned."""
    flat = [g for pair in pairs for g in pair]
    labels = list(labels) or [g.label if g else f"#{i}" for i, g in enumerate(flat)]
    why = _gate(flat, flat, None, labels) if pairs else "no pairs measured"
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown(flat)}; {why}".lstrip("; "), ours, seeds=_seeds(flat))
    out, vs = [], []
    for a, ref in pairs:
        assert a is not None and ref is not None
        d, noise = a.mean - ref.mean, _two_se(a, ref)
        vs.append(HOLDS if d + noise <= tol else FAILS if d - noise > tol else NOT_RESOLVABLE)
        out.append(f"{a.label} − {ref.label} {a.diff(d)} ± {a.diff(noise)}")
    v = FAILS if FAILS in vs else NOT_RESOLVABLE if NOT_RESOLVABLE in vs else HOLDS
    reason = (f"; not resolvable with this test set: the claim's {flat[0].diff(tol)} is inside 2 SE"
              if v == NOT_RESOLVABLE else "")
    return Claim(text, v, "; ".join(out) + reason, ours, seeds=_seeds(flat))


def gap_lower(text: str, small: tuple[Errors | None, Errors | None], large: tuple[Errors | None, Errors | None],
              *, ours: bool = False) -> Claim:
    """The gap b − a of pair ``large`` is smaller than that of pair ``small`` by more than 2 SE (all four
    configurations learned, ≥ MIN_SEEDS seeds each)."""
    flat = [*small, *large]
    why = _gate(flat, flat, None, [g.label if g else "?" for g in flat])
    if why:
        return Claim(text, NOT_MEASURED, f"{_shown(flat)}; {why}".lstrip("; "), ours, seeds=_seeds(flat))
    (a1, b1), (a2, b2) = small, large
    assert a1 and b1 and a2 and b2
    g1, g2, noise = b1.mean - a1.mean, b2.mean - a2.mean, _two_se(a1, b1, a2, b2)
    v = HOLDS if g1 - g2 > noise else FAILS if g2 - g1 > noise else NOT_RESOLVABLE
    return Claim(text, v, f"gap {a2.diff(g2)} vs {a1.diff(g1)}, 2 SE {a1.diff(noise)}", ours, seeds=_seeds(flat))


def majority(text: str, cells: Mapping[str, Sequence[float]], above: float, *, gate: Sequence[Errors | None] = (),
             need: str = "most", unit: str = "", ours: bool = False, premise: Claim | None = None) -> Claim:
    """Per cell, a quantity measured once per seed (a ratio, a drop) lies above ``above``: a cell wins when its
    mean − 2 SE > above and loses when mean + 2 SE < above. ``need`` "most": held when more than half the
    cells win, failed when at least half lose; "all": held when all win, failed when one loses; otherwise not
    resolvable. Every cell needs ≥ MIN_SEEDS values and every ``gate`` configuration must have learned."""
    why = [] if premise is None or premise.verdict == HOLDS else [
        _premise(premise)]
    few = [k for k, v in cells.items() if len(v) < MIN_SEEDS]
    if not cells:
        why.append("no cells measured")
    if few:
        why.append(", ".join(f"{k} has {len(cells[k])} seed{'s' if len(cells[k]) != 1 else ''}" for k in few)
                   + f" (the rule needs ≥ {MIN_SEEDS})")
    g = _gate(list(gate), list(gate), None, [x.label if x else "?" for x in gate])
    why += [g] if g else []
    scale = 100.0 if unit == "pp" else 1.0
    shown = ", ".join(f"{k} {statistics.fmean(v) * scale:.3g}{unit}" for k, v in cells.items() if v)
    if why:
        return Claim(text, NOT_MEASURED, f"{shown}; {'; '.join(why)}".lstrip("; "), ours,
                     seeds=_span([len(v) for v in cells.values()]))
    wins = losses = 0
    parts = []
    for k, v in cells.items():
        m, two_se = statistics.fmean(v), 2 * statistics.stdev(v) / math.sqrt(len(v))
        wins += m - two_se > above
        losses += m + two_se < above
        parts.append(f"{k} {m * scale:.3g} ± {two_se * scale:.2g}{unit} (n={len(v)})")
    k = len(cells)
    if need == "all":
        v = HOLDS if wins == k else FAILS if losses else NOT_RESOLVABLE
    else:
        v = HOLDS if wins > k / 2 else FAILS if losses >= k / 2 else NOT_RESOLVABLE
    return Claim(text, v, f"above {above * scale:g}{unit} (mean ± 2 SE): {wins} of {k} cells, below: {losses}; "
                 + ", ".join(parts), ours,
                     seeds=_span([len(v) for v in cells.values()]))


def by_means(text: str, groups: Sequence[Errors | None], ok: bool | None, numbers: str, resolution: float, *,
             ours: bool = False) -> Claim:
    """A claim decided by a rule on the groups' means (a ranking, a top-k): only when every group learned and
    has ≥ MIN_SEEDS seeds, and when every group's 2 SE is below the rule's ``resolution`` (else not resolvable)."""
    why = _gate(groups, groups, None, [g.label if g else "?" for g in groups]) if groups else "no runs"
    if why:
        return Claim(text, NOT_MEASURED, f"{numbers}; {why}", ours, seeds=_seeds(groups))
    worst = max(_two_se(g) for g in groups if g is not None)
    if worst > resolution:
        return Claim(text, NOT_RESOLVABLE, f"{numbers}; not resolvable with this test set: 2 SE up to "
                     f"{worst * 100:.2f} pp > the rule's {resolution * 100:.2f} pp", ours, seeds=_seeds(groups))
    return Claim(text, NOT_MEASURED if ok is None else HOLDS if ok else FAILS, numbers, ours, seeds=_seeds(groups))


def learned(label: str, a: Errors | None) -> Claim:
    """The premise "``a`` learned" (a run at chance makes a claim that needs it vacuous)."""
    if a is None:
        return Claim(f"{label} learned", NOT_MEASURED, "no runs")
    return Claim(f"{label} learned", HOLDS if a.learned else FAILS, f"{a}; learned ≤ {a.fmt(a.learned_at)}")


def all_of(text: str, parts: Sequence[Claim], *, ours: bool = False) -> Claim:
    """The conjunction of ``parts``: failed if one fails, not measured if one is, not resolvable (or undetermined
    within the model's error) if one is."""
    vs = [c.verdict for c in parts]
    v = (NOT_MEASURED if not parts else FAILS if FAILS in vs else NOT_MEASURED if NOT_MEASURED in vs
         else NOT_RESOLVABLE if NOT_RESOLVABLE in vs else UNDETERMINED if UNDETERMINED in vs else HOLDS)
    numbers = "; ".join(f"{c.text}: {c.numbers}" if c.text else c.numbers for c in parts) or "—"
    return Claim(text, v, numbers, ours, parts[0].kind if parts else "learning",
                 _span(int(n) for c in parts for n in c.seeds.split("–") if n))


def simulated(text: str, ok: bool | None, numbers: str, *, premise: Claim | None = None, ours: bool = False) -> Claim:
    """A claim about the schedule or the cost model (deterministic): decided on ``ok`` as it is; None (or a
    premise that does not hold) is not measured."""
    if premise is not None and premise.verdict != HOLDS:
        return Claim(text, NOT_MEASURED, f"{numbers}; {_premise(premise)}", ours,
                     "simulation")
    return Claim(text, NOT_MEASURED if ok is None else HOLDS if ok else FAILS, numbers or "—", ours, "simulation")


def band(lo: float, hi: float, error: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """The band of a prediction: its range ``[lo, hi]`` over the choices left open, widened (never shifted) by the
    model's measured relative error (min, max) of model / published − 1: a published value is the model's
    × (1 + e), so the band reaches lo·(1 + min(e, 0)) … hi·(1 + max(e, 0))."""
    return lo * (1 + min(error[0], 0.0)), hi * (1 + max(error[1], 0.0))


def in_range(text: str, bands: Mapping[str, tuple[float, float] | None], claimed: tuple[float, float],
             numbers: str = "", *, unit: str = "", first: str = "", ours: bool = False) -> Claim:
    """A claimed range ``[lo, hi]`` (an end may be ±inf) against cost-model prediction bands (:func:`band`), one per
    cell: a cell holds when its band lies inside the range, fails when it lies wholly outside; the claim holds
    when every cell holds, fails when one fails, and is otherwise "undetermined within the model's error" (a
    band straddles an end). A missing cell leaves the claim not measured. The deciding numbers are ``first`` (the
    strongest evidence), the bands, then ``numbers``."""
    lo, hi = claimed
    missing = [k for k, b in bands.items() if b is None]
    parts, vs = [], []
    for k, b in bands.items():
        if b is None:
            continue
        v = HOLDS if lo <= b[0] and b[1] <= hi else FAILS if b[1] < lo or b[0] > hi else UNDETERMINED
        vs.append(v)
        where = ("inside" if v == HOLDS else "outside" if v == FAILS
                 else "straddles " + " and ".join(f"{e:g}{unit}" for e in (lo, hi) if b[0] < e < b[1]))
        parts.append(f"{k} [{b[0]:.3g}, {b[1]:.3g}]{unit} {where}")
    v = (NOT_MEASURED if missing or not vs else FAILS if FAILS in vs else UNDETERMINED if UNDETERMINED in vs
         else HOLDS)
    ends = " … ".join("∞" if math.isinf(e) else f"{e:g}{unit}" for e in claimed)
    head = f"band vs the claimed {ends}: " + "; ".join(parts) + (f"; no runs of {', '.join(missing)}"
                                                                  if missing else "")
    return Claim(text, v, ". ".join(x for x in (first, head, numbers) if x), ours, "simulation")


def tail(text: str, events: int, total: int, bound: float, what: str = "samples", *, ours: bool = False) -> Claim:
    """"P(event) < ``bound``" from ``events`` of ``total``: held when the 95 % Clopper–Pearson upper bound is
    below ``bound``, failed when the lower bound is above it, otherwise not resolvable with so few."""
    if total <= 0:
        return Claim(text, NOT_MEASURED, f"no {what}", ours, "tail")
    from scipy.stats import beta

    hi = 1.0 if events >= total else float(beta.ppf(0.975, events + 1, total - events))
    lo = 0.0 if events == 0 else float(beta.ppf(0.025, events, total - events + 1))
    v = HOLDS if hi < bound else FAILS if lo > bound else NOT_RESOLVABLE
    nums = f"{events} of {total} {what} = {events / total:.2e} (95 % CI {lo:.1e}–{hi:.1e})"
    if v == NOT_RESOLVABLE:
        nums += f"; not resolvable with {total} {what}: P < {bound:g} needs ≥ {math.ceil(3.7 / bound):,} with none"
    return Claim(text, v, nums, ours, "tail")


def not_measured(text: str, reason: str, *, ours: bool = False, kind: str = "learning") -> Claim:
    """A claim no run here can decide (data not available, a scale not run), with the reason."""
    return Claim(text, NOT_MEASURED, reason, ours, kind)


def at_scale(scale: str, claims: Iterable[Claim]) -> list[Claim]:
    """``claims`` decided at ``scale``, which prefixes their text (``[ci] …``)."""
    return [c._replace(text=f"[{scale}] {c.text}", scale=scale) for c in claims]


def objective(label: str, values: Iterable[float | None], classes: int) -> Errors | None:
    """A training objective (cross-entropy, nats) of one configuration's seeds: chance is ln(classes), the loss
    of guessing; learned when 10 % below it."""
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    return Errors(label, vals, math.log(classes), None, 0.9 * math.log(classes), "") if vals else None
