"""What ``ParameterServerStrategy.simulated`` reads from the user's Trainer, module and data::

    from psbench import ParameterServerStrategy
    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=4, learners=8, hardware="laptop", seed=0)
    trainer = pl.Trainer(strategy=strategy, max_epochs=2)
    trainer.fit(MyModule(), datamodule=MyData())   # μ = the train dataloader's batch size
    strategy.summary                               # a RunSummary: staleness, updates, sim_time_s, …

:class:`~psbench.strategy.ps_strategy.ParameterServerStrategy` with a ``plan`` takes any LightningModule whose
``training_step`` returns the loss of its batch (a tensor, or a dict with ``"loss"``) and whose ``configure_optimizers``
returns one optimizer, the PS's (with lr schedulers, if any, stepped where Lightning steps them:
:mod:`psbench.strategy.schedulers`). At ``setup`` — before the sanity check and any update — it reads:

* N and μ: the train DataLoader's map-style dataset and its ``batch_size`` (:func:`train_loader`). The loader's
  sampler does not choose the samples: psbench's global sample stream does (:mod:`psbench.ps.samples`, a
  permutation of 0…N−1 per epoch seeded by ``seed``, Rudra §3.2's data server), so a ``shuffle=True`` loader gets
  psbench's reshuffling and a ``shuffle=False`` one is reshuffled too; a sampler that selects or weights samples is
  refused (wrap the subset in ``torch.utils.data.Subset``). Items are read ``dataset[i]`` (or ``__getitems__``) by
  index and collated by the loader's ``collate_fn``; its workers are not used.
* the run's length (:func:`run_gradients`): G = ⌊max_epochs·N/μ⌋ gradients (the CLI's ``epochs``), or max_steps PS
  updates (G = max_steps·c) when that is fewer; the simulator rounds G down to a multiple of c.
  ``trainer.global_step`` counts PS updates. Lightning epoch e holds the PS updates whose first sample lies in
  [e·N, (e+1)·N) of the sample stream (:func:`epoch_bounds`: an epoch is N samples consumed by the PS; one that
  ``max_steps`` ends early is stopped mid-way, as in plain Lightning: :func:`step_bounds`); every epoch
  runs as the same number of Trainer steps, each carrying consecutive updates (:func:`step_bounds`;
  ``updates_per_step``, null: the updates of ~128 samples, as in the CLI, or one update where the Trainer counts
  its steps for checkpoints or evaluations: :func:`counts_trainer_steps`).

Then it plans the run as the psbench command does (:func:`plan_run`, through :mod:`psbench.ps.plan`): G, the codec's
payloads in the cost model (else the module's trainable parameters in fp32), the simulation of the protocol × λ
learners on the hardware/topology with its progress lines and the trace of its first updates — drawn into
``timeline.png`` beside the Trainer's logs (``trainer.log_dir``, and an artifact of an MLflow logger) when the Trainer
has a logger or checkpoints — and executes it: each learner's gradient is the
module's ``training_step`` on its mini-batch at the weights it read
(:class:`~psbench.strategy.user_steps.UserLookahead`), and the PS update goes through
:func:`psbench.ps.apply.apply_update` with the module's optimizer — the step both engines use — with the lr
policy's w_l and the codec as in the CLI. The user's validation loop, ``self.log`` metrics, loggers and callbacks
run as usual; psbench adds ``ps/train_loss``, ``ps/staleness_mean_update``, ``ps/sim_time_s`` and ``ps/epoch`` to the
loggers every ``log_every_n_updates`` updates (``ps/epoch`` at evaluations too; ``epoch`` stays Lightning's) and
``ps/loss`` to the progress bar. Lightning's ``gradient_clip_val`` clips each PS
update's aggregate by its norm. The module trains on the Trainer's accelerator (cpu, or cuda without a codec).

Refused, each with one line (:class:`~psbench.errors.ConfigError`), before any update: manual optimization,
several optimizers or none (``configure_optimizers`` returning None), ``accumulate_grad_batches``, a module that
overrides a hook no PS update calls (:data:`SKIPPED_HOOKS`: ``backward``, ``on_after_backward``, ``optimizer_step``,
``configure_gradient_clipping``, …), a callback that changes the trainable parameters or the lr schedulers during the
fit or accumulate gradients (:data:`REFUSED_CALLBACKS`: ``BackboneFinetuning``, ``StochasticWeightAveraging``,
``GradientAccumulationScheduler``),
``limit_train_batches``/``overfit_batches``/``fast_dev_run`` (the PS runs every update of its schedule),
``reload_dataloaders_every_n_epochs``, precisions
other than 32-true, a ``ckpt_path`` the fit cannot resume from (:mod:`psbench.strategy.resume`;
``validate``/``test``/``predict`` take any), a train loader that is not one ``DataLoader`` over a
map-style dataset, a ``training_step`` that returns no loss. Known differences from a real cluster: the learners share
the module's buffers (BatchNorm's running statistics are updated by every learner's call, in schedule order), and
``training_step``'s ``batch_idx`` is the index of the PS update its gradient is applied in. Torch only (no config).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from psbench import lightning_namespaces as namespaces
from psbench import lightning_seams as seams
from psbench.errors import require
from psbench.ps import Protocol, Schedule, plan
from psbench.run_setup import SimulatedSetup
from psbench.strategy.chunks import UpdateChunk, UpdateChunks
from psbench.strategy.device import run_device

# -- the Trainer, the module --------------------------------------------------------------------------------
#: LightningModule hooks of automatic optimization that no PS update calls: a learner's gradient is
#: ``torch.autograd.grad`` of its ``training_step`` loss (no backward pass of the Trainer's), and the PS steps and clips
#: the optimizer itself (:func:`psbench.ps.apply.step_update`); a module that overrides one is refused, not ignored
SKIPPED_HOOKS = {
    "backward": "the learners' gradients are torch.autograd.grad of training_step's loss",
    "on_before_backward": "the learners' gradients are torch.autograd.grad of training_step's loss",
    "on_after_backward": "the learners' gradients are torch.autograd.grad of training_step's loss",
    "optimizer_step": "the PS steps the optimizer once per update; schedule warm-up with an lr scheduler",
    "configure_gradient_clipping": "the PS clips each update's aggregate by the Trainer's gradient_clip_val",
}
#: callbacks whose work the PS cannot do: they change which parameters train, or swap the lr schedulers, during the fit
#: (the trainable parameters and the schedulers are read once, at setup), or accumulate batches
REFUSED_CALLBACKS = {
    "callbacks.BaseFinetuning": "it unfreezes parameters during the fit; the PS trains those trainable at its start",
    "callbacks.StochasticWeightAveraging": "it swaps the lr schedulers during the fit; the PS steps those of setup",
    "callbacks.GradientAccumulationScheduler": "a PS update already sums the c gradients of its learners",
}


def check_module(model) -> float | None:
    """Refuse what cannot be a learner or a PS step; the Trainer's ``gradient_clip_val`` (the PS's, per update)."""
    require(
        model.automatic_optimization,
        "automatic_optimization",
        False,
        "True (the strategy applies every PS update itself; a training_step that steps its own optimizers "
        "cannot be a learner)",
    )
    namespace = namespaces.of(model)
    if namespace is not None:
        base = namespaces.get(namespace, "LightningModule")
        for hook, why in SKIPPED_HOOKS.items():
            require(
                getattr(type(model), hook) is getattr(base, hook),
                f"LightningModule.{hook}",
                f"overridden by {type(model).__name__}",
                f"not overridden ({why})",
            )
    trainer = model.trainer
    for cb in trainer.callbacks:
        for dotted, why in REFUSED_CALLBACKS.items():
            name = dotted.rpartition(".")[2]
            require(not namespaces.is_instance(cb, dotted), "callbacks", type(cb).__name__, f"no {name} ({why})")
    require(
        trainer.accumulate_grad_batches == 1,
        "accumulate_grad_batches",
        trainer.accumulate_grad_batches,
        "1 (a PS update already sums the c gradients of its learners)",
    )
    clip = trainer.gradient_clip_val
    algorithm = trainer.gradient_clip_algorithm
    require(
        not clip or algorithm in (None, "norm"),
        "gradient_clip_algorithm",
        getattr(algorithm, "value", algorithm),
        "norm (each PS update's aggregate is clipped to its global norm)",
    )
    return float(clip) if clip else None


def check_trainer(trainer) -> None:
    """Refuse the Trainer settings that would skip updates of the schedule, resume, or change the float type."""
    limit = trainer.limit_train_batches
    why = "(the PS runs every update of its schedule: size the run with max_epochs or max_steps)"
    require(not trainer.fast_dev_run, "fast_dev_run", trainer.fast_dev_run, f"False {why}")  # each sets limit_*
    require(not trainer.overfit_batches, "overfit_batches", trainer.overfit_batches, f"0 {why}")
    require(isinstance(limit, float) and limit == 1.0, "limit_train_batches", limit, f"1.0 {why}")
    require(
        not trainer.reload_dataloaders_every_n_epochs,
        "reload_dataloaders_every_n_epochs",
        trainer.reload_dataloaders_every_n_epochs,
        "0 (the PS plans every update of the fit from the train loader's dataset at setup)",
    )
    require(
        str(trainer.precision) in ("32-true", "32"),
        "precision",
        trainer.precision,
        "32-true (the learners' gradients are computed in float32)",
    )


def one_optimizer(count: int | str) -> None:
    """Refuse ``configure_optimizers`` unless it returned one optimizer (``count``: how many it returned)."""
    require(count == 1, "configure_optimizers", f"{count} optimizers", "one optimizer, the PS's")


def schedulers(trainer) -> list:
    """The lr scheduler configs (``LRSchedulerConfig``) of the module's one optimizer, which must update weights: not
    Lightning's stand-in for ``configure_optimizers`` returning None, not one without parameters."""
    one_optimizer(len(trainer.optimizers))
    opt = trainer.optimizers[0]
    groups = getattr(opt, "param_groups", None) or []
    require(
        any(p.requires_grad for g in groups for p in g["params"]),
        "configure_optimizers",
        "None" if type(opt).__name__ == "_MockOptimizer" else f"a {type(opt).__name__} without trainable parameters",
        "one optimizer over the module's trainable parameters, the PS's (without one no update changes a weight)",
    )
    return list(trainer.lr_scheduler_configs)


def device(accelerator, compression: Mapping | None, named: Sequence[torch.device] = ()) -> torch.device:
    """The Trainer's accelerator as a device (:func:`psbench.strategy.device.run_device`): cpu, cuda or mps (the
    CPU with a codec), in either Lightning namespace; on CUDA the one device its ``devices`` flag ``named``
    (``devices=[3]``: cuda:3), else the current one (``devices="auto"`` names them all: a sweep worker that selected
    its GPU keeps it)."""
    from psbench import lightning_namespaces as ns

    names = {"CPUAccelerator": "cpu", "CUDAAccelerator": "cuda", "MPSAccelerator": "mps"}
    name = next((n for cls, n in names.items() if ns.is_instance(accelerator, f"accelerators.{cls}")), None)
    require(name is not None, "accelerator", type(accelerator).__name__, "cpu, cuda or mps")
    cuda = [d for d in named if d.type == "cuda"]
    index = cuda[0].index if len(cuda) == 1 else None
    codec = "with a codec (codecs run on the CPU)" if compression is not None else None
    return run_device(name, "accelerator", codec, index)


# -- the data and the run's length ----------------------------------------------------------------------------
def train_loader(trainer, protocol: Protocol) -> tuple[Any, int, Callable]:
    """(map-style dataset, μ, collate_fn) of the Trainer's train DataLoader."""
    from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

    dl = seams.train_dataloader(trainer)
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
    """G of the run (the module docstring): :func:`psbench.ps.plan.gradient_count` of ``max_epochs`` and
    ``max_steps``, the CLI's rule."""
    c = protocol.gradients_per_update
    epochs, steps = trainer.max_epochs, trainer.max_steps
    limits = {"max_epochs": (epochs, epochs * num_train / mu)} if epochs is not None and epochs >= 0 else {}
    if steps is not None and steps >= 0:
        limits["max_steps"] = (steps, steps * c)
    require(
        limits != {},
        "max_epochs",
        epochs,
        "a finite run: max_epochs >= 1 or max_steps >= 1 (psbench simulates the schedule before training)",
    )
    return plan.gradient_count(protocol, num_train, mu, limits)


def epoch_bounds(schedule: Schedule, samples_per_gradient: int, num_train: int, epochs: int) -> list[int]:
    """b_0 = 0 ≤ b_1 ≤ … ≤ b_epochs = U: epoch e's updates are b_e … b_{e+1} − 1, those whose first sample (after
    the samples the PS consumed before them) lies in [e·N, (e+1)·N)."""
    consumed = schedule.offsets[:-1] * samples_per_gradient
    b = np.searchsorted(consumed, np.arange(epochs + 1) * num_train, side="left").tolist()
    b[-1] = schedule.num_updates
    return [min(x, schedule.num_updates) for x in b]


def step_bounds(epochs: list[int], per_step: int, cut: int = 0) -> tuple[list[int], int]:
    """(chunk bounds, S): each epoch's updates in S near-equal Trainer steps (some empty if an epoch has fewer
    than S updates), S = the most any epoch needs at ``per_step`` updates a step. ``cut`` (:func:`cut_updates`): the
    last epoch's updates ``max_steps`` left out; that epoch is laid out whole (S ≥ 2), its updates before its last
    step, so that Lightning stops it at ``max_steps`` before its end, as in plain Lightning (no end-of-epoch
    evaluation or epoch-interval lr step; its evaluations by ``val_check_interval`` at plain Lightning's updates)."""
    u, sizes = epochs[-1], np.diff(epochs)
    last = epochs.index(u) - 1  # the last epoch with updates
    if cut:
        sizes[last] += cut
    steps = max(2 if cut else 1, int(-(-sizes.max(initial=0) // per_step)))
    b = [epochs[0]]
    for e, (a, n) in enumerate(zip(epochs[:-1], sizes.tolist(), strict=True)):
        ends = [min(u, a + j * n // steps) for j in range(1, steps + 1)]
        if cut and e == last:
            ends[-2] = u  # (its last step, never reached, empty)
        b += ends
    return b, steps


def cut_updates(schedule: Schedule, mu: int, num_train: int, c: int, max_epochs: int | None, reach: int) -> int:
    """The updates ``max_steps`` leaves out of the run's last epoch (``reach`` − 1: the last update's): those of the
    run to ``max_epochs`` (unbounded: None or -1) whose first sample lies in that epoch after the run's last update
    (c gradients of μ samples each); 0 where the run ends at an epoch's end."""
    u = schedule.num_updates
    k = -(-(reach * num_train - int(schedule.offsets[-1]) * mu) // (c * mu))  # to the next epoch's first sample
    if max_epochs is not None and max_epochs >= 0:
        k = min(k, max_epochs * num_train // mu // c - u)
    return max(0, k)


class EpochChunks(UpdateChunks):
    """:class:`~psbench.strategy.chunks.UpdateChunk` j = updates ``b[j]`` … ``b[j+1]`` − 1."""

    def __init__(self, updates: torch.utils.data.Dataset, b: list[int]) -> None:
        self.updates, self.b = updates, b


class EpochLoader:
    """The Trainer's train data: Lightning epoch e (``epoch()``, the Trainer's ``current_epoch``) yields chunks
    e·S … e·S + S − 1 (S = ``steps``; none past the schedule's epochs). The Trainer's epoch, not the one Lightning
    hands a sampler's ``set_epoch``: a fit of ``max_steps`` resumed at an epoch's end sets that one ahead."""

    def __init__(self, chunks: EpochChunks, steps: int, epochs: int, epoch: Callable[[], int]) -> None:
        self.chunks, self.steps, self.epochs, self.epoch = chunks, steps, epochs, epoch
        self._resume: int | None = None  # the chunk a resumed fit's first epoch starts at

    def resume_at(self, step: int, update: int) -> None:
        """A fit resumed at Trainer step ``step`` (counted across epochs), before PS update ``update``
        (:mod:`psbench.strategy.resume`): the next iteration starts there."""
        b = self.chunks.b
        require(
            b[min(step, len(b) - 1)] == update,
            "ckpt_path",
            f"a checkpoint at Trainer step {step}, before update {update}",
            "one a ModelCheckpoint or trainer.save_checkpoint saved between Trainer steps of this schedule",
        )
        self._resume = step

    def state_dict(self) -> dict:
        """Nothing: the position is the PS's (its updates applied, in the checkpoint's PS state); having
        ``state_dict``/``load_state_dict`` makes the loader resumable mid-epoch for Lightning."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    @property
    def bounds(self) -> list[int]:
        """The first update of each epoch, and U: epoch e's updates are ``bounds[e]`` … ``bounds[e + 1]`` − 1."""
        return self.chunks.b[:: self.steps]

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        """Lazily, as a DataLoader's sampler: Lightning makes the iterator before the epoch starts (and, on a resumed
        fit, before the strategy knows where it resumes)."""
        epoch = self.epoch()
        if epoch >= self.epochs:
            return
        first, end = epoch * self.steps, (epoch + 1) * self.steps
        if self._resume is not None:
            first, self._resume = max(first, self._resume), None
        for j in range(first, end):
            yield self.chunks[j]


def counts_trainer_steps(trainer) -> bool:
    """Does the Trainer do something every so many batches that must mean PS updates — a ``ModelCheckpoint`` with
    ``every_n_train_steps``, a ``val_check_interval`` other than once per epoch? Then a Trainer step carries one
    update (``updates_per_step`` unset): Lightning counts its batches, and several updates per batch would skip
    checkpoints and evaluations."""
    interval = trainer.val_check_interval
    return any(seams.checkpoint_every_n_train_steps(trainer)) or isinstance(interval, int) or interval != 1.0


def epoch_loader(
    schedule: Schedule, updates, mu: int, num_train: int, trainer, per_step: int | None, c: int
) -> EpochLoader:
    """The :class:`EpochLoader` of a schedule of c gradients an update: as many epochs as the Trainer's ``max_epochs``
    (or as the updates reach), an epoch ``max_steps`` cuts laid out whole (:func:`cut_updates`, :func:`step_bounds`)."""
    from psbench.strategy.chunks import auto_updates_per_step

    max_epochs = trainer.max_epochs
    reach = int(schedule.offsets[-2] * mu // num_train) + 1  # the epoch of the last update, + 1
    bounds = epoch_bounds(schedule, mu, num_train, max(max_epochs, reach) if max_epochs and max_epochs > 0 else reach)
    cut = cut_updates(schedule, mu, num_train, c, max_epochs, reach)
    b, steps = step_bounds(bounds, per_step or auto_updates_per_step(schedule, mu), cut)
    return EpochLoader(EpochChunks(updates, b), steps, len(bounds) - 1, lambda: trainer.current_epoch)


# -- the learners' mini-batches -------------------------------------------------------------------------------
def transfer(strategy, trainer, before_transfer: Callable) -> Callable[[Any], Any]:
    """A learner's collated mini-batch to the device through the batch-transfer hooks, as Lightning moves a batch
    (``on_before_batch_transfer``, ``transfer_batch_to_device``, ``on_after_batch_transfer``); without hooks of the
    user's (module or datamodule), the move alone (none on the CPU: ~0.2 ms a call less)."""
    from lightning_fabric.utilities.apply_func import move_data_to_device

    from psbench import lightning_namespaces as ns

    name = strategy.lightning_namespace  # the Trainer's: its module's hooks, its Strategy's move
    is_overridden, base = ns.get(name, "utilities.model_helpers.is_overridden"), ns.get(name, "strategies.Strategy")
    hooks = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")
    owners = [o for o in (strategy.lightning_module, trainer.datamodule) if o is not None]
    if any(is_overridden(h, o) for h in hooks for o in owners):
        return lambda b: base.batch_to_device(strategy, before_transfer(b))
    dev = strategy.root_device
    return (lambda b: b) if dev.type == "cpu" else (lambda b: move_data_to_device(b, dev))


def check_loss(module, batch) -> None:
    """``training_step`` on one learner's mini-batch returns a loss (:func:`~psbench.strategy.user_steps.step_loss`),
    before any work; its logging muted, the RNGs (the CPU's and the module's device's: dropout draws there) and the
    buffers (BatchNorm's statistics) left as they were."""
    from psbench.strategy.user_steps import muted, step_loss

    buffers = {k: b.detach().clone() for k, b in module.named_buffers()}
    dev = next(module.parameters()).device
    accelerator = {} if dev.type == "cpu" else {"device_type": dev.type}
    with muted(module), torch.random.fork_rng(devices=[dev] if accelerator else [], **accelerator):
        step_loss(module.training_step(batch, 0))
    with torch.no_grad():
        for k, b in module.named_buffers():
            b.copy_(buffers[k])


# -- the module's hooks --------------------------------------------------------------------------------------
def skip_chunks_in_batch_hook(module) -> None:
    """Lightning hands the module's ``on_before_batch_transfer`` hooks every batch, a Trainer step's chunk of PS
    updates too: the chunk passes them by (each learner's mini-batch goes through them in :func:`transfer`)."""

    def wrap(hook: Callable) -> Callable:
        def before_transfer(batch, dataloader_idx: int = 0):
            return batch if isinstance(batch, UpdateChunk) else hook(batch, dataloader_idx)

        return before_transfer

    seams.wrap_batch_hook(module, wrap)


def restore(module, clip: float | None) -> None:
    """The module and its Trainer as the user made them (:meth:`ParameterServerStrategy.teardown`): Lightning's batch
    hook, automatic optimization (``global_step`` still counting the PS updates), Lightning's scheduler steps,
    ``gradient_clip_val``."""
    seams.unwrap_batch_hook(module)
    trainer = seams.attached_trainer(module)
    if trainer is not None:
        seams.count_manual_steps_as_automatic(trainer)
        seams.unwrap_plateau_steps(trainer)
        if clip is not None:
            trainer.gradient_clip_val = clip
    module.automatic_optimization = True


# -- the plan of the run --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Planned:
    """What :func:`plan_run` reads and builds: the simulated run, μ and N, the gradient source (each learner's
    ``training_step``), the codecs, the Trainer's train data and the files written (``timeline.png``)."""

    sim: plan.SimulatedRun
    batch_size: int
    num_train: int
    lookahead: Any  # psbench.strategy.user_steps.UserLookahead
    compression: Any  # psbench.compression.pipeline.LearnerCompression | None
    loader: EpochLoader
    artifacts: list[str]


def plan_run(setup: SimulatedSetup, strategy, trainer) -> Planned:
    """Read N, μ and the run's length; plan the run (:mod:`psbench.ps.plan`, the psbench command's functions); build
    the learners' gradients and the Trainer's data; check the module's loss on one mini-batch."""
    from psbench.strategy.lookahead import memory_budget
    from psbench.strategy.user_steps import UserLookahead, UserUpdates

    module, protocol = strategy.lightning_module, setup.protocol
    ds, mu, collate = train_loader(trainer, protocol)
    params = {k: p for k, p in module.named_parameters() if p.requires_grad}
    require(params != {}, "LightningModule", type(module).__name__, "a module with trainable parameters")
    gradients = run_gradients(trainer, len(ds), mu, protocol)
    codecs = None
    if setup.compression is not None:
        from psbench.compression.pipeline import LearnerCompression

        codecs = LearnerCompression(setup.compression, {k: p.shape for k, p in params.items()}, setup.seed)
    cost = replace(setup.cost, message_bytes=4 * sum(p.numel() for p in params.values()))
    sim = plan.simulate(
        protocol,
        plan.codec_cost(cost, codecs, protocol),
        setup.topology,
        mu,
        gradients,
        setup.seed,
        progress=setup.progress,
        timeline_updates=setup.timeline_updates,
    )
    artifacts = _timeline(setup, sim, mu, trainer)
    updates = UserUpdates(
        sim.schedule,
        ds,
        collate,
        mu,
        setup.policy,
        protocol.learners,
        setup.seed,
        next(iter(params.values())).dtype,
        strategy.root_device,
        transfer(strategy, trainer, seams.batch_hook(module)),
    )
    check_loss(module, updates.batch([0]))
    per_step = setup.updates_per_step or (1 if counts_trainer_steps(trainer) else None)
    c = protocol.gradients_per_update
    loader = epoch_loader(sim.schedule, updates, mu, len(ds), trainer, per_step, c)
    p_bytes = sum(p.numel() * p.element_size() for p in params.values())
    by_row = codecs is not None or setup.batching == "loop"
    lookahead = UserLookahead(
        sim.schedule,
        updates,
        module,
        list(params),
        setup.batching,
        per_learner=codecs is not None,
        budget_bytes=memory_budget(sim.schedule, p_bytes, by_row, setup.memory_budget_mb, "memory_budget_mb"),
        epochs=loader.bounds,  # each epoch's gradients after its start hooks
    )
    return Planned(sim, mu, len(ds), lookahead, codecs, loader, artifacts)


def _timeline(setup: SimulatedSetup, sim: plan.SimulatedRun, mu: int, trainer) -> list[str]:
    """``timeline.png`` in ``trainer.log_dir`` where the Trainer writes files of its own (a logger or checkpoints),
    logged as an artifact of its MLflow loggers; the files written."""
    if sim.trace is None or not (trainer.loggers or trainer.checkpoint_callback):
        return []
    from pathlib import Path

    folder = Path(trainer.log_dir or trainer.default_root_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = plan.plot_timeline(sim, setup.protocol, mu, setup.hardware, setup.topology, folder / "timeline.png")
    assert path is not None
    from psbench import lightning_namespaces as ns

    for lg in trainer.loggers:
        if ns.is_instance(lg, "loggers.MLFlowLogger"):
            lg.experiment.log_artifact(lg.run_id, path)
    return [path]
