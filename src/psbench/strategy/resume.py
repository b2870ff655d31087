"""A user's fit resumed from a Lightning checkpoint: ``trainer.fit(model, ckpt_path="last")`` after a preemption.

A Lightning checkpoint holds the weights, the optimizer, the lr schedulers and the loops' counters; a PS fit also
depends on what a checkpoint of the psbench command keeps (:mod:`psbench.checkpoint`): the weight snapshots that
pending gradients still read, the gradients the look-ahead computed ahead, the codecs' state, the counters and the
divergence rule, and every RNG stream — and on the ReduceLROnPlateau steps owed when Lightning saves (it saves
before it steps them). :func:`entry` is that state, under the checkpoint's ``"psbench"`` key (the strategy's
``save_checkpoint``, at a Trainer step's boundary, the updates applied so far read back first); :func:`restore`
loads it at ``setup``, once the run is planned again from the same Trainer, module and data, and the Trainer's data
resumes at the first update not applied (:meth:`EpochLoader.resume_at`) — mid-epoch too
(``ModelCheckpoint(every_n_train_steps=…)``), the loader being resumable in Lightning's sense. On the CPU the resumed
fit's weights and logged metrics equal the uninterrupted fit's, bit for bit.

Refused in one line, before any update: a checkpoint without that entry (plain Lightning's, or one saved outside a
PS fit: load its weights into the module and fit without ``ckpt_path``), one of another schedule (other
``max_epochs``/``max_steps``, protocol, λ, seed, data — the snapshots and the computed gradients are that
schedule's), one saved inside a Trainer step (``trainer.save_checkpoint`` from a signal handler, as SLURM's
auto-requeue does: a PS update may be half applied there), one from a newer format.
"""

from __future__ import annotations

from typing import Any

from psbench.checkpoint import _numpy, _plain, rng_state
from psbench.errors import require

KEY = "psbench"  #: the Lightning checkpoint's key for the PS's state
FORMAT = 1


def entry(strategy, trainer) -> dict[str, Any]:
    """The PS's state at a Trainer step's boundary (:meth:`ParameterServerStrategy.ps_state` reads back first), as
    tensors and plain data (a checkpoint Lightning loads with ``weights_only=True``); ``step``: the Trainer step the
    fit resumes at, counted across epochs (each epoch runs ``loader.steps``)."""
    if strategy._in_step:  # e.g. SLURM's auto-requeue handler (trainer.save_checkpoint wherever the signal lands)
        return {"format": FORMAT, "inside_step": True}
    step = trainer.current_epoch * strategy.loader.steps + trainer.fit_loop.epoch_loop.batch_idx + 1
    return _plain(
        {
            "format": FORMAT,
            "step": step,
            "steps_per_epoch": strategy.loader.steps,
            "schedule_sha256": strategy.schedule.sha256(),
            "strategy": strategy.ps_state(),
            "rng": rng_state(),
            "plateau": strategy._lr.owed(trainer.callback_metrics),
        }
    )


def stashed(checkpoint: dict[str, Any], path: Any) -> dict[str, Any]:
    """The PS's state in a checkpoint a fit resumes from (refused in one line without one)."""
    found = checkpoint.get(KEY)
    require(
        isinstance(found, dict),
        "ckpt_path",
        str(path),
        "a checkpoint a ParameterServerStrategy fit saved (this one holds no PS state — the snapshots, the gradients "
        "computed ahead, the schedule's position: to start a PS fit from its weights, load them into the module and "
        "fit without ckpt_path)",
    )
    assert isinstance(found, dict)
    require(found.get("format") == FORMAT, "ckpt_path", str(path), f"a checkpoint of PS state format {FORMAT} or older")
    require(
        not found.get("inside_step"),
        "ckpt_path",
        str(path),
        "a checkpoint saved between Trainer steps (this one was saved inside one, where a PS update may be half "
        "applied — by a signal handler such as SLURM's auto-requeue: resume from the last ModelCheckpoint's)",
    )
    return _numpy(found)


def restore(strategy, state: dict[str, Any], path: Any) -> dict[str, Any]:
    """Check ``state`` (:func:`stashed`) against the planned ``strategy``, then load it; return the RNG streams, which
    the caller sets at the training loop's start (where they were saved, after Lightning's RNG-isolated sanity
    check)."""
    sha = strategy.schedule.sha256()
    require(
        state["schedule_sha256"] == sha,
        "ckpt_path",
        str(path),
        "a checkpoint of this fit's schedule (the same max_epochs/max_steps, protocol, learners, seed and data: "
        f"the snapshots and gradients it holds are its schedule's; saved {state['schedule_sha256'][:12]}, "
        f"planned {sha[:12]})",
    )
    steps, saved = strategy.loader.steps, int(state["steps_per_epoch"])
    require(
        steps == saved,
        "ckpt_path",
        str(path),
        f"a checkpoint of a fit with this one's Trainer steps per epoch ({steps}; it was saved with {saved}: resume "
        "with the Trainer it was saved by — updates_per_step, ModelCheckpoint(every_n_train_steps=…) and "
        "val_check_interval decide how many PS updates a Trainer step carries)",
    )
    ps = state["strategy"]
    if ps["diverged_at"] is None:  # (a diverged fit stops at its first step)
        strategy.loader.resume_at(int(state["step"]), int(ps["updates_done"]))
    strategy.load_ps_state(ps)
    strategy._lr.resume_owed(state["plateau"])
    return state["rng"]
