"""The ``trainer`` config group: the simulator's training loop."""

from __future__ import annotations

from psbench.schema import Group, boolean, integer, number, one_of

#: how the gradients of updates are computed (:class:`psbench.strategy.lookahead.Lookahead`)
BATCHING = ("auto", "grouped", "vmap", "loop")
PROGRESS = ("auto", "rich", "plain", "none")
#: where the simulator trains (``trainer.accelerator``; null = cpu): auto picks cuda, then mps, then cpu
ACCELERATORS = ("auto", "cpu", "cuda", "mps")
#: bound on weight snapshots + gradients computed ahead when ``trainer.memory_budget_mb`` is null (raised to what
#: the schedule needs update by update, if that is more; a configured budget is never raised: it refuses the run)
DEFAULT_MEMORY_BUDGET_MB = 2048

TRAINER = Group({"default": {
    "max_updates": integer(1, null="run all epochs"),
    "eval_every_epochs": integer(1),
    "log_every_n_updates": integer(1),
    "progress": one_of(*PROGRESS),
    "num_threads": integer(1, null="torch's default"),
    "deterministic": boolean(),
    "batching": one_of(*BATCHING).optional(),
    "gradient_clip_val": number(0, null="no clipping", float32=True).optional(),
    "checkpoint_every": integer(0, words=">= 0 (PS updates between checkpoints; 0: off)").optional(),
    "stop_after_updates": integer(1, null="run to the end").optional(),
    "save_weights": boolean().optional(),
    "timeline_updates": integer(0, 1000,
                                null="auto: 3 pushes of every learner, 12 to 64 updates, at most 4096 gradients"),
    "accelerator": one_of(*ACCELERATORS, null="cpu").optional(),
    "updates_per_step": integer(1, null="auto: the updates of ~128 samples, at most 64").optional(),
    "memory_budget_mb": number(0, lo_open=True, null=f"{DEFAULT_MEMORY_BUDGET_MB} MiB or what the schedule needs",
                               unit="MiB").optional(),
}}, named=False)
