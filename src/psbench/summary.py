"""``summary.json``: one :class:`RunSummary` for both engines, and the one atomic JSON writer.

Both executors (:func:`psbench.strategy.executor.train_sim`, :func:`psbench.distributed.launcher.train_dist`)
build a :class:`RunSummary`; the CLI adds the MLflow run id and provenance, writes it with
:func:`write_json` and logs its numbers as ``summary/<key>`` metrics; a killed, stopped or failed job
writes one too (status ``killed``/``failed``). Every field is always in the file, ``null`` where it
does not apply (a dist-only count in a simulated run, a test error before training).

Two clocks: ``sim_time_s`` is always *simulated* time (the cost model's virtual clock: ``engine=sim``
and a dist replay of a simulated schedule), never the wall clock; ``run_time_s`` is the dist PS's
*measured* time from the first push to the last update; ``wall_time_s`` is the whole job's. Torch-free.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: ``stopped``: the user's Trainer ended a ``ParameterServerStrategy`` fit before its plan (EarlyStopping, max_time)
STATUSES = ("finished", "diverged", "stopped", "killed", "failed")
#: the statuses of a run that trained to its end (a diverged run finishes too, tagged)
COMPLETED = ("finished", "diverged")


@dataclass(slots=True)
class RunSummary:
    """What one run did. ``engine`` says which fields were filled in; the rest stay ``None``."""

    # ---- how it ended
    status: str = "finished"  #: finished | diverged | stopped | killed | failed
    diverged: bool = False  #: a NaN/inf loss or test loss, or a train loss above its start × trainer.divergence_factor
    diverged_at_update: int | None = None  #: the PS update at which it diverged (non-finite, or the loss rule)
    divergence: str | None = None  #: why it diverged, in words (psbench.ps.divergence)
    failure_reason: str | None = None  #: one line for a killed/failed job (MLflow tag ``failure_reason``)
    stop_reason: str | None = None  #: the Lightning API: why the fit ended (max_epochs, EarlyStopping, max_time, …)
    artifacts_error: str | None = None  #: why the run's files did not all reach MLflow (the run still FINISHED)
    signal: str | None = None  #: SIGINT | SIGTERM | SIGHUP for a killed run (none for trainer.stop_after_updates)
    checkpoint: str | None = None  #: where a stopped run's checkpoint is (resume=<run dir>)
    test_error: float | None = None  #: final test error of the PS weights (null: not trained/evaluated, or no classes)
    test_loss: float | None = None  #: final mean test loss (``model.loss``: cross-entropy unless set)
    train_loss: float | None = None  #: mean training loss of the last updates (up to 100)
    # ---- what ran
    engine: str | None = None  #: sim (simulated schedule, Lightning) | dist (real processes); null: failed before
    mode: str | None = None  #: dist: free_run | replay
    protocol: str | None = None  #: protocol label, e.g. softsync4, agn_H3
    compression: str | None = None  #: engine=sim: the codec name (none: full fp32 gradients)
    data_note: str | None = None  #: ``dataset.data_note``: what the numbers' data is (cifar10_jpeg_q75: a JPEG copy)
    data_warning: str | None = None  #: what the data holds that training cannot learn (test labels never trained on)
    # ---- the schedule: staleness σ, updates, gradients
    staleness_mean: float | None = None  #: ⟨σ⟩ over applied gradients (Rudra §3)
    staleness_max: int | None = None  #: max σ
    staleness_hist: dict[int, int] | None = None  #: σ → number of gradients
    ps_updates: int | None = None  #: PS updates (weight versions) of the schedule/run
    gradients: int | None = None  #: gradients (or local-step commits) applied
    samples: int | None = None  #: training samples consumed: gradients × μ (× H with local steps)
    epochs_done: float | None = None  #: samples / training-set size
    schedule_sha256: str | None = None  #: hash of the schedule (dist free run: of its measured event log)
    updates_done: int | None = None  #: PS updates executed (fewer than ps_updates if stopped early)
    updates_total: int | None = None  #: killed run: PS updates it was to execute
    samples_trained: int | None = None  #: engine=sim: samples of the updates executed
    # ---- time: simulated (virtual clock), measured (dist PS), the job's wall clock
    sim_time_s: float | None = None  #: simulated time of the last update (never measured time)
    run_time_s: float | None = None  #: dist: measured seconds from the PS's start to its last update
    wall_time_s: float | None = None  #: the whole job's wall-clock seconds (build, simulate, train, evaluate)
    fit_time_s: float | None = None  #: engine=sim: seconds in the Lightning fit
    join_time_s: float | None = None  #: dist: seconds until every learner joined
    samples_per_s: float | None = None  #: engine=sim: samples_trained / fit_time_s
    pushes_per_s: float | None = None  #: dist: pushes received / run_time_s
    # ---- communication
    comm_overlap: float | None = None  #: compute / (compute + exposed communication) (Rudra Table 1)
    bytes_pushed: int | None = None  #: bytes learners → PS (sim: cost model's wire sizes; dist: measured)
    bytes_pulled: int | None = None  #: bytes PS → learners
    bytes_pushed_measured: int | None = None  #: engine=sim with a codec: the encoded bytes actually pushed
    pulls: int | None = None  #: weight pulls
    pulls_skipped: int | None = None  #: pulls skipped because the learner's weights were current
    message_bytes: int | None = None  #: dist: one uncompressed push (fp32 weights + header)
    model_bytes: int | None = None  #: dist: fp32 size of the model
    push_payload_bytes: int | None = None  #: dist: the codec's payload of one push
    # ---- dist PS counters
    ps_timestamp: int | None = None  #: the PS's final timestamp (= pushes_applied // c)
    pushes_received: int | None = None  #: pushes that reached the PS
    pushes_applied: int | None = None  #: pushes aggregated into an update
    parks: int | None = None  #: learners parked at the hardsync barrier or the SSP bound
    ssp_reads: int | None = None  #: weight reads checked against the SSP bound
    ssp_violations: int | None = None  #: reads that broke the bound (must be 0)
    ssp_max_lag: int | None = None  #: largest clock lag seen at a read
    failed_learners: list[int] | None = None  #: learners written off (engine.tolerate_failures)
    lost_gradients: int | None = None  #: in-flight gradients of written-off learners
    calibration: dict[str, Any] | None = None  #: free run: the fitted cost model vs measurement (calibration.free_run)
    calib_ks_staleness: float | None = None  #: calibration's KS distance of σ, simulated vs measured
    calib_epoch_time_rel_error: float | None = None  #: calibration's relative error of time per epoch
    # ---- checkpoints (engine=sim)
    resumed_from_update: int | None = None  #: the update a resumed run started at
    checkpoints_written: int | None = None  #: checkpoints saved
    checkpoint_time_s: float | None = None  #: seconds spent saving them
    checkpoint_bytes: int | None = None  #: size of the last one
    # ---- memory (engine=sim)
    peak_snapshot_bytes: int | None = None  #: most bytes of snapshots and look-ahead gradients held at once
    # ---- identity
    weights_sha256: str | None = None  #: hash of the final weights (determinism)
    artifacts: list[str] = field(default_factory=list)  #: files logged with the run (schedule, plots, weights)
    mlflow_run_id: str | None = None  #: the MLflow run (null with logger=none)
    provenance: dict[str, Any] | None = None  #: code and machine that ran it (psbench.tracking.provenance)
    provenance_changes: list[dict[str, Any]] | None = None  #: what differed at each resume: update, new values

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"RunSummary.status={self.status!r}: one of {', '.join(STATUSES)}")
        if self.staleness_hist is not None:  # JSON object keys are strings: σ is an integer
            self.staleness_hist = {int(k): int(v) for k, v in self.staleness_hist.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """A summary from its keys (``summary.json``, an executor's dict); unknown keys are refused."""
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ValueError(f"not RunSummary fields: {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> RunSummary:
        return cls.from_dict(json.loads(Path(path).read_text()))

    def to_dict(self) -> dict[str, Any]:
        """Every field, in declaration order (``summary.json``'s keys)."""
        return {f: getattr(self, f) for f in FIELDS}


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSummary))
#: the fields that are numbers (what a sweep may minimize or maximize: ``hydra.sweeper.objectives``)
NUMBERS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(RunSummary) if str(f.type).removesuffix(" | None") in ("int", "float")
)


def _strict(value: Any) -> Any:
    """JSON without NaN/Infinity literals: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def write_json(path: Path, data: RunSummary | Mapping[str, Any]) -> None:
    """Write ``data`` as strict JSON atomically (a private temporary file, then a rename).

    Non-finite floats become ``null``; other values without a JSON form are written as strings.
    """
    from psbench.files import write_bytes_atomic

    if isinstance(data, RunSummary):
        data = data.to_dict()
    text = json.dumps(_strict(data), indent=2, sort_keys=True, default=str, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode())
