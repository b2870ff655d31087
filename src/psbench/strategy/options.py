"""The ``trainer`` config group: the simulator's training loop (typed: :class:`psbench.run_setup.TrainerOptions`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.machine import physical_memory
from psbench.schema import MAX_COUNT, MAX_THREADS, Group, boolean, integer, number, one_of

#: how the gradients of updates are computed (:class:`psbench.strategy.lookahead.Lookahead`)
BATCHING = ("auto", "grouped", "vmap", "loop")
PROGRESS = ("auto", "rich", "plain", "none")
#: where the simulator trains (``trainer.accelerator``; null = cpu): auto picks cuda, then mps, then cpu
ACCELERATORS = ("auto", "cpu", "cuda", "mps")
#: bound on weight snapshots + gradients computed ahead when ``trainer.memory_budget_mb`` is null (raised to what
#: the schedule needs update by update, if that is more; a configured budget is never raised: it refuses the run)
DEFAULT_MEMORY_BUDGET_MB = 2048


def _check(cfg: Mapping[str, Any]) -> None:
    """``trainer.memory_budget_mb`` within this machine's memory (a budget it cannot hold is not a bound)."""
    mb, memory = cfg["trainer"]["memory_budget_mb"], physical_memory()
    if mb is not None and memory is not None:
        require(
            mb * 2**20 <= memory,
            "trainer.memory_budget_mb",
            mb,
            f"null or a number of MiB > 0 and at most this machine's memory, {memory / 2**20:.0f} MiB",
        )


TRAINER = Group(
    {
        "default": {
            "max_updates": integer(1, MAX_COUNT, null="run all epochs"),
            "eval_every_epochs": integer(1, MAX_COUNT),
            "log_every_n_updates": integer(1, MAX_COUNT),
            "progress": one_of(*PROGRESS),
            "num_threads": integer(1, MAX_THREADS, null="auto: the threads that fit the run's gradients"),
            "deterministic": boolean(),
            "batching": one_of(*BATCHING),
            "gradient_clip_val": number(0, null="no clipping", float32=True),
            "divergence_factor": number(1, lo_open=True, null="off: only a non-finite loss diverges"),
            "checkpoint_every": integer(
                0, MAX_COUNT, words=f"in [0, {MAX_COUNT}] (PS updates between checkpoints; 0: off)"
            ),
            "stop_after_updates": integer(1, MAX_COUNT, null="run to the end"),
            "save_weights": boolean(),
            "timeline_updates": integer(
                0, 1000, null="auto: 3 pushes of every learner, 12 to 64 updates, at most 4096 gradients"
            ),
            "accelerator": one_of(*ACCELERATORS, null="cpu"),
            "updates_per_step": integer(1, MAX_COUNT, null="auto: the updates of ~128 samples, at most 64"),
            "memory_budget_mb": number(
                0, lo_open=True, null=f"{DEFAULT_MEMORY_BUDGET_MB} MiB or what the schedule needs", unit="MiB"
            ),
        }
    },
    check=_check,
    named=False,
)
