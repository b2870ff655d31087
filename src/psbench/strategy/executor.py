"""The simulator's executor: train on a :class:`~psbench.run_setup.RunSetup`'s simulated schedule (``engine=sim``).

1. the setup (:func:`psbench.assemble.build_run`) holds the data, the seeded model, the cost model and the
   schedule of ⌊epochs·N/μ⌋ gradients (capped by ``trainer.max_updates``) simulated on it (:mod:`psbench.ps.plan`);
2. the schedule, its staleness histogram and the picture of its first updates (``timeline.png``:
   :mod:`psbench.ps.timeline`) are saved in the run dir;
3. ``schedule_only``: statistics only; otherwise module, strategy, Trainer, fit:
   :class:`~psbench.strategy.module.ClassifierModule` under :class:`~psbench.strategy.ParameterServerStrategy`
   (:func:`build_strategy`: K PS updates per Trainer step, ``trainer.updates_per_step``, null:
   :func:`~psbench.strategy.chunks.auto_updates_per_step`) in a Trainer evaluating test error every epoch's worth of
   updates (:func:`build_trainer`), fit with signals at update boundaries (:func:`fit`);
4. the run's end both engines share (:func:`psbench.models.evaluate.finish`) and its
   :class:`~psbench.summary.RunSummary` (``summary.json``), the strategy's (:attr:`ParameterServerStrategy.summary`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from psbench import lifecycle
from psbench.errors import require
from psbench.models.evaluate import evaluate, finish, quick_evaluate
from psbench.ps import plan as run_plan
from psbench.ps.local import uses_local_steps
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
    from psbench.strategy.module import ClassifierModule

    t_start = time.perf_counter()
    assert setup.schedule is not None, "engine=sim runs a simulated schedule (psbench.assemble.build_run)"
    sim, protocol = run_plan.SimulatedRun(setup.schedule, dict(setup.sim_stats or {}), setup.trace), setup.protocol
    artifacts = [
        str(sim.schedule.save(run_dir / "schedule.npz")),
        str(plot_staleness(sim.stats["staleness_hist"], protocol.label, run_dir / "staleness_hist.png")),
    ]
    timeline = run_plan.plot_timeline(
        sim, protocol, setup.batch_size, setup.hardware, setup.topology, run_dir / "timeline.png"
    )
    artifacts += [timeline] if timeline is not None else []
    if setup.schedule_only:
        codec = (setup.compression or {}).get("name", "none")
        summary = run_plan.summary(sim, setup.samples_per_gradient, setup.data.num_train, codec)
        return replace(summary, artifacts=artifacts, wall_time_s=time.perf_counter() - t_start)
    module = ClassifierModule(setup.net, setup.optimizer, _per_epoch(setup), loss=setup.loss)
    strategy, data = build_strategy(setup, sim, plan)
    trainer, checkpointer = build_trainer(setup, strategy, logger, plan, t_start)
    fit_s = fit(trainer, module, data, setup, plan)
    done, start = strategy.summary, plan.start if plan is not None else 0
    assert done is not None, "the strategy has the schedule and its statistics"
    saves = checkpointer.saves if checkpointer is not None else []
    summary = replace(
        done,
        artifacts=artifacts,
        fit_time_s=fit_s,
        samples_per_s=done.samples_trained / fit_s if fit_s > 0 and done.samples_trained is not None else None,
        resumed_from_update=start if start else None,
        checkpoints_written=len(saves),
        checkpoint_time_s=sum(s for _, s, _ in saves),
        checkpoint_bytes=saves[-1][2] if saves else None,
    )
    summary = finish(
        summary,
        setup.net,
        lambda: _evaluation(setup, strategy, module),
        run_dir,
        setup.trainer.save_weights,
        logger,
        trainer.global_step,
        ("samples_per_s",),
    )
    return replace(summary, wall_time_s=time.perf_counter() - t_start + (plan.prior("wall_time_s") if plan else 0.0))


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
    """``trainer.memory_budget_mb`` in bytes (:func:`psbench.strategy.lookahead.memory_budget`, the rule of both
    doors); a schedule that cannot run within it is refused here, up front."""
    from psbench.strategy.lookahead import memory_budget as budget

    if uses_local_steps(setup.protocol.name):  # local-step protocols keep λ learner models, not snapshots
        return None
    assert setup.schedule is not None
    by_row = setup.codecs is not None or setup.trainer.batching == "loop"
    p_bytes = sum(p.numel() * p.element_size() for p in setup.net.parameters())
    return budget(setup.schedule, p_bytes, by_row, setup.trainer.memory_budget_mb, "trainer.memory_budget_mb")


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


def _per_epoch(setup: RunSetup) -> float:
    schedule = setup.schedule
    assert schedule is not None
    return updates_per_epoch(
        schedule.num_updates, schedule.num_gradients, setup.samples_per_gradient, setup.data.num_train
    )


def build_strategy(setup: RunSetup, sim: run_plan.SimulatedRun, plan=None):
    """(the :class:`~psbench.strategy.ParameterServerStrategy` of the setup's schedule with the built-in gradient
    source, its Trainer data: :class:`~psbench.strategy.chunks.UpdateChunks` of the updates start…U−1)."""
    from psbench.strategy import ParameterServerStrategy, UpdateBatches
    from psbench.strategy.chunks import UpdateChunks, auto_updates_per_step

    schedule, dm, protocol, tr, spg = (
        sim.schedule,
        setup.data,
        setup.protocol,
        setup.trainer,
        setup.samples_per_gradient,
    )
    every = min(max(1, round(_per_epoch(setup) * float(tr.eval_every_epochs))), schedule.num_updates)
    local, dev = None, device(setup)
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
    strategy = ParameterServerStrategy(
        batching=tr.batching,
        log_every_n_updates=tr.log_every_n_updates,
        local=local,
        compression=setup.codecs,
        num_train=dm.num_train,
        memory_budget_bytes=memory_budget(setup),
        gradient_clip_val=tr.gradient_clip_val,
        divergence_factor=tr.divergence_factor,
        device=dev,
        eval_every=every,
        sim=sim,
        samples_per_gradient=spg,
        defer_read_back=True,  # build_trainer gives it psbench's callbacks only
    )
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
    chunks = UpdateChunks(updates, start, schedule.num_updates, k, every)
    return strategy, torch.utils.data.DataLoader(chunks, batch_size=None, shuffle=False, num_workers=0)


def build_trainer(setup: RunSetup, strategy, logger=None, plan=None, t_start: float = 0.0):
    """(the Trainer that fits the strategy's updates — one epoch, evaluations when the strategy says, progress,
    throughput, signals and checkpoints as callbacks —, the checkpointer or None)."""
    import logging
    import warnings

    import pytorch_lightning as pl

    from psbench.strategy.interrupt import StopOnSignal
    from psbench.strategy.progress import EpochThroughput

    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*returned `None`.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    callbacks, rich = _progress_callbacks(setup.trainer.progress)
    callbacks += [EpochThroughput(), StopOnSignal()]
    checkpointer = None
    if plan is not None:
        from psbench.checkpoint import Checkpointer

        assert setup.schedule is not None
        checkpointer = Checkpointer(plan, setup.schedule.sha256(), t_start)
        callbacks.append(checkpointer)
    trainer = pl.Trainer(
        strategy=strategy,
        accelerator=strategy.root_device.type,
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
        deterministic=setup.trainer.deterministic,
    )  # gradient clipping is the strategy's (it applies every update itself: manual optimization)
    return trainer, checkpointer


def fit(trainer, module, data, setup: RunSetup, plan=None) -> float:
    """``trainer.fit``, a signal stopping it at the next update boundary (:mod:`psbench.lifecycle`; with a checkpoint
    when ``plan`` has one: KILLED once it is written); the seconds it took (a resumed run's before included)."""
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    from psbench.checkpoint import RunStopped

    strategy, dm, net = trainer.strategy, setup.data, setup.net
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
        strategy.settle()  # (a divergence among the updates not read back yet is said in the summary)
        net.cpu()
        k.progress.update(
            diverged_at_update=strategy.diverged_at,
            divergence=strategy.divergence,
            updates_done=strategy.updates_done,
            updates_total=strategy.schedule.num_updates,
            samples=strategy.samples_done,
            sim_time_s=strategy.sim_time_s,
            **quick_evaluate(net, _layout(net, dm.x_test), dm.y_test, loss=setup.loss),
        )
        raise
    return time.perf_counter() - t0 + (plan.prior("fit_time_s") if plan is not None else 0.0)


def _evaluation(setup: RunSetup, strategy, module) -> tuple[float | None, float]:
    """(test error, test loss) after the last update: the fit's last evaluation where it came after it, of in-memory
    test data on the CPU, summed batch by batch as :func:`~psbench.models.evaluate.evaluate` sums them (the same
    batches, layout and kernels: the same two numbers, already computed); else evaluated now."""
    dm, net, last = setup.data, setup.net, module.last_evaluation
    if (
        strategy.root_device.type == "cpu"
        and isinstance(dm.x_test, torch.Tensor)
        and last is not None
        and last[0] == strategy.updates_done
        and last[3] == len(dm.y_test)
    ):
        return last[1], last[2]
    return evaluate(net, _layout(net, dm.x_test), dm.y_test, batch=dm.eval_batch_size, loss=setup.loss)
