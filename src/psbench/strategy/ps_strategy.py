"""Lightning strategy that executes a PS schedule: one Trainer step = one or several PS updates (Rudra §3.1).

For update i the master weights are at timestamp i. The gradients an update applies are computed
ahead, in batches across upcoming updates, on the weight snapshots they read
(:class:`~psbench.strategy.lookahead.Lookahead`, bounded by ``memory_budget_bytes``). The strategy
then applies the aggregated gradient g_i = Σ_l (w_l/c)·Δθ_l itself (manual optimization) with the PS update
step both engines share (:func:`psbench.ps.apply.apply_update`: p.grad = g_i, gradient clipping, the configured
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
the step, sets ``diverged`` and stops the fit cleanly.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

import torch
from pytorch_lightning.strategies import SingleDeviceStrategy

from psbench.errors import require
from psbench.ps import Schedule
from psbench.ps.apply import apply_update
from psbench.strategy.batches import UpdateBatch
from psbench.strategy.chunks import UpdateChunk
from psbench.strategy.local_steps import LocalLearners
from psbench.strategy.lookahead import Lookahead


class ParameterServerStrategy(SingleDeviceStrategy):
    strategy_name = "parameter_server"
    #: the progress bar's per-Trainer-step loss (the mean loss of the step's last update)
    progress_metric = "loss"

    @classmethod
    def simulated(cls, protocol="hardsync", **options) -> SimulatedStrategy:
        """The strategy for the user's own Lightning script: ``Trainer(strategy=ParameterServerStrategy.simulated(
        protocol="softsync", n=4, learners=8, hardware="laptop", seed=0))`` trains any LightningModule on the
        schedule simulated from the Trainer's data and length (:class:`SimulatedStrategy`; the arguments are
        :func:`psbench.api.simulated_setup`'s, checked here)."""
        from psbench.api import simulated_setup

        return SimulatedStrategy(simulated_setup(protocol, **options))

    def __init__(
        self,
        schedule: Schedule,
        batching: str = "auto",
        vmap_threshold: int = 4,
        log_every_n_updates: int = 10,
        local: LocalLearners | None = None,
        compression=None,
        num_train: int | None = None,
        memory_budget_bytes: int | None = None,
        ahead: int | None = None,
        gradient_clip_val: float | None = None,
        device: torch.device | str = "cpu",
        eval_every: int | None = None,
    ) -> None:
        super().__init__(device=torch.device(device))
        self.schedule = schedule
        self.local = local  # local-step protocols (downpour/agn/aeasgd/dynsgd): learner models + commits
        self.compression = compression  # per-learner codecs (psbench.compression.pipeline), or None
        self.bytes_pushed = 0
        self.lookahead: Lookahead | None = None  # built at the first update (it reads the Trainer's data)
        self._lookahead_state: dict | None = None
        self.memory_budget_bytes, self.ahead = memory_budget_bytes, ahead
        self.gradient_clip_val = gradient_clip_val  # clip_grad_norm_ per update (Trainer(gradient_clip_val)'s)
        self.batching, self.vmap_threshold = batching, vmap_threshold
        self.log_every = max(1, log_every_n_updates)
        self.diverged_at: int | None = None
        self.last_loss = math.nan
        self._recent: deque[float] = deque(maxlen=100)
        self.updates_done = 0
        self.samples_done = 0
        self.sim_time_s = 0.0  # simulated time of the last update applied
        self.num_train = num_train  # N: ``epoch`` = samples the PS has consumed / N
        self.eval_every = eval_every  # evaluate after every eval_every-th update (None: Lightning's val_check_interval)
        self._last_update: int | None = None  # the last update a Trainer step applied

    @property
    def _module(self) -> Any:
        """The LightningModule being fit (psbench's ClassifierModule: ``net``, per-sample ``loss``), once connected."""
        module = self.lightning_module
        assert module is not None, "the Trainer connects the module before any hook runs"
        return module

    @property
    def epoch(self) -> float:
        """Epochs consumed by the updates applied so far (samples / N); logged as ``epoch``."""
        return self.samples_done / self.num_train if self.num_train else 0.0

    def connect(self, model) -> None:
        """The strategy applies every PS update itself (:meth:`_step`): manual optimization."""
        super().connect(model)
        model.automatic_optimization = False

    def on_train_start(self) -> None:
        super().on_train_start()
        if self.eval_every:  # evaluations counted in updates, whatever the updates per Trainer step
            self._module.trainer.fit_loop.epoch_loop._should_check_val_fx = self._evaluate_now

    def _evaluate_now(self, data_fetcher=None) -> bool:
        """Evaluate after this Trainer step? After updates eval_every−1, 2·eval_every−1, …, and after a stop
        (Lightning's rule for ``should_stop``)."""
        trainer = self._module.trainer
        if trainer.should_stop and trainer.fit_loop._can_stop_early:
            return True
        every, last = self.eval_every, self._last_update
        return every is not None and last is not None and (last + 1) % every == 0

    def validation_step(self, *args, **kwargs):
        out = super().validation_step(*args, **kwargs)
        if self.num_train:  # the evaluation's ``epoch`` too, not Lightning's 0
            self._module.log("epoch", self.epoch, on_step=False, on_epoch=True, reduce_fx="max", batch_size=1)
        return out

    def batch_to_device(self, batch, device=None, dataloader_idx: int = 0):
        """Update batches need no move (the look-ahead reads samples from data on the device); evaluation's do."""
        return batch if isinstance(batch, UpdateBatch) else super().batch_to_device(batch, device, dataloader_idx)

    @property
    def recent_loss(self) -> float | None:
        """Mean training loss of the last (up to) 100 updates."""
        return sum(self._recent) / len(self._recent) if self._recent else None

    @property
    def diverged(self) -> bool:
        return self.diverged_at is not None

    def ps_state(self) -> dict:
        """Everything the rest of the run reads from the strategy (for :mod:`psbench.checkpoint`)."""
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
            "compression": self.compression.state_dict() if self.compression is not None else None,
            "local": self.local.state_dict() if self.local is not None else None,
        }

    def load_ps_state(self, s: dict) -> None:
        # a checkpoint from before look-ahead execution holds only the snapshots: resume update by update
        self._lookahead_state = s.get("lookahead") or {"update": s["updates_done"], "snapshots": s["snapshots"]}
        self.lookahead = None
        self.updates_done, self.samples_done = s["updates_done"], s["samples_done"]
        self.bytes_pushed = s["bytes_pushed"]
        self.last_loss, self.diverged_at = s["last_loss"], s["diverged_at"]
        self._recent = deque(s["recent"], maxlen=self._recent.maxlen)
        if self.compression is not None:
            self.compression.load_state_dict(s["compression"])
        if self.local is not None:
            self.local.load_state_dict(s["local"])

    @property
    def peak_snapshot_bytes(self) -> int:
        """Most bytes of weight snapshots and gradients computed ahead held at once (0: none were needed)."""
        return self.lookahead.peak_bytes if self.lookahead is not None else 0

    def _ahead(self) -> Lookahead:
        if self.lookahead is None:
            module = self._module
            data = module.trainer.train_dataloader.dataset
            data = getattr(data, "updates", data)  # UpdateChunks: several updates per Trainer step
            while isinstance(data, torch.utils.data.Subset):  # a resumed run's updates start…U−1
                data = data.dataset
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
        """Apply one PS update, or each update of a chunk in order (see the module docstring)."""
        if isinstance(batch, UpdateChunk):
            trainer = self._module.trainer
            for j, update in enumerate(batch.updates):
                if j:  # an update boundary inside the Trainer step: checkpoints, signals
                    for cb in trainer.callbacks:
                        hook = getattr(cb, "on_ps_update_start", None)
                        if hook is not None:
                            hook(trainer, update.index)
                self.training_step(update)  # through self: one call per update, as with one update per step
                if trainer.should_stop:  # diverged
                    break
            if trainer.progress_bar_callback is not None:
                self._module.log(self.progress_metric, self.last_loss, prog_bar=True, logger=False, batch_size=1)
            return None
        module = self._module
        module.trainer.fit_loop.epoch_loop._batches_that_stepped = batch.index  # the step evaluations log at
        self._last_update = batch.index
        params = self._weights(module)
        live = batch.index
        if self.local is not None:  # the commits of H local steps per learner, in gradient units
            lr = module.trainer.optimizers[0].param_groups[0]["lr"]
            grads, loss = self.local.update_direction(module.net, module.loss, batch, params, lr)
        else:
            ahead = self._ahead()
            if self.compression is not None:
                learners, weights, each, loss = ahead.learner_gradients(live, params)
                grads, pushed = self.compression.aggregate(learners, weights, each)
                self.bytes_pushed += pushed
            else:
                grads, loss = ahead.update_gradient(live, params)
        self.last_loss = float(loss)
        trainer = module.trainer
        if not apply_update(
            list(params.values()),
            [grads[k] for k in params],
            self.last_loss,
            trainer.optimizers[0],
            lr_scale=batch.lr_scale,
            clip=self.gradient_clip_val,
            schedulers=self._update_schedulers(trainer, batch.index),
            step=module.optimizers().step,
        ):  # Lightning's wrapper: counts the step (global_step)
            self.diverged_at = batch.index
            self._log({"diverged": 1.0}, batch.index)
            trainer.should_stop = True
            return None  # no optimizer step
        self.updates_done += 1
        self.samples_done += batch.samples
        self.sim_time_s = batch.time
        self._recent.append(self.last_loss)
        if batch.index % self.log_every == 0:
            metrics = {"train_loss": loss, "staleness_mean_update": batch.staleness_mean, "sim_time_s": batch.time}
            if self.num_train:  # else Lightning logs its own epoch, always 0 in the one-epoch PS fit
                metrics["epoch"] = self.epoch
            if self.local is not None:  # learners' mini-batch accuracy: AGN's f(t) for temporal efficiency (Eq 4)
                metrics["train_accuracy"] = self.local.last_accuracy
            self._log(metrics, batch.index)
        return None

    def _weights(self, module) -> dict[str, torch.Tensor]:
        """The weights the PS updates, by name: the classifier module's ``net``'s parameters."""
        return dict(module.net.named_parameters())

    def _update_schedulers(self, trainer, update: int) -> list:
        """The lr schedulers stepped after PS update ``update``: all of them (psbench's are per update)."""
        return [c.scheduler for c in trainer.lr_scheduler_configs]

    def _log(self, metrics: dict, step: int) -> None:
        """``metrics`` of update ``step``, to every logger at that step (numbers in torch's default dtype, as
        ``LightningModule.log`` would store them: an evaluation's ``epoch`` equals its update's)."""
        loggers = self._module.trainer.loggers
        if loggers:
            values = {
                k: float(v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.get_default_dtype()))
                for k, v in metrics.items()
            }
            for lg in loggers:
                lg.log_metrics(values, step=step)


class SimulatedStrategy(ParameterServerStrategy):
    """:meth:`ParameterServerStrategy.simulated`: any LightningModule, on the schedule simulated at ``setup`` from
    the Trainer's data and length (:mod:`psbench.strategy.simulated` says what is read, and what is refused), each
    learner's gradient its ``training_step`` (:mod:`psbench.strategy.user_steps`). ``summary``: the run's
    :class:`~psbench.summary.RunSummary`; ``check``: how the gradients were batched."""

    progress_metric = "ps/loss"

    def __init__(self, setup) -> None:  # a psbench.run_setup.SimulatedSetup
        super().__init__(None, setup.batching, log_every_n_updates=setup.log_every_n_updates)  # type: ignore[arg-type]
        self.plan, self.protocol = setup, setup.protocol
        self.sim_stats: dict | None = None
        self.batch_size = self.num_train = 0  # μ and N, from the train DataLoader
        self.loader: Any = None  # the Trainer's train data: psbench.strategy.simulated.EpochLoader
        self._params: dict[str, torch.Tensor] = {}
        self._schedulers: tuple[list, list] = ([], [])  # (per update, per epoch)
        self._epoch = 0
        self._clip_was: float | None = None
        self._fit_s = [0.0, 0.0]

    # -- the Trainer and the module ----------------------------------------------------------------------
    def setup_environment(self) -> None:
        from psbench.strategy import simulated

        self._root_device = simulated.device(self.accelerator, self.plan.compression)
        super().setup_environment()

    def connect(self, model) -> None:
        from psbench.strategy.simulated import check_module

        self.gradient_clip_val = check_module(model)
        self._clip_was, model.trainer.gradient_clip_val = model.trainer.gradient_clip_val, None  # the PS clips
        super().connect(model)

    def setup(self, trainer) -> None:
        from psbench.strategy import simulated

        simulated.check_trainer(trainer)
        super().setup(trainer)
        self._schedulers = simulated.schedulers(trainer)
        self._simulate(trainer)

    def _simulate(self, trainer) -> None:
        """Read N, μ and the run's length; simulate the schedule; build the learners' gradients and the Trainer's
        data; check the module's loss on one mini-batch."""
        from dataclasses import replace

        from psbench.ps import Simulator
        from psbench.ps.plan import schedule_meta
        from psbench.strategy import simulated
        from psbench.strategy.user_steps import UserLookahead, UserUpdates

        module, plan = self.lightning_module, self.plan
        assert module is not None
        ds, mu, collate = simulated.train_loader(trainer, self.protocol)
        self.batch_size, self.num_train = mu, len(ds)
        self._params = {k: p for k, p in module.named_parameters() if p.requires_grad}
        require(self._params != {}, "LightningModule", type(module).__name__, "a module with trainable parameters")
        gradients = simulated.run_gradients(trainer, self.num_train, mu, self.protocol)
        p_bytes = sum(p.numel() * p.element_size() for p in self._params.values())
        cost = replace(plan.cost, message_bytes=4 * sum(p.numel() for p in self._params.values()))
        if plan.compression is not None:
            from psbench.compression.pipeline import LearnerCompression

            self.compression = LearnerCompression(
                plan.compression, {k: p.shape for k, p in self._params.items()}, plan.seed
            )
            cost = replace(
                cost,
                push_bytes=self.compression.push_bytes(),
                pull_delta=self.compression.localize,
                pull_bytes=self.compression.pull_bytes(self.protocol.gradients_per_update),
            )
        sim = Simulator(self.protocol, cost, plan.topology, mu, gradients, plan.seed)
        meta = schedule_meta(self.protocol, mu, plan.topology, plan.seed)
        self.schedule = schedule = Schedule.collect(sim.run(), meta=meta)
        self.sim_stats = sim.stats.as_dict()
        user_hook = module._on_before_batch_transfer

        def before_transfer(batch, dataloader_idx: int = 0):  # Lightning hands it the Trainer step's chunk too
            return batch if isinstance(batch, UpdateChunk) else user_hook(batch, dataloader_idx)

        module._on_before_batch_transfer = before_transfer  # type: ignore[method-assign]
        updates = UserUpdates(
            schedule,
            ds,
            collate,
            mu,
            plan.policy,
            self.protocol.learners,
            plan.seed,
            next(iter(self._params.values())).dtype,
            self.root_device,
            simulated.transfer(self, trainer, before_transfer),
        )
        simulated.check_loss(module, updates.batch([0]))
        self.loader = simulated.epoch_loader(
            schedule, updates, mu, self.num_train, trainer.fit_loop.max_epochs, plan.updates_per_step
        )
        by_row = self.compression is not None or self.batching == "loop"
        self.lookahead = UserLookahead(
            schedule,
            updates,
            module,
            list(self._params),
            self.batching,
            per_learner=self.compression is not None,
            budget_bytes=simulated.memory_budget(schedule, p_bytes, by_row, plan.memory_budget_mb),
        )

    def teardown(self) -> None:
        """The module and Trainer as the user made them: automatic optimization (``trainer.global_step`` still
        counts the PS updates), the Trainer's ``gradient_clip_val``, Lightning's batch hook."""
        module = self.lightning_module
        if module is not None:
            module.__dict__.pop("_on_before_batch_transfer", None)
            trainer = module._trainer
            if trainer is not None:
                loop = trainer.fit_loop.epoch_loop
                loop.automatic_optimization.optim_progress.optimizer.step.load_state_dict(
                    loop.manual_optimization.optim_step_progress.state_dict()
                )
                trainer.gradient_clip_val = self._clip_was
            module.automatic_optimization = True
        super().teardown()

    def process_dataloader(self, dataloader):
        from pytorch_lightning.trainer.states import RunningStage

        training = self.lightning_module.trainer.state.stage == RunningStage.TRAINING
        return self.loader if training and self.loader is not None else dataloader

    def batch_to_device(self, batch, device=None, dataloader_idx: int = 0):
        """A Trainer step's chunk stays as it is (its learners' mini-batches go through the hooks one by one)."""
        return batch if isinstance(batch, UpdateChunk) else super().batch_to_device(batch, device, dataloader_idx)

    # -- training ----------------------------------------------------------------------------------------
    def _ahead(self) -> Lookahead:
        return self.lookahead  # type: ignore[return-value]

    def _weights(self, module) -> dict[str, torch.Tensor]:
        return self._params

    def _update_schedulers(self, trainer, update: int) -> list:
        return [c.scheduler for c in self._schedulers[0] if (update + 1) % c.frequency == 0]

    def on_train_start(self) -> None:
        super().on_train_start()
        self._fit_s[0] = time.perf_counter()

    def on_train_end(self) -> None:
        self._fit_s[1] = time.perf_counter()
        super().on_train_end()

    def training_step(self, batch, batch_idx: int = 0, *args, **kwargs):
        if isinstance(batch, UpdateChunk):  # a new epoch: step the per-epoch lr schedulers first
            assert self.lightning_module is not None
            trainer = self.lightning_module.trainer
            from psbench.strategy.simulated import step_epoch_schedulers

            while self._epoch < trainer.current_epoch:
                self._epoch += 1
                step_epoch_schedulers(self._schedulers[1], self._epoch, trainer.callback_metrics)
        return super().training_step(batch, batch_idx, *args, **kwargs)

    def _log(self, metrics: dict, step: int) -> None:
        super()._log({f"ps/{k}": v for k, v in metrics.items()}, step)

    # -- what ran ----------------------------------------------------------------------------------------
    @property
    def summary(self):
        """The run's :class:`~psbench.summary.RunSummary` (:func:`psbench.strategy.simulated.summary`); None before
        ``trainer.fit`` has read the data."""
        if self.schedule is None or self.sim_stats is None:
            return None
        from psbench.strategy.simulated import summary

        a, b = self._fit_s
        return summary(
            self,
            self.schedule,
            self.sim_stats,
            self.batch_size,
            self.num_train,
            (self.plan.compression or {}).get("name", "none"),
            b - a if b > a else None,
        )

    @property
    def check(self) -> dict | None:
        """How the gradients were computed: the concatenation and channels_last checks' outcomes
        (:class:`~psbench.strategy.user_steps.UserLookahead`); None before the first update."""
        return None if self.lookahead is None else dict(self.lookahead.check)  # type: ignore[attr-defined]
