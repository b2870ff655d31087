"""The MLflow side of one job: its run created (or a resumed one reopened), Lightning's logger on it, and its end.

:class:`JobRun` is made only once a job's run is built (:func:`psbench.job.execute`), so input refused before
then leaves no MLflow run. ``logger=none`` makes it a no-op.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig

from psbench.conf import CONF_DIR
from psbench.summary import RunSummary

#: seconds MLflow's asynchronous logging gathers a run's per-update metrics before writing them in one batch
ASYNC_BUFFER_S = "2"

log = logging.getLogger("psbench")


def _hydra_choices() -> dict[str, Any]:
    if not HydraConfig.initialized():
        return {}
    return dict(HydraConfig.get().runtime.choices)


class JobRun:
    """The MLflow side of one job (a no-op with ``logger=none``)."""

    def __init__(
        self,
        resolved: Mapping[str, Any],
        run_dir: Path,
        provenance: Mapping[str, Any],
        resume: Mapping[str, Any] | None = None,
    ) -> None:
        lg = resolved["logger"]
        self.enabled = lg["name"] == "mlflow"
        self.uri: str = lg.get("tracking_uri", "")
        self.run_id: str | None = None
        self.ended = False
        self.last_steps: dict[str, int] = {}  # a resumed run's metric history: last step per key
        self.provenance_changes: list[dict[str, Any]] = []  # what differed at each resume (tracking.provenance)
        if not self.enabled:
            return
        from psbench import tracking
        from psbench.tracking import sweep

        self.t = tracking
        if resume is not None and resume.get("mlflow_run_id"):  # the same run, RUNNING again
            self.run_id = resume["mlflow_run_id"]
            # the changes first: this process's tags overwrite psbench.host, one of the values compared
            self.last_steps, self.provenance_changes = tracking.reopen_run(
                self.uri, self.run_id, int(resume["update"]), tracking.provenance_tags(provenance)
            )
            tracking.set_tags(self.uri, self.run_id, tracking.process_tags())
            log.info("MLflow run %s resumed before update %s in %s", self.run_id, resume["update"], self.uri)
            return
        exp_id = tracking.ensure_experiment(
            self.uri, lg["experiment_name"], lg.get("artifact_location"), lg.get("lock_timeout_s", 30)
        )
        tags = tracking.run_tags(resolved, _hydra_choices())
        tags["run_dir"] = str(run_dir)
        tags.update(tracking.process_tags())
        for lost in tracking.end_lost_runs(self.uri, exp_id, str(run_dir)):
            log.info("MLflow run %s of an earlier job in %s ended KILLED: its process is gone", lost, run_dir)
        tags["mlflow.source.name"] = "psbench"
        if provenance.get("git_commit"):
            tags["mlflow.source.git.commit"] = provenance["git_commit"]
        tags.update(tracking.provenance_tags(provenance), **sweep.job_tags(self.uri))
        defaults = tracking.config_defaults(CONF_DIR / "config.yaml")
        name = tracking.run_name(resolved, defaults, sweep.job_swept())
        self.run_id = tracking.start_run(self.uri, exp_id, name, tracking.flatten(resolved), tags)
        log.info("MLflow run %s in %s", self.run_id, self.uri)

    def lightning_logger(self, resolved: Mapping[str, Any]):
        if self.run_id is None:
            return None
        from pytorch_lightning.loggers import MLFlowLogger

        lg = resolved["logger"]
        last = self.last_steps

        class NoRepeat(MLFlowLogger):
            """Drops a metric at a step the resumed run already has (the interrupted part logged it)."""

            def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
                if step is not None:
                    metrics = {k: v for k, v in metrics.items() if step > last.get(k, -1)}
                if metrics:
                    super().log_metrics(metrics, step)

        # MLflow's own asynchronous logging, its queue merged into one transaction per ASYNC_BUFFER_S: one sqlite
        # write per logged update cost 11 % of an asynchronous μ = 4 run at one thread (Zhang Fig 3's 30-softsync,
        # 3.1 of 28.5 s, py-spy); set_terminated (Lightning's finalize, end_run, abort) drains the queue first
        os.environ.setdefault("MLFLOW_ASYNC_LOGGING_BUFFERING_SECONDS", ASYNC_BUFFER_S)
        return NoRepeat(
            experiment_name=lg["experiment_name"],
            tracking_uri=self.uri,
            run_id=self.run_id,
            artifact_location=lg.get("artifact_location"),
            log_model=False,
            synchronous=False,
        )

    def finish(self, summary: RunSummary, files: list[Path]) -> str | None:
        """End the run FINISHED with its summary and files; return why its files did not all reach the artifact
        store (a full or read-only artifact folder after training: the run still ended FINISHED, tag
        ``artifacts_error``), else None."""
        if self.run_id is None:
            return None
        t = self.t
        t.log_summary(self.uri, self.run_id, summary.to_dict())  # summary/<key>: never a point of a series
        error = None
        try:
            t.log_artifacts(self.uri, self.run_id, files)
        except Exception as exc:  # what trained is done and recorded: the files stay in the run dir
            from psbench.errors import failure_reason

            where = ""
            with contextlib.suppress(Exception):
                where = f" {t.mlflow_store.client(self.uri).get_run(self.run_id).info.artifact_uri}"
            why = " ".join(failure_reason(exc).split())
            error = f"its files were not logged to the artifact store{where}: {why}"
            log.warning("MLflow run %s: %s (they are in the run dir)", self.run_id, error)
        t.set_tags(
            self.uri,
            self.run_id,
            {
                "status": summary.status,
                "diverged": str(summary.diverged).lower(),
                "weights_sha256": summary.weights_sha256,
                **({"artifacts_error": error} if error else {}),
                **({"divergence": summary.divergence} if summary.divergence else {}),
            },
        )
        t.end_run(self.uri, self.run_id, t.FINISHED)
        self.ended = True
        return error

    def abort(self, status: str, reason: str, summary: RunSummary | None = None, files: Sequence[Path] = ()) -> None:
        """Mark the run ``status`` (FAILED/KILLED) with tag ``failure_reason``; never masks the error handled."""
        if self.run_id is None or self.ended:
            return
        self.ended = True
        t = self.t
        with contextlib.suppress(Exception):
            if summary is not None:
                t.log_summary(self.uri, self.run_id, summary.to_dict())
                t.log_artifacts(self.uri, self.run_id, files)
            t.set_tags(
                self.uri,
                self.run_id,
                {"failure_reason": " ".join(reason.split()), **({"status": summary.status} if summary else {})},
            )
        with contextlib.suppress(Exception):
            t.end_run(self.uri, self.run_id, status)
