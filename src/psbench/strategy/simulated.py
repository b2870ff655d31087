"""What ``ParameterServerStrategy.simulated`` reads from the user's Trainer, module and data::

    from psbench import ParameterServerStrategy
    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=4, learners=8, hardware="laptop", seed=0)
    trainer = pl.Trainer(strategy=strategy, max_epochs=2)
    trainer.fit(MyModule(), datamodule=MyData())   # μ = the train dataloader's batch size
    strategy.summary                               # a RunSummary: staleness, updates, sim_time_s, …

:class:`~psbench.strategy.ps_strategy.SimulatedStrategy` takes any LightningModule whose ``training_step`` returns
the loss of its batch (a tensor, or a dict with ``"loss"``) and whose ``configure_optimizers`` returns one optimizer,
the PS's (with lr schedulers, if any: ``interval="step"`` ones are stepped after every PS update, ``"epoch"`` ones
after every Lightning epoch, as Lightning's rule and ``frequency`` say). At ``setup`` — before the sanity check and
any update — it reads:

* N and μ: the train DataLoader's map-style dataset and its ``batch_size`` (:func:`train_loader`). The loader's
  sampler does not choose the samples: psbench's global sample stream does (:mod:`psbench.ps.samples`, a
  permutation of 0…N−1 per epoch seeded by ``seed``, Rudra §3.2's data server), so a ``shuffle=True`` loader gets
  psbench's reshuffling and a ``shuffle=False`` one is reshuffled too; a sampler that selects or weights samples is
  refused (wrap the subset in ``torch.utils.data.Subset``). Items are read ``dataset[i]`` (or ``__getitems__``) by
  index and collated by the loader's ``collate_fn``; its workers are not used.
* the run's length (:func:`run_gradients`): G = ⌊max_epochs·N/μ⌋ gradients (the CLI's ``epochs``), or max_steps PS
  updates (G = max_steps·c) when that is fewer; the simulator rounds G down to a multiple of c.
  ``trainer.global_step`` counts PS updates. Lightning epoch e holds the PS updates whose first sample lies in
  [e·N, (e+1)·N) of the sample stream (:func:`epoch_bounds`: an epoch is N samples consumed by the PS); every epoch
  runs as the same number of Trainer steps, each carrying consecutive updates (:func:`step_bounds`;
  ``updates_per_step``, null: the updates of ~128 samples, as in the CLI).

Then it simulates the schedule of the protocol × λ learners on the hardware/topology (the cost model's message is
the module's trainable parameters in fp32, or the codec's payloads) and executes it: each learner's gradient is the
module's ``training_step`` on its mini-batch at the weights it read
(:class:`~psbench.strategy.user_steps.UserLookahead`), and the PS update goes through
:func:`psbench.ps.apply.apply_update` with the module's optimizer — the step both engines use — with the lr
policy's w_l and the codec as in the CLI. The user's validation loop, ``self.log`` metrics, loggers and callbacks
run as usual; psbench adds ``ps/train_loss``, ``ps/staleness_mean_update`` and ``ps/sim_time_s`` to the loggers every
``log_every_n_updates`` updates and ``ps/loss`` to the progress bar. Lightning's ``gradient_clip_val`` clips each PS
update's aggregate by its norm. The module trains on the Trainer's accelerator (cpu, or cuda without a codec).

Refused, each with one line (:class:`~psbench.errors.ConfigError`), before any update: manual optimization,
several optimizers, ``accumulate_grad_batches``, ``limit_train_batches``/``overfit_batches``/``fast_dev_run`` (the
PS runs every update of its schedule), precisions other than 32-true, resuming from a Lightning checkpoint (the
snapshots and the schedule position are not in it), a train loader that is not one ``DataLoader`` over a map-style
dataset, a ``training_step`` that returns no loss. Known differences from a real cluster: the learners share the
module's buffers (BatchNorm's running statistics are updated by every learner's call, in schedule order), and
``training_step``'s ``batch_idx`` is the index of the PS update its gradient is applied in. Torch only (no config).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from psbench.errors import require
from psbench.ps import Protocol, Schedule
from psbench.strategy.chunks import UpdateChunks
from psbench.strategy.device import run_device
from psbench.summary import RunSummary


# -- the Trainer, the module --------------------------------------------------------------------------------
def check_module(model) -> float | None:
    """Refuse what cannot be a learner or a PS step; the Trainer's ``gradient_clip_val`` (the PS's, per update)."""
    require(
        model.automatic_optimization,
        "automatic_optimization",
        False,
        "True (the strategy applies every PS update itself; a training_step that steps its own optimizers "
        "cannot be a learner)",
    )
    trainer = model.trainer
    require(
        trainer.accumulate_grad_batches == 1,
        "accumulate_grad_batches",
        trainer.accumulate_grad_batches,
        "1 (a PS update already sums the c gradients of its learners)",
    )
    clip = trainer.gradient_clip_val
    require(
        not clip or trainer.gradient_clip_algorithm in (None, "norm"),
        "gradient_clip_algorithm",
        trainer.gradient_clip_algorithm,
        "norm (each PS update's aggregate is clipped to its global norm)",
    )
    return float(clip) if clip else None


def check_trainer(trainer) -> None:
    """Refuse the Trainer settings that would skip updates of the schedule, resume, or change the float type."""
    limit = trainer.limit_train_batches
    why = "(the PS runs every update of its schedule: size the run with max_epochs or max_steps)"
    require(isinstance(limit, float) and limit == 1.0, "limit_train_batches", limit, f"1.0 {why}")
    require(not trainer.overfit_batches, "overfit_batches", trainer.overfit_batches, f"0 {why}")
    require(not trainer.fast_dev_run, "fast_dev_run", trainer.fast_dev_run, f"False {why}")
    require(
        trainer.ckpt_path is None,
        "ckpt_path",
        trainer.ckpt_path,
        "None (a Lightning checkpoint holds the weights, not the PS's snapshots and schedule position)",
    )
    require(
        str(trainer.precision) in ("32-true", "32"),
        "precision",
        trainer.precision,
        "32-true (the learners' gradients are computed in float32)",
    )


def schedulers(trainer) -> tuple[list, list]:
    """(``interval="step"`` lr scheduler configs, the others) of the module's one optimizer."""
    require(
        len(trainer.optimizers) == 1,
        "configure_optimizers",
        f"{len(trainer.optimizers)} optimizers",
        "one optimizer, the PS's",
    )
    configs = trainer.lr_scheduler_configs
    for c in configs:
        require(
            not (c.reduce_on_plateau and c.interval == "step"),
            "lr_scheduler.interval",
            c.interval,
            "epoch for ReduceLROnPlateau (it reads a metric of the evaluation)",
        )
    return [c for c in configs if c.interval == "step"], [c for c in configs if c.interval != "step"]


def step_epoch_schedulers(configs: list, epoch: int, metrics: Mapping[str, Any]) -> None:
    """Lightning's rule for ``interval="epoch"`` schedulers once epoch ``epoch`` − 1 is done: step where
    ``epoch % frequency == 0``; ReduceLROnPlateau with its ``monitor`` metric."""
    for c in configs:
        if epoch % c.frequency:
            continue
        if not c.reduce_on_plateau:
            c.scheduler.step()
            continue
        value = metrics.get(c.monitor)
        require(
            value is not None or not c.strict,
            "lr_scheduler.monitor",
            c.monitor,
            f"a metric the module logs (logged: {', '.join(metrics) or 'none'})",
        )
        if value is not None:
            c.scheduler.step(value)


def device(accelerator, compression: Mapping | None) -> torch.device:
    """The Trainer's accelerator as a device (:func:`psbench.strategy.device.run_device`): cpu, cuda or mps (the
    CPU with a codec)."""
    from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, MPSAccelerator

    names = {CPUAccelerator: "cpu", CUDAAccelerator: "cuda", MPSAccelerator: "mps"}
    name = next((n for cls, n in names.items() if isinstance(accelerator, cls)), None)
    require(name is not None, "accelerator", type(accelerator).__name__, "cpu, cuda or mps")
    return run_device(name, "accelerator", "with a codec (codecs run on the CPU)" if compression is not None else None)


# -- the data and the run's length ----------------------------------------------------------------------------
def train_loader(trainer, protocol: Protocol) -> tuple[Any, int, Callable]:
    """(map-style dataset, μ, collate_fn) of the Trainer's train DataLoader."""
    from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

    dl = trainer.fit_loop._data_source.dataloader()
    require(
        isinstance(dl, DataLoader),
        "train_dataloader",
        type(dl).__name__,
        "one torch.utils.data.DataLoader (the learners' samples are its dataset's items)",
    )
    ds, mu = dl.dataset, dl.batch_size
    require(
        not isinstance(ds, IterableDataset) and hasattr(ds, "__len__") and hasattr(ds, "__getitem__"),
        "train_dataloader.dataset",
        type(ds).__name__,
        "a map-style dataset (len() and [i]: the sample stream addresses samples by index)",
    )
    require(
        isinstance(mu, int) and mu >= 1,
        "train_dataloader.batch_size",
        mu,
        "an integer >= 1: μ, each learner's mini-batch (a batch_sampler does not say μ)",
    )
    n, s = len(ds), dl.sampler
    plain = type(s) is SequentialSampler or (type(s) is RandomSampler and not s.replacement and s.num_samples == n)
    require(
        plain,
        "train_dataloader.sampler",
        type(s).__name__,
        "shuffle=True or False (psbench's sample stream orders every sample once per epoch; to train on part "
        "of a dataset, wrap it in torch.utils.data.Subset)",
    )
    c = protocol.gradients_per_update
    require(
        c * mu <= n,
        "train_dataloader.batch_size",
        mu,
        f"at most N/c = {n // c} (N = {n} samples; one PS update of c = {c} mini-batches within an epoch)",
    )
    return ds, mu, dl.collate_fn


def run_gradients(trainer, num_train: int, mu: int, protocol: Protocol) -> int:
    """G of the run (the module docstring), within what a schedule may hold in this machine's memory."""
    from psbench.ps.schedule import max_gradients

    c = protocol.gradients_per_update
    epochs, steps = trainer.fit_loop.max_epochs, trainer.max_steps
    bounds = {"max_epochs": epochs * num_train // mu} if epochs is not None and epochs >= 0 else {}
    if steps is not None and steps >= 0:
        bounds["max_steps"] = steps * c
    require(
        bounds != {},
        "max_epochs",
        epochs,
        "a finite run: max_epochs >= 1 or max_steps >= 1 (psbench simulates the schedule before training)",
    )
    key = min(bounds, key=bounds.__getitem__)
    g, value = bounds[key], epochs if key == "max_epochs" else steps
    require(g >= c, key, value, f"a run of at least one PS update (c = {c} mini-batches of μ = {mu})")
    most = max_gradients()
    require(
        g <= most,
        key,
        value,
        f"a run of at most {most:,} gradients (the schedule must fit in half this "
        f"machine's memory); this one has {g:,}",
    )
    return g


def epoch_bounds(schedule: Schedule, samples_per_gradient: int, num_train: int, epochs: int) -> list[int]:
    """b_0 = 0 ≤ b_1 ≤ … ≤ b_epochs = U: epoch e's updates are b_e … b_{e+1} − 1, those whose first sample (after
    the samples the PS consumed before them) lies in [e·N, (e+1)·N)."""
    consumed = schedule.offsets[:-1] * samples_per_gradient
    b = np.searchsorted(consumed, np.arange(epochs + 1) * num_train, side="left").tolist()
    b[-1] = schedule.num_updates
    return [min(x, schedule.num_updates) for x in b]


def step_bounds(epochs: list[int], per_step: int) -> tuple[list[int], int]:
    """(chunk bounds, S): each epoch's updates in S near-equal Trainer steps (some empty if an epoch has fewer
    than S updates), S = the most any epoch needs at ``per_step`` updates a step."""
    sizes = np.diff(epochs)
    steps = max(1, int(-(-sizes.max(initial=0) // per_step)))
    b = [epochs[0]]
    for a, n in zip(epochs[:-1], sizes.tolist(), strict=True):
        b += [a + j * n // steps for j in range(1, steps + 1)]
    return b, steps


class EpochChunks(UpdateChunks):
    """:class:`~psbench.strategy.chunks.UpdateChunk` j = updates ``b[j]`` … ``b[j+1]`` − 1."""

    def __init__(self, updates: torch.utils.data.Dataset, b: list[int]) -> None:
        self.updates, self.b = updates, b


class EpochLoader:
    """The Trainer's train data: Lightning epoch e yields chunks e·S … e·S + S − 1 (S = ``steps``; none past the
    schedule's epochs). Lightning calls ``loader.sampler.set_epoch(e)`` before every epoch: the loader is its own
    sampler."""

    def __init__(self, chunks: EpochChunks, steps: int, epochs: int) -> None:
        self.chunks, self.steps, self.epochs, self.epoch = chunks, steps, epochs, 0
        self.sampler = self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        first = self.epoch * self.steps
        return iter(()) if self.epoch >= self.epochs else (self.chunks[j] for j in range(first, first + self.steps))


def epoch_loader(
    schedule: Schedule, updates, mu: int, num_train: int, max_epochs: int | None, per_step: int | None
) -> EpochLoader:
    """The :class:`EpochLoader` of a schedule: as many epochs as ``max_epochs`` (or as the updates reach)."""
    from psbench.strategy.chunks import auto_updates_per_step

    reach = int(schedule.offsets[-2] * mu // num_train) + 1  # the epoch of the last update, + 1
    bounds = epoch_bounds(schedule, mu, num_train, max(max_epochs, reach) if max_epochs and max_epochs > 0 else reach)
    b, steps = step_bounds(bounds, per_step or auto_updates_per_step(schedule, mu))
    return EpochLoader(EpochChunks(updates, b), steps, len(bounds) - 1)


# -- the learners' mini-batches -------------------------------------------------------------------------------
def transfer(strategy, trainer, before_transfer: Callable) -> Callable[[Any], Any]:
    """A learner's collated mini-batch to the device through the batch-transfer hooks, as Lightning moves a batch
    (``on_before_batch_transfer``, ``transfer_batch_to_device``, ``on_after_batch_transfer``); without hooks of the
    user's (module or datamodule), the move alone (none on the CPU: ~0.2 ms a call less)."""
    from lightning_fabric.utilities.apply_func import move_data_to_device
    from pytorch_lightning.strategies import Strategy
    from pytorch_lightning.utilities.model_helpers import is_overridden

    hooks = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")
    owners = [o for o in (strategy.lightning_module, trainer.datamodule) if o is not None]
    if any(is_overridden(h, o) for h in hooks for o in owners):
        return lambda b: Strategy.batch_to_device(strategy, before_transfer(b))
    dev = strategy.root_device
    return (lambda b: b) if dev.type == "cpu" else (lambda b: move_data_to_device(b, dev))


def check_loss(module, batch) -> None:
    """``training_step`` on one learner's mini-batch returns a loss (:func:`~psbench.strategy.user_steps.step_loss`),
    before any work; its logging muted, the RNG and the buffers (BatchNorm's statistics) left as they were."""
    from psbench.strategy.user_steps import muted, step_loss

    buffers = {k: b.detach().clone() for k, b in module.named_buffers()}
    with muted(module), torch.random.fork_rng(devices=[]):
        step_loss(module.training_step(batch, 0))
    with torch.no_grad():
        for k, b in module.named_buffers():
            b.copy_(buffers[k])


def memory_budget(schedule: Schedule, param_bytes: int, by_row: bool, mb: float | None) -> int:
    """The look-ahead's budget in bytes (:func:`psbench.strategy.executor.memory_budget`'s rule)."""
    from psbench.ps.snapshots import SnapshotStore
    from psbench.strategy.lookahead import minimum_bytes
    from psbench.strategy.options import DEFAULT_MEMORY_BUDGET_MB

    need = minimum_bytes(schedule, param_bytes, by_row)
    budget = int(float(mb if mb is not None else DEFAULT_MEMORY_BUDGET_MB) * 2**20)
    if mb is None:
        return max(budget, need)
    require(
        need <= budget,
        "memory_budget_mb",
        mb,
        f"at least {need / 2**20:.1f} MiB for this schedule: it holds up to {SnapshotStore.peak_count(schedule)} "
        f"weight snapshots of {param_bytes / 2**20:.2f} MiB at once",
    )
    return budget


# -- what ran -------------------------------------------------------------------------------------------------
def summary(
    strategy,
    schedule: Schedule,
    sim_stats: Mapping[str, Any],
    mu: int,
    num_train: int,
    compression: str,
    fit_s: float | None,
) -> RunSummary:
    """The run as the CLI's :class:`~psbench.summary.RunSummary` fields that apply: the schedule's staleness,
    updates, samples, simulated time and bytes as the simulator counted them, and what the fit did."""
    samples = schedule.num_gradients * mu
    done = strategy.updates_done
    trained = int(schedule.offsets[done]) * mu
    return RunSummary(
        status="diverged" if strategy.diverged else "finished",
        diverged=strategy.diverged,
        diverged_at_update=strategy.diverged_at,
        train_loss=strategy.recent_loss,
        engine="sim",
        protocol=strategy.protocol.label,
        compression=compression,
        **sim_stats,
        samples=samples,
        epochs_done=samples / num_train,
        schedule_sha256=schedule.sha256(),
        updates_done=done,
        samples_trained=trained,
        fit_time_s=fit_s,
        samples_per_s=trained / fit_s if fit_s else None,
        bytes_pushed_measured=strategy.bytes_pushed if strategy.compression is not None else None,
        peak_snapshot_bytes=strategy.peak_snapshot_bytes,
    )
