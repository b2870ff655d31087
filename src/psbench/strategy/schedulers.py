"""The module's lr schedulers, stepped where Lightning steps them, while the strategy applies every PS update itself.

The strategy runs the module in manual optimization (it steps the optimizer), where Lightning steps no scheduler
and drops a scheduler's ``monitor``. So the strategy builds the scheduler configs as automatic optimization builds
them (``monitor``, ``interval``, ``frequency``, ``strict`` kept, a ReduceLROnPlateau without a monitor refused:
``ParameterServerStrategy.setup_optimizers``) and :class:`SchedulerSteps` steps each one where Lightning's
``_TrainingEpochLoop._update_learning_rates`` (pytorch_lightning/loops/training_epoch_loop.py) would, one PS update
standing for one batch, through the module's ``lr_scheduler_step`` hook (a custom scheduler's too):

* ``interval="step"``: after PS update i when (i + 1) % frequency == 0, i counted from the epoch's first update (as
  Lightning counts ``batch_idx``); a ReduceLROnPlateau after the evaluation that follows the Trainer step holding
  update i, with its monitor's value then;
* ``interval="epoch"``: after the epoch's last update when (e + 1) % frequency == 0 (epoch e from 0); a
  ReduceLROnPlateau after the epoch's end (its evaluation and ``on_train_epoch_end`` hooks, where it reads the
  monitor).

The ReduceLROnPlateau steps run where Lightning's loops step them (:func:`psbench.lightning_seams.plateau_steps_at`):
before the next Trainer step's or epoch's hooks, so a ``LearningRateMonitor`` there logs the lr the next update uses.

A monitor no metric holds ends the fit with one line naming it and the logged metrics (Lightning's ``strict``,
its default); with ``strict=False`` the step is skipped, as in Lightning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require


class _HookStep:
    """``step()`` = the module's ``lr_scheduler_step(scheduler, None)``: what :func:`psbench.ps.apply.apply_update`
    calls after the optimizer's step."""

    __slots__ = ("module", "scheduler")

    def __init__(self, module: Any, scheduler: Any) -> None:
        self.module, self.scheduler = module, scheduler

    def step(self) -> None:
        self.module.lr_scheduler_step(self.scheduler, None)


class SchedulerSteps:
    """The Lightning configs (``LRSchedulerConfig``) of the module's schedulers, by when they step."""

    def __init__(self, module: Any, configs: list) -> None:
        self.module = module

        def pick(step: bool, plateau: bool) -> list:
            return [c for c in configs if (c.interval == "step") is step and bool(c.reduce_on_plateau) is plateau]

        self.per_update = [(c, _HookStep(module, c.scheduler)) for c in pick(True, False)]
        self.plateau_update, self.per_epoch, self.plateau_epoch = (
            pick(True, True),
            pick(False, False),
            pick(False, True),
        )
        self._updates: list[int] = []  # updates whose ReduceLROnPlateau steps wait for the evaluation
        self.epoch_start: int | None = None  # the index of the current epoch's first update (None: none applied yet)
        self._epoch: int | None = None  # the epoch whose ReduceLROnPlateau steps wait for its end
        self._owed_metrics: dict[str, Any] = {}  # a resumed fit's monitors, as its checkpoint saw them

    def owed(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The ReduceLROnPlateau steps owed when a checkpoint is saved (Lightning saves it before it steps them: at a
        Trainer step's or an epoch's end, after an evaluation) and their monitors' values then (``metrics``)."""
        monitors = {c.monitor for c in self.plateau_update + self.plateau_epoch}
        return {
            "updates": list(self._updates),
            "epoch": self._epoch,
            "metrics": {k: v for k, v in metrics.items() if k in monitors},
        }

    def resume_owed(self, owed: Mapping[str, Any]) -> None:
        """A resumed fit owes what its checkpoint owed (:meth:`owed`): stepped by :meth:`step_owed`."""
        self._updates, self._epoch = [int(u) for u in owed["updates"]], owed["epoch"]
        self._owed_metrics = dict(owed["metrics"])

    def step_owed(self) -> None:
        """At a resumed fit's start: the plateau steps its checkpoint owed, with the values it saw (no evaluation has
        run yet), where the uninterrupted fit took them, before its next Trainer step."""
        metrics, self._owed_metrics = self._owed_metrics, {}
        self.plateau_steps("step", metrics)
        self.plateau_steps("epoch", metrics)

    @property
    def stepped_per_update(self) -> list:
        """The schedulers stepped after PS updates (what a rollback of updates restores)."""
        return [c.scheduler for c, _ in self.per_update]

    def after_update(self, index: int) -> list[_HookStep]:
        """What :func:`~psbench.ps.apply.apply_update` steps after update ``index``; the plateau steps it owes."""
        if self.epoch_start is None:
            self.epoch_start = index
        index -= self.epoch_start
        if self.plateau_update:
            self._updates.append(index)
        return [h for c, h in self.per_update if (index + 1) % c.frequency == 0]

    def epoch_done(self, epoch: int) -> None:
        """Epoch ``epoch``'s last update is applied: its schedulers step, its plateau ones once it has ended."""
        for c in self.per_epoch:
            if (epoch + 1) % c.frequency == 0:
                self.module.lr_scheduler_step(c.scheduler, None)
        self._epoch = epoch

    def plateau_steps(self, interval: str, metrics: Mapping[str, Any]) -> None:
        """The ReduceLROnPlateau steps of ``interval`` owed (``"step"``: the Trainer step's updates; ``"epoch"``: the
        epoch's), with the monitors' values in ``metrics`` (``trainer.callback_metrics``)."""
        if interval == "step":
            for i in self._updates:
                for c in self.plateau_update:
                    if (i + 1) % c.frequency == 0:
                        self._plateau(c, metrics)
            self._updates.clear()
        elif self._epoch is not None:
            for c in self.plateau_epoch:
                if (self._epoch + 1) % c.frequency == 0:
                    self._plateau(c, metrics)
            self._epoch = None

    def _plateau(self, c: Any, metrics: Mapping[str, Any]) -> None:
        value = metrics.get(c.monitor)
        require(
            value is not None or not c.strict,
            "lr_scheduler.monitor",
            c.monitor,
            f"a metric the module logs before the scheduler steps (logged: {', '.join(metrics) or 'none'}; "
            "strict=False skips the step instead)",
        )
        if value is not None:
            self.module.lr_scheduler_step(c.scheduler, value)
