"""MLflow tracking for psbench: the sqlite store, experiments, runs, and what they are called.

``mlflow_store`` talks to MLflow (imported lazily: importing mlflow takes seconds);
``run_info`` turns a resolved config into a run name, params and tags; ``provenance`` says
which code and machine produced a run; ``sweep`` groups a multirun's jobs under a parent run.
"""

from psbench.tracking.mlflow_store import (
    FAILED,
    FINISHED,
    KILLED,
    RUNNING,
    SUMMARY_PREFIX,
    end_lost_runs,
    end_run,
    ensure_experiment,
    ensure_store,
    log_artifacts,
    log_metrics,
    log_summary,
    process_tags,
    reopen_run,
    set_tags,
    start_run,
    summary_metrics,
)
from psbench.tracking.provenance import provenance_tags
from psbench.tracking.run_info import config_defaults, flatten, run_name, run_tags

__all__ = [
    "FAILED",
    "FINISHED",
    "KILLED",
    "RUNNING",
    "SUMMARY_PREFIX",
    "config_defaults",
    "end_lost_runs",
    "end_run",
    "ensure_experiment",
    "ensure_store",
    "flatten",
    "log_artifacts",
    "log_metrics",
    "log_summary",
    "process_tags",
    "provenance_tags",
    "reopen_run",
    "run_name",
    "run_tags",
    "set_tags",
    "start_run",
    "summary_metrics",
]
