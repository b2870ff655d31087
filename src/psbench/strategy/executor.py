"""The simulator's executor: train on a :class:`~psbench.assemble.RunSetup`'s simulated schedule (``engine=sim``).

1. the setup (:func:`psbench.assemble.build_run`) holds the data, the seeded model, the cost model and the
   schedule of ⌊epochs·N/μ⌋ gradients (capped by ``trainer.max_updates``) simulated on it;
2. the schedule, its staleness histogram and the picture of its first updates (``timeline.png``:
   :mod:`psbench.ps.timeline`) are saved in the run dir;
3. ``schedule_only``: statistics only; otherwise a Trainer with
   :class:`~psbench.strategy.ParameterServerStrategy`, K PS updates per Trainer step
   (``trainer.updates_per_step``; null: :func:`~psbench.strategy.chunks.auto_updates_per_step`),
   evaluating test error every epoch's worth of updates;
4. the :class:`~psbench.summary.RunSummary` (``summary.json``) and artifacts (schedule, staleness histogram).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from psbench import lifecycle
from psbench.errors import ConfigError, require
from psbench.models.evaluate import evaluate, quick_evaluate, save_final_weights, weights_sha256
from psbench.ps import Schedule
from psbench.ps.local import uses_local_steps
from psbench.ps.plan import SimulatedRun, plot_timeline
from psbench.ps.schedule import updates_per_epoch
from psbench.ps.staleness import plot_staleness
from psbench.summary import RunSummary

if TYPE_CHECKING:
    from psbench.run_setup import RunSetup


def train_sim(setup: RunSetup, run_dir: Path, logger=None, plan=None) -> RunSummary:
    """Train on ``setup``'s simulated schedule; return its :class:`~psbench.summary.RunSummary`.

    ``plan`` (:class:`psbench.checkpoint.Plan`) turns on checkpoints and, with its ``state``, resumes
    from one; a requested stop raises :class:`psbench.checkpoint.RunStopped` after writing it.
    """
    t_start = time.perf_counter()
    schedule, stats, protocol = setup.schedule, dict(setup.sim_stats or {}), setup.protocol
    assert schedule is not None, "engine=sim runs a simulated schedule (psbench.assemble.build_run)"
    artifacts = [
        str(schedule.save(run_dir / "schedule.npz")),
        str(plot_staleness(stats["staleness_hist"], protocol.label, run_dir / "staleness_hist.png")),
    ]
    sim = SimulatedRun(schedule, stats, setup.trace)
    timeline = plot_timeline(sim, protocol, setup.batch_size, setup.hardware, setup.topology, run_dir / "timeline.png")
    if timeline is not None:
        artifacts.append(timeline)
    samples = schedule.num_gradients * setup.samples_per_gradient
    summary = RunSummary(
        engine="sim",
        **stats,
        samples=samples,
        epochs_done=samples / setup.data.num_train,
        schedule_sha256=schedule.sha256(),
        protocol=protocol.label,
        artifacts=artifacts,
        compression=(setup.compression or {}).get("name", "none"),
    )
    if setup.schedule_only:
        return replace(summary, wall_time_s=time.perf_counter() - t_start)
    summary = replace(summary, **_fit(setup, schedule, logger, plan, t_start))
    save_final_weights(setup.trainer.save_weights, setup.net, run_dir, artifacts)
    return replace(
        summary,
        weights_sha256=weights_sha256(setup.net),
        wall_time_s=time.perf_counter() - t_start + (plan.prior("wall_time_s") if plan else 0.0),
    )


def check_schedule(setup: RunSetup, plan) -> None:
    """A resumed run's checkpoint is of this schedule (:class:`~psbench.errors.ConfigError` for ``resume``)."""
    if plan is not None and plan.state is not None and setup.schedule is not None:
        require(
            plan.state["schedule_sha256"] == setup.schedule.sha256(),
            "resume",
            str(plan.path),
            "a checkpoint of this schedule (the recomputed schedule differs from the checkpoint's: "
            "was psbench changed in between?)",
        )


def _progress_callbacks(mode: str):
    from pytorch_lightning.callbacks import RichProgressBar

    from psbench.strategy.progress import PlainProgress

    if mode == "none":
        return [], False
    if mode == "rich" or (mode == "auto" and sys.stdout.isatty()):
        return [RichProgressBar()], True
    return [PlainProgress()], False


def device(setup: RunSetup) -> torch.device:
    """``trainer.accelerator`` (null: cpu; auto: cuda, else mps, else cpu) as a torch device that exists here."""
    from psbench.strategy.device import run_device

    cpu_only = uses_local_steps(setup.protocol.name) or setup.codecs is not None
    return run_device(
        setup.trainer.accelerator,
        cpu_only="with a local-step protocol or a codec (they run on the CPU)" if cpu_only else None,
    )


def memory_budget(setup: RunSetup) -> int | None:
    """``trainer.memory_budget_mb`` in bytes; a schedule that cannot run within it is refused here, up front."""
    from psbench.strategy.lookahead import minimum_bytes
    from psbench.strategy.options import DEFAULT_MEMORY_BUDGET_MB

    if uses_local_steps(setup.protocol.name):  # local-step protocols keep λ learner models, not snapshots
        return None
    schedule, net, mb = setup.schedule, setup.net, setup.trainer.memory_budget_mb
    assert schedule is not None
    by_row = setup.codecs is not None or setup.trainer.batching == "loop"
    budget = int(float(mb if mb is not None else DEFAULT_MEMORY_BUDGET_MB) * 2**20)
    p_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    need = minimum_bytes(schedule, p_bytes, by_row)
    if mb is None:  # the default never refuses: it grows to what update-by-update execution needs
        return max(budget, need)
    if need > budget:
        from psbench.ps.snapshots import SnapshotStore

        raise ConfigError(
            "trainer.memory_budget_mb",
            mb,
            f"at least {need / 2**20:.1f} MiB for this schedule: it holds up to "
            f"{SnapshotStore.peak_count(schedule)} weight snapshots of {p_bytes / 2**20:.2f} MiB "
            f"at once (σ_max = {int(schedule.staleness.max(initial=0))})",
        )
    return budget


def check_run(setup: RunSetup) -> None:
    """What refuses a simulated run before it starts: the device and the memory budget (ConfigError)."""
    device(setup)
    memory_budget(setup)


def _layout(net, x):
    """``x`` in the memory layout the net runs fastest on here (channels_last for 2-d conv nets on the CPU);
    a streamed source (``dataset=imagenet``) is left as it is: its batches are tensors made per read."""
    from psbench.strategy.module import prefers_channels_last

    if isinstance(x, torch.Tensor) and prefers_channels_last(net, x):
        return x.contiguous(memory_format=torch.channels_last)
    return x


def _fit(setup: RunSetup, schedule: Schedule, logger, plan=None, t_start: float = 0.0) -> dict[str, Any]:
    import logging
    import warnings

    import pytorch_lightning as pl
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    from psbench.checkpoint import RunStopped
    from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches
    from psbench.strategy.chunks import UpdateChunks, auto_updates_per_step
    from psbench.strategy.interrupt import StopOnSignal

    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*returned `None`.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    dm, net, protocol, tr = setup.data, setup.net, setup.protocol, setup.trainer
    spg, compression = setup.samples_per_gradient, setup.codecs
    per_epoch = updates_per_epoch(schedule.num_updates, schedule.num_gradients, spg, dm.num_train)
    every = max(1, round(per_epoch * float(tr.eval_every_epochs)))
    local = None
    if uses_local_steps(protocol.name):  # learners run the learner optimizer locally; the PS adds their commits
        from psbench.strategy.local_steps import LocalLearners, WindowBatches

        local = LocalLearners(
            protocol,
            schedule,
            dm.x_train,
            dm.y_train,
            setup.batch_size,
            setup.seed,
            setup.learner_optimizer,
            setup.policy,
        )
    dev = device(setup)
    module = ClassifierModule(net, setup.optimizer, per_epoch, loss=setup.loss)
    strategy = ParameterServerStrategy(
        schedule,
        tr.batching,
        log_every_n_updates=tr.log_every_n_updates,
        local=local,
        compression=compression,
        num_train=dm.num_train,
        memory_budget_bytes=memory_budget(setup),
        gradient_clip_val=tr.gradient_clip_val,
        device=dev,
        eval_every=min(every, schedule.num_updates),
    )
    from psbench.strategy.progress import EpochThroughput

    callbacks, rich = _progress_callbacks(tr.progress)
    callbacks += [EpochThroughput(), StopOnSignal()]
    checkpointer = None
    if plan is not None:
        from psbench.checkpoint import Checkpointer

        checkpointer = Checkpointer(plan, schedule.sha256(), t_start)
        callbacks.append(checkpointer)
    trainer = pl.Trainer(
        strategy=strategy,
        accelerator=dev.type,
        max_epochs=1,
        logger=logger if logger is not None else False,
        val_check_interval=1,
        check_val_every_n_epoch=None,  # the strategy decides, in updates (eval_every)
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=rich,
        callbacks=callbacks,
        log_every_n_steps=1,  # the strategy logs each update's metrics itself
        deterministic=tr.deterministic,
    )  # gradient clipping is the strategy's (it applies every update itself: manual optimization)
    updates = (
        WindowBatches(schedule, spg)
        if local is not None
        else UpdateBatches(
            schedule,
            dm.x_train.to(dev),
            dm.y_train.to(dev),
            spg,
            setup.policy,
            setup.batch_size,
            protocol.learners,
            setup.seed,
            with_samples=False,
        )
    )  # the look-ahead reads the samples
    start = plan.start if plan is not None else 0  # a resumed run executes updates start…U−1
    k = tr.updates_per_step if tr.updates_per_step is not None else auto_updates_per_step(schedule, spg)
    chunks = UpdateChunks(updates, start, schedule.num_updates, k, min(every, schedule.num_updates))
    data = torch.utils.data.DataLoader(chunks, batch_size=None, shuffle=False, num_workers=0)
    t0 = time.perf_counter()
    try:
        try:
            with lifecycle.deferred():  # a signal stops the fit at the next update boundary (StopOnSignal)
                trainer.fit(module, train_dataloaders=data, val_dataloaders=dm.val_dataloader())
        except SIGTERMException:  # Lightning's SIGTERM handler ran before StopOnSignal took the signal back
            lifecycle.check()
            raise
        except RunStopped as stop:  # a signal asked for a checkpoint (StopOnSignal): it is written, now end KILLED
            if lifecycle.pending() is None:
                raise
            print(
                f"psbench: checkpoint before update {stop.update} in {stop.path} (resume={stop.path.parent})",
                file=sys.stderr,
                flush=True,
            )
            lifecycle.check()
    except lifecycle.Killed as k:
        net.cpu()
        k.progress.update(
            updates_done=strategy.updates_done,
            updates_total=schedule.num_updates,
            samples=strategy.samples_done,
            sim_time_s=strategy.sim_time_s,
            **quick_evaluate(net, _layout(net, dm.x_test), dm.y_test, loss=setup.loss),
        )
        raise
    net.cpu()  # evaluation, hashing and saving on the CPU, whatever the accelerator
    fit_s = time.perf_counter() - t0 + (plan.prior("fit_time_s") if plan is not None else 0.0)
    done = strategy.updates_done
    # the evaluation after the last update, of in-memory test data on the CPU, summed batch by batch as
    # evaluate() sums them (the same batches, layout and kernels): the same two numbers, already computed
    last = module.last_evaluation
    if (
        dev.type == "cpu"
        and isinstance(dm.x_test, torch.Tensor)
        and last is not None
        and last[0] == done
        and last[3] == len(dm.y_test)
    ):
        test_error, test_loss = last[1], last[2]
    else:
        test_error, test_loss = evaluate(
            net, _layout(net, dm.x_test), dm.y_test, batch=dm.eval_batch_size, loss=setup.loss
        )
    diverged = strategy.diverged or not math.isfinite(test_loss)
    samples = int(schedule.offsets[done]) * spg if done else 0
    if logger is not None:
        final = {"test_error": test_error, "test_loss": test_loss, "samples_per_s": samples / fit_s}
        logger.log_metrics({k: v for k, v in final.items() if v is not None}, step=max(0, trainer.global_step))
    return {
        "status": "diverged" if diverged else "finished",
        "diverged": diverged,
        "diverged_at_update": strategy.diverged_at,
        "test_error": test_error,
        "test_loss": test_loss,
        "train_loss": strategy.recent_loss,
        "updates_done": done,
        "samples_trained": samples,
        "samples_per_s": samples / fit_s if fit_s > 0 else None,
        "fit_time_s": fit_s,
        "bytes_pushed_measured": strategy.bytes_pushed if compression is not None else None,
        "peak_snapshot_bytes": strategy.peak_snapshot_bytes,
        "resumed_from_update": start if start else None,
        "checkpoints_written": len(checkpointer.saves) if checkpointer else 0,
        "checkpoint_time_s": sum(s for _, s, _ in checkpointer.saves) if checkpointer else 0.0,
        "checkpoint_bytes": checkpointer.saves[-1][2] if checkpointer and checkpointer.saves else None,
    }
