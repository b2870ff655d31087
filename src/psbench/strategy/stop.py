"""Why a fit of the strategy ended, for its :attr:`~psbench.strategy.ps_strategy.ParameterServerStrategy.summary`.

A Trainer stops before the schedule's last update for reasons of its own — ``EarlyStopping``, ``max_time`` (Lightning's
``Timer`` callback), any callback or module setting ``trainer.should_stop``, an exception, Ctrl-C (which Lightning
swallows) — and the summary must then describe the updates that ran, not the plan. The statuses are
:data:`psbench.summary.STATUSES`': ``finished`` (every update of the plan: ``max_epochs`` or ``max_steps`` reached),
``stopped`` (the Trainer stopped it early), ``diverged``, ``killed`` (interrupted), ``failed`` (an exception).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psbench import lightning_namespaces as ns


@dataclass(frozen=True)
class Stopped:
    """How a fit ended: a :class:`~psbench.summary.RunSummary` status and one line saying why."""

    status: str
    reason: str


def reason(trainer: Any, strategy: Any) -> Stopped:
    """Why the fit ended normally (Lightning's ``on_train_end``): its plan done, a divergence, or who stopped it."""
    if strategy.diverged:
        return Stopped("diverged", f"a non-finite update at PS update {strategy.diverged_at}")
    planned = strategy.schedule.num_updates if strategy.schedule is not None else None
    if planned is None or strategy.updates_done >= planned:
        steps = trainer.max_steps
        limit = "max_steps" if steps is not None and steps >= 0 and trainer.global_step >= steps else "max_epochs"
        return Stopped("finished", f"{limit} reached: every update of the plan ran")
    of = f"after {strategy.updates_done} of {planned} PS updates"
    for cb in trainer.callbacks:
        if ns.is_instance(cb, "callbacks.EarlyStopping") and cb.stopped_epoch:
            why = cb.stopping_reason_message or f"{cb.monitor} did not improve"
            return Stopped("stopped", f"EarlyStopping at epoch {cb.stopped_epoch} {of}: {' '.join(why.split())}")
        if ns.is_instance(cb, "callbacks.Timer") and (cb.time_remaining() or 0.0) <= 0.0:
            return Stopped("stopped", f"max_time reached {of}")
    return Stopped("stopped", f"trainer.should_stop set by a callback or the module {of}")


def from_exception(exception: BaseException) -> Stopped:
    """An exception ended the fit: ``killed`` for Ctrl-C (Lightning ends the fit quietly), else ``failed``."""
    if isinstance(exception, KeyboardInterrupt):
        return Stopped("killed", "interrupted (KeyboardInterrupt)")
    return Stopped("failed", f"{type(exception).__name__}: {' '.join(str(exception).split())}")


def executed(schedule: Any, stats: Any, done: int, samples_per_gradient: int, num_train: int) -> dict[str, Any]:
    """The summary's counts of the first ``done`` PS updates of ``schedule`` (a fit that ended early): updates,
    gradients, samples, epochs, simulated time and staleness σ of the gradients they applied (Rudra §3.1), pushed bytes
    in proportion (every push of a run is the same size); the simulator's pull and overlap counts are of the whole
    run, so none; ``updates_total`` the plan's."""
    import numpy as np

    g = int(schedule.offsets[done])
    sigma = np.asarray(schedule.staleness[:g])
    hist = np.bincount(sigma) if g else np.zeros(0, dtype=np.int64)
    pushed = stats.get("bytes_pushed")
    return {
        "ps_updates": done,
        "updates_total": schedule.num_updates,
        "gradients": g,
        "samples": g * samples_per_gradient,
        "epochs_done": g * samples_per_gradient / num_train,
        "sim_time_s": float(schedule.update_time[done - 1]) if done else 0.0,
        "staleness_mean": float(sigma.mean()) if g else None,
        "staleness_max": int(sigma.max()) if g else None,
        "staleness_hist": {int(s): int(c) for s, c in enumerate(hist) if c},
        "bytes_pushed": None if pushed is None else pushed * g // max(1, schedule.num_gradients),
        "bytes_pulled": None,
        "pulls": None,
        "pulls_skipped": None,
        "comm_overlap": None,
    }
