"""Lightning strategy that executes a PS schedule: one Trainer step = one or several PS updates (Rudra §3.1).

For update i the master weights are at timestamp i. The gradients an update applies are computed
ahead, in batches across upcoming updates, on the weight snapshots they read
(:class:`~psbench.strategy.lookahead.Lookahead`, bounded by ``memory_budget_bytes``). The strategy
then applies the aggregated gradient g_i = Σ_l (w_l/c)·Δθ_l itself (manual optimization) with the PS update
step both engines share (:func:`psbench.ps.apply.step_update`: p.grad = g_i, gradient clipping, the configured
torch optimizer's step θ_{i+1} = θ_i − α0·g_i with momentum/AdaGrad/Adam state as usual, the lr schedule's
step) — the float operations of Lightning's automatic optimization of the linear surrogate Σ⟨p, g_i⟩, without
the surrogate's backward. Callbacks, loggers and Lightning's step counter keep working.

A Trainer step may carry K consecutive updates (:class:`~psbench.strategy.chunks.UpdateChunk`, when updates
are small): they are applied one by one, exactly as K steps would; per-update metrics go to the loggers at the
update's own step, the callbacks' ``on_ps_update_start(trainer, i)`` (checkpoints, signals) runs between them,
a divergence ends the step at its update, and evaluations follow the updates (every ``eval_every`` updates).

With a local-step protocol (``local``), the aggregated gradient is replaced by the learners'
commits (:mod:`psbench.strategy.local_steps`), applied by plain SGD at the learners' lr.

With a codec (``compression``, :class:`~psbench.compression.pipeline.LearnerCompression`), each
learner's gradient is computed on its own (:meth:`Lookahead.learner_gradients`), compressed and decoded with
that learner's codec state (error-feedback memory, RNG), and only then weighted and summed;
``bytes_pushed`` counts the measured payloads. Without one, the path above is unchanged.

A non-finite update (the papers expect this for stale gradients at an unmodulated α0) skips
the step, sets ``diverged`` and stops the fit cleanly; so does a training loss that climbs to
``divergence_factor`` × its start (:mod:`psbench.ps.divergence`; that update is applied).

Two doors, one strategy. The psbench command hands in the schedule it simulated (``schedule``, with its statistics
``sim``) and psbench's :class:`~psbench.strategy.module.ClassifierModule`, whose gradients the built-in look-ahead
computes from per-sample losses (:class:`~psbench.strategy.lookahead.Lookahead`). A user's script passes
``plan`` (:meth:`ParameterServerStrategy.simulated`): the schedule is planned at ``setup`` from the Trainer, the
module and the data by the same functions (:mod:`psbench.ps.plan`, :mod:`psbench.strategy.simulated`), and each
learner's gradient is the module's own ``training_step`` (:class:`~psbench.strategy.user_steps.UserLookahead`).
The gradient source is the look-ahead object (:meth:`Lookahead.weights` names the weights it differentiates); every
other rule — the module and Trainer checks, the lr schedulers' rule, the update step, divergence, metrics and the
:attr:`summary` — is the same code for both.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from pytorch_lightning.strategies import SingleDeviceStrategy

from psbench import lightning_seams as seams
from psbench.checkpoint import set_rng_state
from psbench.errors import require
from psbench.lr.steps import scales_step
from psbench.optimizer.build import update_terms
from psbench.ps import Schedule, divergence
from psbench.ps import plan as run_plan
from psbench.ps.apply import step_update
from psbench.ps.divergence import DEFAULT_FACTOR
from psbench.run_setup import SimulatedSetup
from psbench.strategy import resume, simulated, stop
from psbench.strategy.batches import UpdateBatch
from psbench.strategy.chunks import UpdateChunk
from psbench.strategy.local_steps import LocalLearners
from psbench.strategy.lookahead import Lookahead
from psbench.strategy.pending import Applied, Pending
from psbench.strategy.schedulers import SchedulerSteps
from psbench.summary import RunSummary

if TYPE_CHECKING:  # what the core's methods extend; at run time each namespace's class adds it (bottom of the file)
    _Base = SingleDeviceStrategy
else:
    _Base = object


class ParameterServerStrategyCore(_Base):
    """Executes a PS schedule in a Lightning Trainer (the module docstring): the one definition of
    :class:`ParameterServerStrategy` (``pytorch_lightning``) and :class:`psbench.lightning.ParameterServerStrategy`
    (``lightning.pytorch``), each this core over its namespace's ``SingleDeviceStrategy``
    (:mod:`psbench.lightning_namespaces`: a Trainer accepts only a Strategy of its own namespace).

    Args:
        schedule: the schedule to execute (the psbench command's); None: planned at ``setup`` from ``plan``.
        batching: how the look-ahead computes gradients (``auto`` | ``grouped`` | ``vmap`` | ``loop``).
        log_every_n_updates: psbench's metrics every this many updates (``ps/…`` with ``plan``).
        local: the learners of a local-step protocol (their commits replace the look-ahead's gradients).
        compression: per-learner codecs (:class:`~psbench.compression.pipeline.LearnerCompression`), or None.
        num_train: N, for the ``epoch`` metric and the summary.
        memory_budget_bytes: bound on snapshots and gradients computed ahead (:func:`~psbench.strategy.lookahead.
            memory_budget`). ahead: at most this many updates ahead (None: all that can be).
        gradient_clip_val: each PS update's aggregate clipped to this norm (or the Trainer's ``gradient_clip_val``).
        divergence_factor: the run diverged when its train loss exceeds this × its start (None: only non-finite).
        device: the device to train on (None: the Trainer's accelerator, :func:`~psbench.strategy.simulated.device`).
        eval_every: evaluate after every this many updates (None: Lightning's ``val_check_interval``).
        sim: the simulated run ``schedule`` is of (statistics and trace: :attr:`summary`).
        samples_per_gradient: μ·H (:attr:`summary`'s samples).
        plan: :meth:`simulated`'s setup: the schedule, the codecs and the gradient source are planned at ``setup``.
        defer_read_back: the Trainer runs no code but psbench's (the psbench command's): hardsync's updates may be read
            back once per :attr:`Pending.MAX_UPDATES <psbench.strategy.pending.Pending.MAX_UPDATES>`, not before each
            of their one-update flushes (:mod:`psbench.strategy.pending`); a user's callbacks would see weights not
            read back yet.
    """

    strategy_name = "parameter_server"
    #: the Lightning namespace this class is a Strategy of (:data:`psbench.lightning_namespaces.NAMES`)
    lightning_namespace: ClassVar[str]
    #: the class :meth:`simulated` makes: this namespace's :class:`SimulatedStrategy`
    simulated_class: ClassVar[type]

    @classmethod
    def simulated(cls, protocol="hardsync", **options) -> Any:
        """The strategy for the user's own Lightning script: ``Trainer(strategy=ParameterServerStrategy.simulated(
        protocol="softsync", n=4, learners=8, hardware="laptop", seed=0))`` trains any LightningModule on the
        schedule simulated from the Trainer's data and length (:mod:`psbench.strategy.simulated` says what is read;
        the arguments are :func:`psbench.api.simulated_setup`'s, checked here). A :class:`SimulatedStrategy` of this
        class's Lightning namespace (``psbench.lightning.ParameterServerStrategy.simulated`` for ``lightning``)."""
        return cls.simulated_class(protocol, **options)

    def __repr__(self) -> str:
        """Names the namespace: a Trainer of the other one prints it in its refusal."""
        other = "psbench.lightning" if self.lightning_namespace == "pytorch_lightning" else "psbench"
        return (
            f"<{type(self).__name__} for {self.lightning_namespace}.Trainer (a Trainer of the other Lightning "
            f"namespace takes {other}.ParameterServerStrategy)>"
        )

    def __init__(
        self,
        schedule: Schedule | None = None,
        batching: str = "auto",
        vmap_threshold: int = 4,
        log_every_n_updates: int = 10,
        local: LocalLearners | None = None,
        compression=None,
        num_train: int | None = None,
        memory_budget_bytes: int | None = None,
        ahead: int | None = None,
        gradient_clip_val: float | None = None,
        divergence_factor: float | None = DEFAULT_FACTOR,
        device: torch.device | str | None = "cpu",
        eval_every: int | None = None,
        *,
        sim: run_plan.SimulatedRun | None = None,
        samples_per_gradient: int | None = None,
        plan: SimulatedSetup | None = None,
        defer_read_back: bool = False,
    ) -> None:
        if plan is not None:  # the user's door: planned at setup, on the Trainer's accelerator, ps/… metrics
            batching, log_every_n_updates, device = plan.batching, plan.log_every_n_updates, None
            divergence_factor = plan.divergence_factor
        super().__init__(device=torch.device(device or "cpu"))
        self.plan, self.sim = plan, sim
        self.schedule = sim.schedule if sim is not None else schedule
        self.prefix = "ps/" if plan is not None else ""  # psbench's metrics among the user's own
        self._device_given = device is not None
        self.local = local  # local-step protocols (downpour/agn/aeasgd/dynsgd): learner models + commits
        self.compression = compression  # per-learner codecs (psbench.compression.pipeline), or None
        self.bytes_pushed = 0
        self.lookahead: Lookahead | None = None  # the gradient source: built at setup (plan) or the first update
        self._lookahead_state: dict | None = None
        self.memory_budget_bytes, self.ahead = memory_budget_bytes, ahead
        self.gradient_clip_val = gradient_clip_val  # clip_grad_norm_ per update (Trainer(gradient_clip_val)'s)
        self.batching, self.vmap_threshold = batching, vmap_threshold
        self.log_every = max(1, log_every_n_updates)
        self.diverged_at: int | None = None
        self.divergence: str | None = None  # why it diverged (summary.json's divergence)
        self.divergence_factor = divergence_factor
        self._rule = divergence.LossRule(divergence_factor)
        self.last_loss = math.nan
        self._recent: deque[float] = deque(maxlen=100)
        self.updates_done = 0
        self.samples_done = 0
        self.sim_time_s = 0.0  # simulated time of the last update applied
        self.num_train = num_train  # N: ``epoch`` = samples the PS has consumed / N
        self.samples_per_gradient = samples_per_gradient
        self.eval_every = eval_every  # evaluate after every eval_every-th update (None: Lightning's val_check_interval)
        self._last_update: int | None = None  # the last update a Trainer step applied
        self.loader: Any = None  # the Trainer's train data when planned (psbench.strategy.simulated.EpochLoader)
        self.artifacts: list[str] = []  # files the plan wrote (timeline.png)
        self._lr = SchedulerSteps(None, [])  # the module's lr schedulers, stepped as Lightning steps them
        self._epoch = -1  # the epoch of the last Trainer step
        self._fitting = True  # connected to fit (else to validate, test or predict)
        self._stopped_by: stop.Stopped | None = None  # why the fit ended, once it has
        self._clip_was: float | None = None
        self._fit_s = [0.0, 0.0]
        self.pending = Pending()  # updates applied, not read back yet (psbench.strategy.pending)
        self.defer_read_back = defer_read_back
        self._by_step: bool | None = None  # the lr policy scales the optimizer's lr (psbench.lr.steps), not set yet
        self._optimizer_step: Any = None  # the fit's optimizer step, counted as Lightning's (set at its first update)
        self._step_loss: torch.Tensor | None = None  # the loss of the Trainer step's last update, not read back
        self._fit_trainer: weakref.ref | None = None  # the Trainer this strategy fits with
        self._resumed: tuple[dict, Any] | None = None  # (PS state, ckpt_path) of a fit resumed from a checkpoint
        self._rng: dict | None = None  # the RNG streams a resumed fit sets at the training loop's start
        self._in_step = False  # inside a Trainer step (a checkpoint saved now, by a signal handler, is not resumable)

    @property
    def _module(self) -> Any:
        """The LightningModule being fit, once connected."""
        module = self.lightning_module
        assert module is not None, "the Trainer connects the module before any hook runs"
        return module

    @property
    def epoch(self) -> float:
        """Epochs consumed by the updates applied so far (samples / N); logged as ``epoch``."""
        return self.samples_done / self.num_train if self.num_train else 0.0

    # -- the Trainer and the module (both doors) -------------------------------------------------------------
    def setup_environment(self) -> None:
        if not self._device_given:  # the one device rule, on the Trainer's accelerator
            codecs = self.plan.compression if self.plan is not None else self.compression
            trainer = seams.attached_trainer(self.lightning_module) if self.lightning_module is not None else None
            try:
                named = seams.devices(trainer) if trainer is not None else []
            except AttributeError:  # a Lightning whose connector moved: check's one line names the seam
                seams.check(trainer)
                raise
            self._root_device = simulated.device(self.accelerator, codecs, named)
        super().setup_environment()

    def connect(self, model) -> None:
        """To fit: check the module (:func:`~psbench.strategy.simulated.check_module`); the PS clips each update by
        the Trainer's ``gradient_clip_val`` (restored at :meth:`teardown`) and applies every update itself: manual
        optimization. To validate, test or predict (after a fit, from a checkpoint, or alone): a single-device
        strategy, as Lightning's own."""
        self._fitting = model.trainer.state.fn == "fit"
        self._resumed = self._rng = None  # (a ckpt_path's state: set by load_checkpoint, after this)
        if self._fitting:
            clip = simulated.check_module(model)
            if clip is not None:
                self.gradient_clip_val = clip
                self._clip_was, model.trainer.gradient_clip_val = model.trainer.gradient_clip_val, None
        super().connect(model)
        if self._fitting:
            model.automatic_optimization = False

    def setup(self, trainer) -> None:
        """To fit: check the Trainer; the lr schedulers' rule; with ``plan``, the schedule and the gradient source."""
        if not self._fitting:
            super().setup(trainer)
            return
        simulated.check_trainer(trainer)
        seams.check(trainer)
        require(
            self._fit_trainer is None or self._fit_trainer() is trainer,
            "strategy",
            "a ParameterServerStrategy another Trainer has fit with",
            "a new strategy per Trainer (its counts, snapshots and schedule are that fit's; the same Trainer may "
            "fit again)",
        )
        self._fit_trainer = weakref.ref(trainer)
        self._stopped_by, self._optimizer_step = None, None
        super().setup(trainer)  # (the plan first: setup_optimizers)
        self._lr = SchedulerSteps(self._module, simulated.schedulers(trainer))
        if self._resumed is not None:
            state, path = self._resumed
            self._resumed, self._rng = None, resume.restore(self, state, path)
        seams.plateau_steps_at(trainer, lambda interval: self._lr.plateau_steps(interval, trainer.callback_metrics))

    def _plan(self, trainer) -> None:
        """With ``plan``: the schedule, the gradient source and the Trainer's data (:func:`simulated.plan_run`)."""
        simulated.skip_chunks_in_batch_hook(self._module)
        if self.plan is not None:
            planned = simulated.plan_run(self.plan, self, trainer)
            self.sim, self.schedule, self.loader = planned.sim, planned.sim.schedule, planned.loader
            self.lookahead, self.compression, self.artifacts = planned.lookahead, planned.compression, planned.artifacts
            self.num_train, self.samples_per_gradient = planned.num_train, planned.batch_size

    def setup_optimizers(self, trainer) -> None:
        """The module's optimizer and lr scheduler configs as Lightning's automatic optimization reads them (a
        scheduler's ``monitor`` and ``strict`` kept: :mod:`psbench.strategy.schedulers` steps them); several
        optimizers refused in one line. The run is planned first, so that ``configure_optimizers`` reads the PS's
        run from the Trainer: ``estimated_stepping_batches`` counts its PS updates (Lightning's way to size a
        OneCycle or warm-up schedule), rounded up to a multiple of ``max_epochs`` where an epoch's updates vary."""
        module = self._module
        if not self._fitting:
            return super().setup_optimizers(trainer)
        self._plan(trainer)
        module.automatic_optimization = True
        try:
            if self.plan is not None and self.schedule is not None:
                epochs = max(trainer.max_epochs or 1, 1)
                with seams.batches_are_updates(trainer, math.ceil(self.schedule.num_updates / epochs)):
                    super().setup_optimizers(trainer)
            else:
                super().setup_optimizers(trainer)
        except RuntimeError as e:
            if "multiple optimizers" not in str(e):
                raise
            simulated.one_optimizer("several")  # Lightning's automatic optimization refused them
        finally:
            module.automatic_optimization = False

    def teardown(self) -> None:
        """The module and Trainer as the user made them after a fit: automatic optimization
        (``trainer.global_step`` still counts the PS updates), the Trainer's ``gradient_clip_val``, Lightning's batch
        hook."""
        module = self.lightning_module
        if module is not None and self._fitting:
            if self.plan is not None and self._stopped_by is None and self.schedule is not None:
                self._stopped_by = stop.reason(module.trainer, self)  # stopped before the loop ran (max_time)
            simulated.restore(module, self._clip_was)
        super().teardown()

    def process_dataloader(self, dataloader):
        training = self.lightning_module.trainer.training
        return self.loader if training and self.loader is not None else dataloader

    def load_checkpoint(self, checkpoint_path, *args, **kwargs) -> dict:
        """Lightning's checkpoint; to resume a fit, its PS state (:mod:`psbench.strategy.resume`, refused in one line
        before the checkpoint's weights are loaded into the module), restored at :meth:`setup` once planned."""
        checkpoint = super().load_checkpoint(checkpoint_path, *args, **kwargs)
        if self._fitting:
            require(
                self.plan is not None,
                "ckpt_path",
                str(checkpoint_path),
                "None (the psbench command resumes its runs with resume=)",
            )
            self._resumed = (resume.stashed(checkpoint, checkpoint_path), checkpoint_path)
        return checkpoint

    def lightning_module_state_dict(self) -> dict:
        """The module's weights for a checkpoint: the updates applied so far read back first."""
        if self._fitting and self.pending and self.lightning_module is not None:
            self.settle()
        return super().lightning_module_state_dict()

    def save_checkpoint(self, checkpoint: dict, filepath, storage_options=None) -> None:
        """Lightning's checkpoint, with the PS's state a fit resumes from (:mod:`psbench.strategy.resume`) when a
        user's fit saves it."""
        if self._fitting and self.plan is not None and self.loader is not None and self.lightning_module is not None:
            checkpoint[resume.KEY] = resume.entry(self, self._module.trainer)
        super().save_checkpoint(checkpoint, filepath, storage_options)

    def on_train_start(self) -> None:
        super().on_train_start()
        if self._rng is not None:  # a resumed fit: the RNG streams where its checkpoint was saved, the steps it owed
            set_rng_state(self._rng)
            self._rng = None
            self._lr.step_owed()
        self._fit_s[0] = time.perf_counter()
        if self.eval_every:  # evaluations counted in updates, whatever the updates per Trainer step
            seams.evaluate_when(self._module.trainer, self._evaluate_now)

    def on_validation_start(self) -> None:
        """An evaluation reads the updates' counts (``epoch``, samples): the updates applied so far read back first
        (an evaluation Lightning starts on its own, e.g. at an epoch's end in a user's Trainer)."""
        if self.lightning_module is not None and self.pending:
            self.settle()
        super().on_validation_start()

    def on_train_end(self) -> None:
        """The fit's end (:attr:`summary`: why it stopped)."""
        self.settle()  # (a fit stopped by Lightning between read-backs)
        self._fit_s[1] = time.perf_counter()
        trainer = self._module.trainer
        if self.plan is not None:  # the psbench command says how its runs end itself (psbench.lifecycle)
            self._stopped_by = stop.reason(trainer, self)
        super().on_train_end()

    def on_exception(self, exception: BaseException) -> None:
        """An exception ended the fit (Lightning calls this before re-raising it; a KeyboardInterrupt it swallows):
        :attr:`summary` says so, counting the updates applied before it (read back now)."""
        if self.pending and self.lightning_module is not None:
            with contextlib.suppress(Exception):  # the exception Lightning re-raises is the one to see
                self.settle()
        if self.plan is not None:
            self._stopped_by = stop.from_exception(exception)
        super().on_exception(exception)

    def _evaluate_now(self, data_fetcher=None) -> bool:
        """Evaluate after this Trainer step? After updates eval_every−1, 2·eval_every−1, …, and after a stop
        (Lightning's rule for ``should_stop``)."""
        trainer = self._module.trainer
        if trainer.should_stop and seams.can_stop_early(trainer):
            return True
        every, last = self.eval_every, self._last_update
        return every is not None and last is not None and (last + 1) % every == 0

    def validation_step(self, *args, **kwargs):
        """An evaluation also logs the PS's ``epoch`` (samples / N; ``ps/epoch`` in a user's script, where
        ``epoch`` stays Lightning's: a ``ModelCheckpoint`` names its files by it)."""
        out = super().validation_step(*args, **kwargs)
        if self.num_train:  # the evaluation's ``epoch`` too, not Lightning's 0
            self._module.log(
                self.prefix + "epoch", self.epoch, on_step=False, on_epoch=True, reduce_fx="max", batch_size=1
            )
        return out

    def batch_to_device(self, batch, device=None, dataloader_idx: int = 0):
        """Updates need no move (the gradient source reads the samples on the device); evaluation's batches do."""
        if isinstance(batch, UpdateBatch | UpdateChunk):
            return batch
        return super().batch_to_device(batch, device, dataloader_idx)

    # -- what ran ------------------------------------------------------------------------------------------------
    @property
    def recent_loss(self) -> float | None:
        """Mean training loss of the last (up to) 100 updates."""
        return sum(self._recent) / len(self._recent) if self._recent else None

    @property
    def diverged(self) -> bool:
        return self.diverged_at is not None

    @property
    def fit_time_s(self) -> float | None:
        """Seconds from the training loop's start to its end (None before it ended)."""
        a, b = self._fit_s
        return b - a if b > a else None

    @property
    def summary(self) -> RunSummary | None:
        """The run's :class:`~psbench.summary.RunSummary` (:func:`psbench.ps.plan.summary`): the schedule's staleness,
        updates, samples, simulated time and bytes as the simulator counted them, and what the fit did; None before
        the schedule is known with its statistics. A fit that ended before its plan (EarlyStopping, ``max_time``, an
        exception) counts the updates that ran (:func:`psbench.strategy.stop.executed`) and says why in ``status``
        and ``stop_reason`` (:mod:`psbench.strategy.stop`)."""
        if self.sim is None or self.num_train is None or self.samples_per_gradient is None:
            return None
        spg, done, fit_s = self.samples_per_gradient, self.updates_done, self.fit_time_s
        trained = int(self.sim.schedule.offsets[done]) * spg
        codecs, ended = self.compression, self._stopped_by
        summary = run_plan.summary(
            self.sim,
            spg,
            self.num_train,
            "none" if codecs is None else codecs.name,
            status=ended.status if ended is not None else "diverged" if self.diverged else "finished",
            stop_reason=ended.reason if ended is not None else None,
            failure_reason=ended.reason if ended is not None and ended.status in ("failed", "killed") else None,
            diverged=self.diverged,
            diverged_at_update=self.diverged_at,
            divergence=self.divergence,
            train_loss=self.recent_loss,
            updates_done=done,
            samples_trained=trained,
            fit_time_s=fit_s,
            samples_per_s=trained / fit_s if fit_s else None,
            bytes_pushed_measured=self.bytes_pushed if codecs is not None else None,
            peak_snapshot_bytes=self.peak_snapshot_bytes,
            artifacts=list(self.artifacts),
        )
        if ended is None or done >= self.sim.schedule.num_updates:
            return summary
        return replace(summary, **stop.executed(self.sim.schedule, self.sim.stats, done, spg, self.num_train))

    @property
    def check(self) -> dict | None:
        """How a ``training_step``'s gradients were computed: the concatenation and channels_last checks' outcomes
        (:class:`~psbench.strategy.user_steps.UserLookahead`); None before the first update, or for the built-in
        look-ahead."""
        found = getattr(self.lookahead, "check", None)
        return None if found is None else dict(found)

    def ps_state(self) -> dict:
        """Everything the rest of the run reads from the strategy (for :mod:`psbench.checkpoint`), the updates
        applied so far read back first (:meth:`settle`)."""
        if self.lightning_module is not None:
            self.settle()
        la = self.lookahead.state_dict() if self.lookahead is not None else self._lookahead_state
        return {
            "snapshots": la["snapshots"] if la else {},
            "lookahead": la,
            "updates_done": self.updates_done,
            "samples_done": self.samples_done,
            "bytes_pushed": self.bytes_pushed,
            "last_loss": self.last_loss,
            "recent": list(self._recent),
            "diverged_at": self.diverged_at,
            "divergence": self.divergence,
            "loss_rule": self._rule.state_dict(),
            "compression": self.compression.state_dict() if self.compression is not None else None,
            "local": self.local.state_dict() if self.local is not None else None,
        }

    def load_ps_state(self, s: dict) -> None:
        # a checkpoint from before look-ahead execution holds only the snapshots: resume update by update
        la = s.get("lookahead") or {"update": s["updates_done"], "snapshots": s["snapshots"]}
        if self.lookahead is not None and "computed" in la:  # planned (a user's fit): its state
            self.lookahead.load_state_dict(la)
        else:  # built at the first update (the psbench command)
            self._lookahead_state, self.lookahead = la, None
        self.updates_done, self.samples_done = s["updates_done"], s["samples_done"]
        self.bytes_pushed = s["bytes_pushed"]
        self.last_loss, self.diverged_at = s["last_loss"], s["diverged_at"]
        self.divergence = s.get("divergence")
        self._recent = deque(s["recent"], maxlen=self._recent.maxlen)
        self._rule = divergence.LossRule(self.divergence_factor)
        if "loss_rule" in s:  # (a checkpoint from before it: the rule takes its start from the resumed updates)
            self._rule.load_state_dict(s["loss_rule"])
        if self.compression is not None:
            self.compression.load_state_dict(s["compression"])
        if self.local is not None:
            self.local.load_state_dict(s["local"])

    @property
    def peak_snapshot_bytes(self) -> int:
        """Most bytes of weight snapshots and gradients computed ahead held at once (0: none were needed)."""
        return self.lookahead.peak_bytes if self.lookahead is not None else 0

    # -- training ------------------------------------------------------------------------------------------------
    def _ahead(self) -> Lookahead:
        """The gradient source: the planned one, else the built-in per-sample-loss look-ahead over the update
        batches the Trainer's data holds (built at the first update; a checkpoint's state resumed)."""
        if self.lookahead is None:
            module = self._module
            data = module.trainer.train_dataloader.dataset
            data = getattr(data, "updates", data)  # UpdateChunks: several updates per Trainer step
            while isinstance(data, torch.utils.data.Subset):  # a resumed run's updates start…U−1
                data = data.dataset
            assert self.schedule is not None
            self.lookahead = Lookahead(
                self.schedule,
                data,
                module.net,
                module.loss,
                self.batching,
                self.vmap_threshold,
                per_learner=self.compression is not None,
                budget_bytes=self.memory_budget_bytes,
                ahead=self.ahead,
            )
            st = self._lookahead_state
            if st is not None and "computed" in st:
                self.lookahead.load_state_dict(st)
            elif st is not None:
                self.lookahead.resume_update_by_update(st["update"], st["snapshots"])
        return self.lookahead

    def training_step(self, batch: UpdateBatch | UpdateChunk, batch_idx: int = 0, *args, **kwargs):
        """Apply one PS update, or each update of a chunk in order (see the module docstring); a Trainer step also
        steps the lr schedulers Lightning would step around its batch (:mod:`psbench.strategy.schedulers`); nothing is
        read back per update (:mod:`psbench.strategy.pending`): at the chunk's end only when an evaluation or the
        fit's end follows. Returns ``{"loss": …}`` of the step's last update, as a Trainer step's ``outputs`` hold it
        for ``on_train_batch_end`` (a tensor, not read back)."""
        if kwargs.pop("_of_chunk", False):
            return self._apply(cast(UpdateBatch, batch))
        trainer = self._module.trainer
        self._step_loss, self._in_step = None, True  # (until its updates are all applied: a checkpoint's boundary)
        if batch_idx == 0 or self._epoch != trainer.current_epoch:  # a new epoch: its steps count from its first update
            self._epoch = trainer.current_epoch  # (a planned epoch's first update, also where a fit resumes mid-epoch)
            self._lr.epoch_start = None if self.loader is None else self.loader.bounds[self._epoch]
        if isinstance(batch, UpdateChunk):
            for j, update in enumerate(batch.updates):
                if j:  # an update boundary inside the Trainer step: checkpoints, signals
                    for cb in trainer.callbacks:
                        hook = getattr(cb, "on_ps_update_start", None)
                        if hook is not None:
                            hook(trainer, update.index)
                self.training_step(update, batch_idx, _of_chunk=True)  # through self: one call per update
                if trainer.should_stop:  # diverged
                    break
            if self._reads_back_now():
                self.settle()
            if trainer.progress_bar_callback is not None and self.updates_done:  # the last loss read back
                self._module.log(self.prefix + "loss", self.last_loss, prog_bar=True, logger=False, batch_size=1)
        else:
            self._apply(batch)
        if batch_idx + 1 == trainer.num_training_batches:  # the epoch's schedulers step on read-back updates only
            self.settle()
            if not self.diverged:
                self._lr.epoch_done(trainer.current_epoch)
        self._in_step = False
        return None if self._step_loss is None else {"loss": self._step_loss}

    def _apply(self, batch: UpdateBatch) -> None:
        """Apply PS update ``batch.index``."""
        module = self._module
        trainer = module.trainer
        if self.diverged_at is not None:  # a read-back since the last update (a checkpoint's) found one diverged
            trainer.should_stop = True
            return None
        seams.log_at(trainer, batch.index)  # the step evaluations log at
        self._last_update = batch.index
        extra: dict[str, float] = {}
        pushed = 0
        gone: frozenset[str] = frozenset()
        if self.local is not None:  # the commits of H local steps per learner, in gradient units
            self.settle()  # (the CPU's local learners: read back per update, as they read their own losses)
            params = dict(module.net.named_parameters())
            lr = trainer.optimizers[0].param_groups[0]["lr"]
            grads, loss = self.local.update_direction(module.net, module.loss, batch, params, lr)
            extra["train_accuracy"] = self.local.last_accuracy  # AGN's f(t) for temporal efficiency (Eq 4)
        else:
            ahead = self._ahead()
            ahead.before_flush = self._settle_if_due  # the updates applied so far: at most once per flush
            if self._by_step is None:  # before the first gradient: where the lr policy acts (psbench.lr.steps)
                self._by_step = ahead.data.step_scaled = scales_step(trainer.optimizers[0], ahead.data.policy.name)
            params = ahead.weights()
            if self.compression is not None:
                learners, weights, each, loss = ahead.learner_gradients(batch.index, params)
                grads, pushed = self.compression.aggregate(learners, weights, each)
            else:
                grads, loss = ahead.update_gradient(batch.index, params)
            gone = ahead.gradless(batch.index)
        if self.diverged_at is not None:  # the read-back before this update found an earlier one diverged
            trainer.should_stop = True
            return None
        self.bytes_pushed += pushed
        plist, glist = list(params.values()), [grads[k] for k in params]
        opt = trainer.optimizers[0]
        loss_t = torch.as_tensor(loss, device=plist[0].device)
        loss_t = self._step_loss = loss_t.detach() if loss_t.requires_grad else loss_t
        bn = ahead.bn if self.local is None else None
        self.pending.begin(self._saved(plist), opt, self._lr.stepped_per_update)
        terms, schedulers = update_terms(plist, glist), self._lr.after_update(batch.index)
        applied = Applied(batch, loss_t, terms, glist, schedulers, extra, pushed=pushed)
        if gone:  # weights the loss did not use: p.grad None at the step (psbench.ps.apply.step_update)
            applied.gradless = frozenset(j for j, k in enumerate(params) if k in gone)
        if bn is not None:  # the PS's BatchNorm statistics (strategy/batchnorm.py), folded in after the step
            applied.bn_stats = ahead.running_stats(batch.index)
        if self._optimizer_step is None:  # Lightning's wrapper (it counts the step), or as lean where it adds nothing
            lean = seams.lean_optimizer_step(trainer, module, opt)
            self._optimizer_step = lean or module.optimizers().step
            # kept updates may outlive a flush only where no code but psbench's sees the weights before a read-back
            self.pending.defer = (
                self.defer_read_back and lean is not None and self.local is None and self.compression is None
            )
            if self.pending.defer and self.lookahead is not None:  # the kept aggregates count in its peak
                self.lookahead.held_outside = lambda: self.pending.bytes
        self._step(applied, plist, glist, step=self._optimizer_step)
        self.pending.add(applied)
        return None

    def _saved(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """What a rollback restores besides the optimizer: the weights, and BatchNorm's running statistics."""
        bn = self.lookahead.bn if self.local is None and self.lookahead is not None else None
        if bn is None:
            return params
        stats = [(m.running_mean, m.running_var, m.num_batches_tracked) for _, m in bn.tracked]
        return params + [t for ts in stats for t in ts if t is not None]

    def _step(self, a: Applied, params: list[torch.Tensor], grads: list[torch.Tensor], step=None) -> None:
        """Update ``a`` (:func:`psbench.ps.apply.step_update`), unchecked: the check is read back later."""
        step_update(
            params,
            grads,
            self._module.trainer.optimizers[0],
            lr_scale=a.batch.lr_scale,
            step_scale=a.batch.lr_scale if self._by_step else None,
            clip=self.gradient_clip_val,
            schedulers=a.schedulers,
            step=step,
            gradless=a.gradless,
        )
        if a.bn_stats is not None:
            assert self.lookahead is not None and self.lookahead.bn is not None
            self.lookahead.bn.apply(a.bn_stats)

    def _weights(self) -> dict[str, torch.Tensor]:
        """The weights the PS updates (the gradient source's, or the net's with local learners)."""
        if self.local is not None or self.lookahead is None:
            return dict(self._module.net.named_parameters())
        return self.lookahead.weights()

    def _reads_back_now(self) -> bool:
        """After this Trainer step, must the updates be read back? Before an evaluation and at the fit's end."""
        last = self._last_update
        return (
            self._evaluate_now()
            or (self.schedule is not None and last is not None and last + 1 >= self.schedule.num_updates)
            or self._module.trainer.should_stop
        )

    def _settle_if_due(self, room: int | None = None) -> None:
        """Before a look-ahead flush: :meth:`settle` if the kept updates must be read back now (:meth:`Pending.due`;
        ``room``: the bytes the memory budget leaves beside the flush)."""
        if self.pending.due(room):
            self.settle()

    def settle(self) -> None:
        """Read back every update applied since the last read-back (:meth:`Pending.read`, one device-to-host
        read), count and log them in order; a divergence among them — a non-finite update, or the loss rule of
        :mod:`psbench.ps.divergence` — stops the fit at it (:meth:`Pending.rollback`): the weights those of
        checking every update on the host as it was applied (a non-finite update not applied, the update that
        trips the loss rule applied)."""
        losses, bad = self.pending.read()
        if not losses:
            return
        updates = self.pending.updates
        keep, why = len(updates) if bad is None else bad, None
        for j, (a, loss) in enumerate(zip(updates[:keep], losses, strict=False)):
            self._commit(a, loss)
            why = self._rule.add(a.batch.index, loss, a.batch.samples, a.batch.staleness_mean)
            if why is not None:
                keep = j + 1
                break
        if bad is None and why is None:
            self.pending.clear()
            return
        trainer = self._module.trainer
        # the updates after the divergence were never pushed where each is checked before its step (the non-finite
        # one was: its learners pushed it, the PS did not apply it)
        self.bytes_pushed -= sum(a.pushed for a in updates[keep + (why is None) :])
        if keep < len(updates):
            params = list(self._weights().values())
            self.pending.rollback(
                keep, self._saved(params), trainer.optimizers[0], lambda a: self._step(a, params, a.grads)
            )
        else:
            self.pending.clear()
        if why is None:  # update `keep` was not finite: not applied
            j = updates[keep].batch.index
            self._diverge(j, "a non-finite loss or update")
            seams.set_optimizer_steps(trainer, j)  # Lightning's global_step: the updates applied
        else:  # the loss rule tripped at update j, applied
            j = updates[keep - 1].batch.index
            self._diverge(j, why)
            seams.set_optimizer_steps(trainer, j + 1)
        self._last_update = j
        seams.log_at(trainer, j)

    def _commit(self, a: Applied, loss: float) -> None:
        """Update ``a`` read back finite: counted, and its metrics logged at its own step."""
        batch = a.batch
        self.last_loss = loss
        self.updates_done += 1
        self.samples_done += batch.samples
        self.sim_time_s = batch.time
        self._recent.append(loss)
        if batch.index % self.log_every == 0:
            metrics = {"train_loss": loss, "staleness_mean_update": batch.staleness_mean, "sim_time_s": batch.time}
            if self.num_train:  # else Lightning logs its own epoch, always 0 in the one-epoch PS fit
                metrics["epoch"] = self.epoch
            metrics.update(a.extra)
            self._log(metrics, batch.index)

    def _diverge(self, update: int, why: str) -> None:
        """Mark the run diverged at ``update`` and stop the fit after it."""
        self.diverged_at, self.divergence = update, why
        self._log({"diverged": 1.0}, update)
        self._module.trainer.should_stop = True

    def _log(self, metrics: dict, step: int) -> None:
        """``metrics`` of update ``step`` (prefixed ``ps/`` in a user's script), to every logger at that step (numbers
        in torch's default dtype, as ``LightningModule.log`` would store them: an evaluation's ``epoch`` equals its
        update's)."""
        loggers = self._module.trainer.loggers
        if loggers:
            dtype = torch.get_default_dtype()
            values = {
                self.prefix + k: float(v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=dtype))
                for k, v in metrics.items()
            }
            for lg in loggers:
                lg.log_metrics(values, step=step)


class SimulatedArguments:
    """``ParameterServerStrategy.simulated(...)`` as a class (each namespace's :class:`SimulatedStrategy`), for configs
    that name a class and its arguments (LightningCLI's ``class_path`` and ``init_args``, Hydra's ``_target_``). The
    arguments are :func:`psbench.api.simulated_setup`'s (``tests/test_lightning_cli.py`` checks the two signatures
    agree).

    Args:
        protocol: ``hardsync`` | ``softsync`` | ``async`` | ``ssp``, or a mapping of the ``protocol`` group.
        learners: λ.
        n: softsync's splitting parameter.
        staleness_bound: SSP's s.
        hardware: the simulated cluster (``laptop`` | ``p775`` | ``p775_cluster``, or a mapping of its keys).
        topology: ``rudra_base`` | ``rudra_adv`` | ``rudra_adv_star`` (or a mapping).
        lr_policy: the ``lr_policy`` group's option (or a mapping).
        compression: the ``compression`` group's option (or a mapping).
        seed: the simulator's jitter streams and the sample stream.
        updates_per_step: PS updates per Trainer step (None: the updates of ~128 samples).
        log_every_n_updates: psbench's ``ps/*`` metrics every this many updates.
        batching: ``auto`` | ``loop``.
        memory_budget_mb: bound on snapshots and gradients computed ahead (None: as ``trainer.memory_budget_mb``).
        progress: the simulation's progress lines (``auto`` | ``plain`` | ``none``).
        timeline_updates: the updates ``timeline.png`` draws (None: a few pushes of every learner; 0: none).
        divergence_factor: the run diverged when its train loss exceeds this × its start (None: only a non-finite
            one; :mod:`psbench.ps.divergence`).
    """

    def __init__(
        self,
        protocol: str | dict[str, Any] = "hardsync",
        *,
        learners: int,
        n: int | None = None,
        staleness_bound: int | None = None,
        hardware: str | dict[str, Any] = "laptop",
        topology: str | dict[str, Any] = "rudra_base",
        lr_policy: str | dict[str, Any] = "constant",
        compression: str | dict[str, Any] | None = "none",
        seed: int = 0,
        updates_per_step: int | None = None,
        log_every_n_updates: int = 10,
        batching: str = "auto",
        memory_budget_mb: float | None = None,
        progress: str = "auto",
        timeline_updates: int | None = None,
        divergence_factor: float | None = DEFAULT_FACTOR,
    ) -> None:
        from psbench.api import simulated_setup

        options = {k: v for k, v in locals().items() if k not in ("self", "protocol", "simulated_setup")}
        ParameterServerStrategyCore.__init__(self, plan=simulated_setup(protocol, **options))  # type: ignore[arg-type]


class ParameterServerStrategy(ParameterServerStrategyCore, SingleDeviceStrategy):
    """The strategy for ``pytorch_lightning`` Trainers (:class:`ParameterServerStrategyCore`); ``lightning``'s is
    :class:`psbench.lightning.ParameterServerStrategy`."""

    lightning_namespace = "pytorch_lightning"


class SimulatedStrategy(SimulatedArguments, ParameterServerStrategy):
    """:class:`SimulatedArguments` for ``pytorch_lightning`` Trainers."""


ParameterServerStrategy.simulated_class = SimulatedStrategy
