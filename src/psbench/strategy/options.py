"""The ``trainer`` config group: the simulator's training loop."""

from __future__ import annotations

from psbench.schema import Group, boolean, integer, number, one_of

#: how the gradients of one update are computed (:func:`psbench.strategy.gradients.update_gradient`)
BATCHING = ("auto", "grouped", "vmap", "loop")
PROGRESS = ("auto", "rich", "plain", "none")

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
}}, named=False)
