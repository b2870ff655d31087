"""Fit the simulator's cost model to a free-run event log and say how well it predicts the run.

A free run of ``engine=dist`` leaves ``schedule.npz`` (every update and gradient with measured
times) and ``dist_timing.npz`` (per gradient: compute seconds and whether its read waited at a
barrier/bound; per PS action: seconds spent handling a push, a grant, an update). From those,
:func:`fit_cost` sets the :class:`~psbench.cluster.cost.CostModel` terms one by one:

* compute: the mean compute seconds at this μ (a one-point :class:`ComputeModel`) and
  ``jitter_cv`` = their coefficient of variation; a learner whose mean is well above the median
  (an artificial ``engine.learner_delay_s``) is modelled as a straggler;
* ``ps_service_s``: mean PS time handling a push; the link: the PS's time per push + grant (the
  grant sends the weights) is split evenly over the simulator's two messages, push and pull, each
  occupying the PS for service + transfer, so ``bandwidth_Bps`` = message bytes / (half of it −
  service); ``ps_apply_Bps`` = message bytes / mean update time;
* ``latency_s``: the 1st percentile of the delay from a learner's end of compute to the PS taking
  its push (the fastest deliveries did not queue behind other messages);
* ``ps_jitter_cv``: the coefficient of variation of the PS's busy time per gradient (handling its push
  and the grant that follows): a PS sharing two cores with λ learners is far from constant-time.

:func:`fit_noise` then replaces ``jitter_cv`` and ``ps_jitter_cv`` by the values whose simulated staleness
distribution is closest to the first half of the run's (the two noise terms stand for all of the
machine's: processes that time-share a few cores are descheduled at random).
:func:`compare` simulates the same protocol, μ and number of gradients with the fitted costs and reports
the Kolmogorov–Smirnov distance between simulated and measured staleness distributions (``ks_staleness``:
on the second half of the run, out of sample for the noise fit) and the relative error of the time per epoch.
``python -m psbench.calibration.free_run RUN_DIR`` prints that report for a finished free run.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from psbench.cluster.cost import ComputeModel, CostModel
from psbench.cluster.topology import Topology
from psbench.ps import Protocol, Schedule, Simulator
from psbench.summary import RunSummary


def fit_cost(
    log: Schedule,
    timing: dict[str, np.ndarray],
    message_bytes: int,
    batch_size: int,
    base: CostModel | None = None,
    local_steps: int = 1,
) -> CostModel:
    """A cost model whose terms are measured from one free run (see the module docstring); a push of a
    local-step protocol is H mini-batches, so its compute time is divided by H."""
    base = base or CostModel()
    compute = timing["compute_s"]
    per_learner = np.array([compute[log.learner == l].mean() for l in np.unique(log.learner)])
    typical = float(np.median(per_learner))
    slow = per_learner > 1.5 * typical
    fast_rows = ~np.isin(log.learner, np.unique(log.learner)[slow])
    c_mean = float(compute[fast_rows].mean())
    cv = float(compute[fast_rows].std() / c_mean) if c_mean > 0 else 0.0
    wire = message_bytes + CostModel.TIMESTAMP_BYTES
    svc = float(np.mean(timing["push_s"])) if len(timing["push_s"]) else 0.0
    # the PS's own time per push + grant, split over the simulator's two messages (push, pull)
    occupancy = (svc + float(np.mean(timing["grant_s"]))) / 2 if len(timing["grant_s"]) else svc
    xfer = max(1e-7, occupancy - svc)
    apply_s = max(1e-7, float(np.mean(timing["apply_s"]))) if len(timing["apply_s"]) else 1e-7
    # latency: the fastest deliveries of a push (compute end -> PS picks it up) had no queue to wait in
    delay = log.t_push - timing["t_end"]
    lat = max(0.0, float(np.percentile(delay, 1))) if len(delay) else base.latency_s
    busy = timing["push_s"] + timing["grant_s"] if len(timing["grant_s"]) == len(timing["push_s"]) else timing["push_s"]
    ps_cv = float(busy.std() / busy.mean()) if len(busy) and busy.mean() > 0 else 0.0
    return replace(
        base,
        compute=ComputeModel(points=((batch_size, c_mean / local_steps),)),
        message_bytes=message_bytes,
        bandwidth_Bps=wire / xfer,
        latency_s=lat,
        ps_service_s=svc,
        ps_apply_Bps=message_bytes / apply_s,
        jitter_cv=cv,
        ps_jitter_cv=ps_cv,
        straggler_fraction=float(slow.mean()),
        straggler_slowdown=float(per_learner[slow].mean() / c_mean) if slow.any() else 1.0,
    )


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """max_k |F_a(k) − F_b(k)| of two samples of integers (two-sample KS statistic)."""
    hi = int(max(a.max(initial=0), b.max(initial=0))) + 1
    fa = np.cumsum(np.bincount(a, minlength=hi)) / max(1, len(a))
    fb = np.cumsum(np.bincount(b, minlength=hi)) / max(1, len(b))
    return float(np.abs(fa - fb).max())


def _simulate(protocol: Protocol, cost: CostModel, batch_size: int, gradients: int, seed: int):
    sim = Simulator(protocol, cost, Topology("rudra_base"), batch_size, gradients, seed)
    return sim, Schedule.collect(sim.run())


def fit_noise(
    log: Schedule, cost: CostModel, protocol: Protocol, batch_size: int, seed: int = 0
) -> tuple[float, float]:
    """The (``jitter_cv``, ``ps_jitter_cv``) whose simulated σ distribution is closest (KS) to the first half
    of the run's, searched on a grid that contains the measured CVs.

    The measured CVs of compute and PS busy times under-spread σ on a machine where λ learners and the PS
    time-share a few cores: a process descheduled between two timestamps shows up as delay elsewhere.
    The two noise terms of the cost model stand for all of it. Only the first half of the log is used,
    so the KS distance reported on the second half is out of sample.
    """
    half = log.num_gradients // 2
    cvs = sorted({round(cost.jitter_cv, 4), 0.1, 0.3, 1.0, 2.0, 3.0, 5.0})
    ps_cvs = sorted({round(cost.ps_jitter_cv, 4), 0.0, 0.5, 1.0, 1.5, 2.5, 4.0})
    n = max(half, protocol.gradients_per_update)

    def ks(cvs: tuple[float, float]) -> float:
        c = replace(cost, jitter_cv=cvs[0], ps_jitter_cv=cvs[1])
        return ks_distance(log.staleness[:half], _simulate(protocol, c, batch_size, n, seed)[1].staleness)

    return min(((a, b) for a in cvs for b in ps_cvs), key=ks)


def compare(
    log: Schedule,
    timing: dict[str, np.ndarray],
    protocol: Protocol,
    batch_size: int,
    num_train: int,
    message_bytes: int,
    run_time_s: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit, simulate the same run, and report staleness KS distance (second half of the run, out of
    sample for the jitter fit; also on all of it) and time-per-epoch error."""
    cost = fit_cost(log, timing, message_bytes, batch_size, local_steps=protocol.local_steps)
    compute_cv, ps_cv = cost.jitter_cv, cost.ps_jitter_cv
    jitter_cv, ps_jitter_cv = fit_noise(log, cost, protocol, batch_size, seed)
    cost = replace(cost, jitter_cv=jitter_cv, ps_jitter_cv=ps_jitter_cv)
    sim, simulated = _simulate(protocol, cost, batch_size, log.num_gradients, seed)
    epochs = log.num_gradients * batch_size * protocol.local_steps / num_train
    measured_epoch = run_time_s / epochs
    sim_epoch = sim.stats.sim_time_s / epochs
    return {
        "ks_staleness": ks_distance(log.staleness[log.num_gradients // 2 :], simulated.staleness),
        "ks_staleness_all": ks_distance(log.staleness, simulated.staleness),
        "compute_cv": compute_cv,
        "ps_busy_cv": ps_cv,
        "staleness_mean_measured": float(log.staleness.mean()),
        "staleness_mean_simulated": sim.stats.staleness.mean,
        "epoch_time_measured_s": measured_epoch,
        "epoch_time_simulated_s": sim_epoch,
        "epoch_time_rel_error": abs(sim_epoch - measured_epoch) / measured_epoch if measured_epoch > 0 else None,
        "cost": {
            "compute_s": cost.compute.seconds(batch_size),
            "jitter_cv": cost.jitter_cv,
            "latency_s": cost.latency_s,
            "ps_service_s": cost.ps_service_s,
            "ps_jitter_cv": cost.ps_jitter_cv,
            "bandwidth_Bps": cost.bandwidth_Bps,
            "ps_apply_Bps": cost.ps_apply_Bps,
            "straggler_fraction": cost.straggler_fraction,
            "straggler_slowdown": cost.straggler_slowdown,
        },
    }


def compare_run(run_dir: str | Path) -> dict[str, Any]:
    """:func:`compare` for a finished ``engine=dist`` free run's directory."""
    import yaml

    run_dir = Path(run_dir)
    cfg = yaml.safe_load((run_dir / "resolved_config.yaml").read_text())
    summary = RunSummary.read(run_dir / "summary.json")
    log = Schedule.load(run_dir / "schedule.npz")
    with np.load(run_dir / "dist_timing.npz") as z:
        timing = {k: z[k] for k in z.files}
    from psbench.ps.options import build_protocol

    protocol = build_protocol(cfg)
    assert summary.samples and summary.epochs_done and summary.model_bytes and summary.run_time_s is not None, (
        f"{run_dir} is not a finished engine=dist free run"
    )
    num_train = round(summary.samples / summary.epochs_done)
    return compare(
        log,
        timing,
        protocol,
        int(cfg["batch_size"]),
        num_train,
        int(summary.model_bytes),
        float(summary.run_time_s),
        int(cfg["seed"]),
    )


#: what compare_run reads from a run's directory
RUN_FILES = ("resolved_config.yaml", "summary.json", "schedule.npz", "dist_timing.npz")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m psbench.calibration.free_run", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="the directory of a finished engine=dist free run")
    run_dir = ap.parse_args(argv).run_dir
    if missing := [f for f in RUN_FILES if not (run_dir / f).is_file()]:
        print(
            f"python -m psbench.calibration.free_run: error: run_dir='{run_dir}' is invalid: allowed the directory of "
            f"a finished engine=dist free run (it has no {', '.join(missing)})",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(compare_run(run_dir), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
