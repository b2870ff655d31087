"""Temporal efficiency of two runs (AGN, Hermans et al., Eq 4) from their metric histories.

    E(a, b) = ∫_0^m f_a(t) dt / ∫_0^m f_b(t) dt,   m = the minimal shared training time,

with f a training metric over (simulated) time — the paper uses training accuracy, so
E > 1 means run a did better over the time both had. Curves are sampled: f is linear between
samples and held constant before the first and after the last; the integrals are trapezoids
on the union of both runs' sample times in [0, m], so E is exact for the piecewise-linear f.

From MLflow: :func:`mlflow_curve` pairs the history of a metric (by step) with the history of
``sim_time_s`` (logged at the same steps by the strategy). The CLI compares two run ids::

    python -m psbench.tracking.temporal_efficiency RUN_A RUN_B [--metric train_accuracy]
        [--tracking-uri sqlite:///mlflow.db]

For a metric where lower is better (``*loss*``, ``*error*``) the CLI integrates 1 − f for
errors and passes losses through unchanged but reports E(b, a), so that E > 1 always means a
is better.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import numpy as np

Curve = tuple[np.ndarray, np.ndarray]  # (t, f(t)), t increasing


def _curve(times: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray) -> Curve:
    t, f = np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if t.ndim != 1 or t.shape != f.shape or len(t) == 0:
        raise ValueError("a curve needs equally long, non-empty 1-D t and f")
    keep = np.isfinite(t) & np.isfinite(f)
    order = np.argsort(t[keep], kind="stable")
    return t[keep][order], f[keep][order]


def shared_time(a: Curve, b: Curve) -> float:
    """m: the minimal shared training time (the shorter run's last sample)."""
    return float(min(a[0][-1], b[0][-1]))


def area(curve: Curve, m: float, grid: np.ndarray | None = None) -> float:
    """∫_0^m f(t) dt of the piecewise-linear f through ``curve`` (held at both ends)."""
    t, f = curve
    pts = np.unique(np.concatenate([[0.0, m], t[(t > 0) & (t < m)], [] if grid is None else grid]))
    pts = pts[(pts >= 0) & (pts <= m)]
    return float(np.trapezoid(np.interp(pts, t, f), pts))


def temporal_efficiency(a: Curve, b: Curve) -> float:
    """E(a, b) of AGN Eq 4 for two sampled curves (t, f)."""
    a, b = _curve(*a), _curve(*b)
    m = shared_time(a, b)
    if m <= 0:
        raise ValueError(f"no shared training time (m = {m})")
    grid = np.concatenate([a[0], b[0]])
    return area(a, m, grid) / area(b, m, grid)


def mlflow_curve(client, run_id: str, metric: str = "train_accuracy", time_metric: str = "sim_time_s") -> Curve:
    """(simulated time, metric) of one MLflow run: the metric's history mapped by step onto ``time_metric``."""
    hist = sorted(client.get_metric_history(run_id, metric), key=lambda m: (m.step, m.timestamp))
    if not hist:
        raise ValueError(f"run {run_id} has no metric {metric!r}")
    times = sorted(client.get_metric_history(run_id, time_metric), key=lambda m: (m.step, m.timestamp))
    if not times:
        raise ValueError(f"run {run_id} has no metric {time_metric!r}")
    ts, tv = np.array([m.step for m in times], float), np.array([m.value for m in times], float)
    steps = np.array([m.step for m in hist], float)
    return _curve(np.interp(steps, ts, tv), [m.value for m in hist])


def compare_runs(tracking_uri: str, run_a: str, run_b: str, metric: str = "train_accuracy") -> float:
    """E(run_a, run_b) on ``metric`` from an MLflow store; > 1 means run a is better."""
    from mlflow import MlflowClient

    from psbench.tracking.mlflow_store import sqlite_path

    if (db := sqlite_path(tracking_uri)) is not None and not db.is_file():
        raise ValueError(f"--tracking-uri={tracking_uri!r} is invalid: allowed an existing store (no such file)")
    client = MlflowClient(tracking_uri)
    from mlflow.exceptions import MlflowException

    for run in (run_a, run_b):
        try:
            client.get_run(run)
        except MlflowException as err:  # a run the store lacks, or a malformed id; anything else is the store's
            if err.error_code not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise
            raise ValueError(f"run {run!r} is invalid: allowed a run id of {tracking_uri}") from None
    a, b = mlflow_curve(client, run_a, metric), mlflow_curve(client, run_b, metric)
    if "error" in metric:
        return temporal_efficiency((a[0], 1 - a[1]), (b[0], 1 - b[1]))
    if "loss" in metric:
        return temporal_efficiency(b, a)
    return temporal_efficiency(a, b)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m psbench.tracking.temporal_efficiency",
        description="Temporal efficiency E(a, b) of two MLflow runs (AGN Eq 4).",
    )
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--metric", default="train_accuracy")
    root = os.environ.get("PSBENCH_ROOT") or "."
    ap.add_argument("--tracking-uri", default=f"sqlite:///{os.path.abspath(os.path.join(root, 'mlflow.db'))}")
    args = ap.parse_args(argv)
    try:
        e = compare_runs(args.tracking_uri, args.run_a, args.run_b, args.metric)
    except Exception as err:  # one line, non-zero exit
        print(f"python -m psbench.tracking.temporal_efficiency: error: {err}", file=sys.stderr)
        return 2
    print(f"E({args.run_a}, {args.run_b}) on {args.metric} = {e:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
