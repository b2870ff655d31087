"""Hand-made FINISHED runs in a real sqlite MLflow store, logged the way psbench logs them, for the analysis/ tests.

Each test knows which claims its runs make hold, so the report pages can be checked without training.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path


class ReportStore:
    """``<root>/mlflow.db`` with the ``psbench`` experiment; :meth:`run` adds one run."""

    def __init__(self, root: Path) -> None:
        from mlflow import MlflowClient

        from psbench.tracking import ensure_experiment

        self.root = Path(root)
        self.uri = f"sqlite:///{self.root / 'mlflow.db'}"
        self.exp = ensure_experiment(self.uri, "psbench", str(self.root / "mlartifacts"))
        self.c = MlflowClient(self.uri)

    def run(
        self,
        tags: Mapping,
        metrics: Mapping[str, float] | None = None,
        *,
        seed: int = 0,
        params: Mapping | None = None,
        histories: Mapping[str, Sequence[tuple[int, float]]] | None = None,
        summary: Mapping | None = None,
        summary_step: int | None = None,
        legacy: bool = False,
        status: str = "FINISHED",
    ) -> str:
        """One run: ``histories`` ({key: [(step, value), …]}) and the final ``metrics`` as ``summary/<key>`` (as
        psbench.cli logs a run's summary; at ``summary_step``, default the last history step, and a later
        timestamp), tags, params (``seed`` always) and, if given, the ``summary.json`` artifact. ``legacy``: the
        summary under the per-update keys themselves, as psbench logged it before ``summary/<key>`` (a copy of
        ``train_loss`` etc. at ``summary_step``). ``status="RUNNING"``: a run left open, as one still training
        (give it histories only: it has no summary yet). ``epochs`` is a param of every run, as psbench logs its
        config (1 unless ``params`` says): a page's learning claims rest on it (k of the paper's N epochs). Returns
        the run id."""
        from mlflow.entities import Metric, Param, RunTag

        rid = self.c.create_run(self.exp, start_time=1_000 + seed).info.run_id
        hist = [Metric(k, float(v), 1_000, int(s)) for k, pts in (histories or {}).items() for s, v in pts]
        step = summary_step if summary_step is not None else max((m.step for m in hist), default=0)
        prefix = "" if legacy else "summary/"
        hist += [Metric(f"{prefix}{k}", float(v), 2_000, step) for k, v in (metrics or {}).items()]
        for i in range(0, max(len(hist), 1), 900):  # MLflow's batch limit is 1,000 metrics
            first = i == 0
            self.c.log_batch(
                rid,
                metrics=hist[i : i + 900],
                params=[Param(k, str(v)) for k, v in {"seed": seed, "epochs": 1, **(params or {})}.items()]
                if first
                else [],
                tags=[RunTag(k, str(v)) for k, v in tags.items()] if first else [],
            )
        if summary is not None:
            f = self.root / rid / "summary.json"
            f.parent.mkdir(parents=True)
            f.write_text(json.dumps(summary))
            self.c.log_artifact(rid, str(f))
        if status != "RUNNING":
            self.c.set_terminated(rid, status)
        return rid
