"""Lightning's private internals psbench touches, all here: one function per seam, nowhere else.

A PS strategy does what Lightning has no public hook for — it decides when to evaluate in PS updates, reads the
user's train DataLoader before the loop iterates it, logs at an update's own step, hands every learner's mini-batch
to ``self.log``'s batch-size inference, and counts PS updates as ``global_step`` in both optimization modes. Each
function below is the one place that names a private attribute, and ``tests/test_lightning_seams.py`` holds a
behavioural test per seam that fails on a Lightning whose internals moved; :func:`check` says the same at run time,
in one line naming the attribute and the version, before any update. Tested with pytorch-lightning 2.6
(:data:`TESTED`), in either namespace (``pytorch_lightning``, ``lightning.pytorch``: the same code); the dependency
allows ``>=2.4,<3`` and relies on these checks rather than on a pin, so a newer Lightning either passes them or fails
loudly at ``setup``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

#: the Lightning minor versions the seam tests ran on
TESTED = ("2.6",)


def check(trainer) -> None:
    """Every seam exists on this Lightning (a ``RuntimeError`` naming the first missing one and the version)."""
    loop, module = trainer.fit_loop, trainer.lightning_module
    seams: dict[str, Callable[[], Any]] = {
        "fit_loop._data_source.dataloader": lambda: loop._data_source.dataloader,
        "fit_loop._can_stop_early": lambda: type(loop)._can_stop_early,
        "fit_loop.max_batches, fit_loop.setup_data": lambda: (loop.max_batches, loop.setup_data),
        "fit_loop.epoch_loop._should_check_val_fx": lambda: loop.epoch_loop._should_check_val_fx,
        "fit_loop.epoch_loop._batches_that_stepped": lambda: loop.epoch_loop._batches_that_stepped,
        "fit_loop.epoch_loop.update_lr_schedulers": lambda: loop.epoch_loop.update_lr_schedulers,
        "fit_loop.on_advance_end": lambda: loop.on_advance_end,
        "Trainer._results": lambda: trainer._results,
        "LightningModule._on_before_batch_transfer": lambda: module._on_before_batch_transfer,
        "LightningModule._trainer": lambda: module._trainer,
        "Trainer._accelerator_connector._parallel_devices": lambda: devices(trainer),
        "the optimization loops' step progress": lambda: step_counters(trainer),
    }
    for name, seam in seams.items():
        try:
            seam()
        except AttributeError:
            from psbench import lightning_namespaces as ns

            found = ns.version(ns.of(trainer) or "pytorch_lightning")
            raise RuntimeError(
                f"psbench's ParameterServerStrategy needs Lightning's {name}, which {found} does not have "
                f"(tested with {', '.join(TESTED)}: pip install '{found.split()[0]}=={TESTED[-1]}.*')"
            ) from None


def devices(trainer) -> list:
    """The devices the Trainer's ``devices`` flag names (``accelerator="gpu", devices=[3]``: [cuda:3]), which
    Lightning hands only to a parallel strategy."""
    return list(trainer._accelerator_connector._parallel_devices or [])


def train_dataloader(trainer) -> Any:
    """The train DataLoader the user passed to ``fit`` (or their datamodule's), before the loop iterates it."""
    return trainer.fit_loop._data_source.dataloader()


@contextlib.contextmanager
def batches_are_updates(trainer, per_epoch: int) -> Iterator[None]:
    """While the module's ``configure_optimizers`` runs: the Trainer's train batches per epoch are ``per_epoch``, the
    PS updates (``trainer.estimated_stepping_batches`` counts optimizer steps; a Trainer step carries several
    updates). The train data is set up first, as Lightning does when that property is read before the loop."""
    loop = trainer.fit_loop
    loop.setup_data()
    was, loop.max_batches = loop.max_batches, per_epoch
    try:
        yield
    finally:
        loop.max_batches = was


def checkpoint_every_n_train_steps(trainer) -> list[int]:
    """``every_n_train_steps`` of each of the Trainer's ``ModelCheckpoint`` callbacks (0: not by steps)."""
    return [int(cb._every_n_train_steps or 0) for cb in trainer.checkpoint_callbacks]


def evaluate_when(trainer, should: Callable[..., bool]) -> None:
    """Lightning asks ``should(data_fetcher)`` after every Trainer step whether to run the validation loop."""
    trainer.fit_loop.epoch_loop._should_check_val_fx = should


def plateau_steps_at(trainer, step: Callable[[str], None]) -> None:
    """``step(interval)`` runs where Lightning's automatic optimization steps its ReduceLROnPlateau schedulers of that
    ``interval``: ``"step"`` after the evaluation that follows a Trainer step, ``"epoch"`` after an epoch's
    ``on_train_epoch_end`` hooks — both before the next step's or epoch's hooks (a ``LearningRateMonitor``'s). In
    manual optimization Lightning steps no scheduler there; what it would step still runs first. The epoch a fit
    resumed in mid-way, where Lightning steps no scheduler (it has not seen the epoch's metrics), steps at the end of
    ``fit_loop.on_advance_end``, still before the next epoch's hooks (``step`` steps what is owed, once)."""
    fit_loop = trainer.fit_loop
    loop = fit_loop.epoch_loop
    unwrap_plateau_steps(trainer)  # (a Trainer that fits again: one wrapper)
    lightnings, epoch_end = loop.update_lr_schedulers, fit_loop.on_advance_end

    def update_lr_schedulers(interval: str, update_plateau_schedulers: bool) -> None:
        lightnings(interval, update_plateau_schedulers=update_plateau_schedulers)
        if update_plateau_schedulers:
            step(interval)

    def on_advance_end() -> None:
        epoch_end()
        step("epoch")

    loop.update_lr_schedulers, fit_loop.on_advance_end = update_lr_schedulers, on_advance_end


def unwrap_plateau_steps(trainer) -> None:
    """Lightning's own scheduler steps again (:func:`plateau_steps_at` undone)."""
    trainer.fit_loop.epoch_loop.__dict__.pop("update_lr_schedulers", None)
    trainer.fit_loop.__dict__.pop("on_advance_end", None)


def can_stop_early(trainer) -> bool:
    """Lightning's rule for a stop requested now (``min_steps``/``min_epochs`` reached): validation runs then."""
    return bool(trainer.fit_loop._can_stop_early)


def log_at(trainer, step: int) -> None:
    """The step metrics logged from now on are logged at (and that Lightning's lr schedulers count)."""
    trainer.fit_loop.epoch_loop._batches_that_stepped = step


def log_batch(trainer, batch: Any) -> None:
    """``self.log`` infers the batch size of an epoch-mean metric from ``batch`` (one learner's mini-batch)."""
    results = trainer._results
    if results is not None:
        results.batch, results.batch_size = batch, None


def wrap_batch_hook(module, wrap: Callable[[Callable], Callable]) -> Callable:
    """Replace the module's ``_on_before_batch_transfer`` (which runs its and its datamodule's
    ``on_before_batch_transfer`` on every batch, before ``batch_to_device``) by ``wrap(hook)``; the new one."""
    module._on_before_batch_transfer = wrap(module._on_before_batch_transfer)
    return module._on_before_batch_transfer


def batch_hook(module) -> Callable:
    """The module's ``_on_before_batch_transfer`` (wrapped or not): what a batch goes through before the move."""
    return module._on_before_batch_transfer


def unwrap_batch_hook(module) -> None:
    """The module's own ``_on_before_batch_transfer`` again."""
    module.__dict__.pop("_on_before_batch_transfer", None)


def attached_trainer(module) -> Any:
    """The Trainer the module is attached to, or None (``module.trainer`` raises when there is none)."""
    return module._trainer


def step_counters(trainer) -> tuple[Any, Any, Any]:
    """(the batch progress, automatic optimization's optimizer-step progress, manual optimization's): the counters
    ``global_step`` reads, whichever optimization the module uses."""
    loop = trainer.fit_loop.epoch_loop
    return (
        loop.batch_progress,
        loop.automatic_optimization.optim_progress.optimizer.step,
        loop.manual_optimization.optim_step_progress,
    )


def count_manual_steps_as_automatic(trainer) -> None:
    """After a fit in manual optimization, automatic optimization's step counter takes manual's, so ``global_step``
    still counts the PS updates once the module is back in automatic optimization."""
    _, automatic, manual = step_counters(trainer)
    automatic.load_state_dict(manual.state_dict())


def set_optimizer_steps(trainer, k: int) -> None:
    """Manual optimization's optimizer-step counter (``global_step``) at ``k``: the PS updates that stand after a
    divergence found once its later updates were applied (:mod:`psbench.strategy.pending` undoes them)."""
    p = step_counters(trainer)[2].total
    p.ready = p.completed = k


def resume_step_counters(trainer, k: int) -> None:
    """Every counter ``global_step`` and the logging step read, at ``k`` (a run resumed before update ``k``)."""
    for progress in step_counters(trainer):
        p = progress.total
        p.ready = p.completed = k
        for name in ("started", "processed"):  # the trackers that count them
            if hasattr(p, name):
                setattr(p, name, k)
    log_at(trainer, k)


def lean_optimizer_step(trainer, module, optimizer) -> Callable[[], None] | None:
    """Manual optimization's optimizer step without ``LightningOptimizer.step`` where that wrapper adds nothing but
    the step count: full precision, no profiler, and no ``on_before_optimizer_step`` in the module or any callback
    (a gradient-norm logger, say). It counts the step as the wrapper does (``global_step``) and calls
    ``optimizer.step()``; None where the wrapper is needed. The wrapper's hooks, closure and profiler calls cost
    ~0.85 ms of host time per PS update on an H200 machine (docs/how-to/gpu.md)."""
    from psbench import lightning_namespaces as ns

    name = ns.of(trainer)
    if name is None:
        return None
    precision = ns.get(name, "plugins.precision.Precision")
    passthrough = ns.get(name, "profilers.PassThroughProfiler")
    is_overridden = ns.get(name, "utilities.model_helpers.is_overridden")
    callback, lightning_module = ns.get(name, "Callback"), ns.get(name, "LightningModule")
    if (
        type(trainer.precision_plugin) is not precision
        or type(trainer.profiler) is not passthrough
        or is_overridden("on_before_optimizer_step", module, lightning_module)
        or any(is_overridden("on_before_optimizer_step", cb, callback) for cb in trainer.callbacks)
    ):
        return None
    progress = step_counters(trainer)[2]

    def step() -> None:
        progress.increment_ready()
        optimizer.step()
        progress.increment_completed()

    return step
