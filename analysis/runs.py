"""The runs a report reads: FINISHED job runs of the MLflow store (:func:`load_runs`), their metrics with the run
summary's totals first, their ``summary.json`` artifacts and metric histories, and the selections pages make of them
(by tags, by ``scale``). Nothing here writes to the store.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


def load_runs(tracking_uri: str, experiment: str = "psbench", status: str = "FINISHED") -> list[Run]:
    """Job runs of ``experiment`` in ``status`` (FINISHED; RUNNING for the runs a page may say are not finished),
    sweep parents left out; for one (paper, table or figure, preset, scale, case, seed) the latest run wins. The preset
    (tag ``experiment``) keeps apart the studies no paper's table claims (``paper: null``) that share Table 2's case
    labels: its rows without staleness and its rows under α0/n."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs(
            [exp.experiment_id], f"attributes.status = '{status}'", max_results=1000, page_token=token
        )
        runs += [
            Run(
                r.info.run_id,
                dict(r.data.tags),
                dict(r.data.params),
                run_metrics(r.data.metrics),
                r.info.start_time,
                summary_at=_summary_at(getattr(r.data, "_metric_objs", ())),
            )  # step, time
            for r in page
            if r.data.tags.get("psbench.sweep_parent") != "true"
        ]
        token = page.token
        if not token:
            break
    latest: dict[tuple, Run] = {}
    for r in sorted(runs, key=lambda r: (r.start_time, r.run_id)):
        key = (
            r.tags.get("paper"),
            r.tags.get("table"),
            r.tags.get("figure"),
            r.tags.get("experiment"),
            r.tags.get("scale"),
            r.tags.get("case"),
            r.params.get("seed"),
        )
        latest[key] = r
    return sorted(latest.values(), key=lambda r: (r.tags.get("case", ""), r.params.get("seed", ""), r.run_id))


def run_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """A run's metrics by name, its totals first: ``summary/<key>`` (psbench logs summary.json's numbers
    apart from the per-update series) is read as ``<key>``; runs without them keep their latest values."""
    prefix = "summary/"
    out = {k: v for k, v in metrics.items() if not k.startswith(prefix)}
    out.update({k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)})
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


def trained_epochs(run: Run) -> float | None:
    """The epochs ``run`` trained: its ``epochs`` param, else its ``epochs_done`` metric; None where it says neither."""
    try:
        return float(run.params.get("epochs") or run.metrics["epochs_done"])
    except (KeyError, TypeError, ValueError):
        return None


def select(runs: Iterable[Run], **tags: str) -> list[Run]:
    return [r for r in runs if all(r.tags.get(k) == v for k, v in tags.items())]


#: the scales, smallest first: ``full`` is every CIFAR entry point on all 60,000 CIFAR-10 images (JPEG q75), a short
#: budget; ``paper_jpeg`` the papers' own budget (140 epochs, their lr steps) on the same JPEG q75 images, seed 0, the
#: decisive cases; ``paper`` the papers' own budget and data
SCALE_ORDER = {"ci": 0, "small": 1, "full": 2, "paper_jpeg": 3, "paper": 4}


def scales_of(runs: Iterable[Run]) -> list[str]:
    """The ``scale`` tags of ``runs``, ci → small → full → paper; a run without one (an ad-hoc run) has no scale."""
    return sorted({r.tags["scale"] for r in runs if r.tags.get("scale")}, key=lambda s: (SCALE_ORDER.get(s, 9), s))
