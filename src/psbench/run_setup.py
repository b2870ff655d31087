"""The run's types, below the engines that take them (types only: nothing here builds or runs anything).

:class:`RunSetup` is what :func:`psbench.assemble.build_run` makes of a config and both engines take
(:func:`psbench.strategy.executor.train_sim`, :func:`psbench.distributed.launcher.train_dist`);
:class:`SimulatedSetup` is what ``ParameterServerStrategy.simulated`` checks its arguments into
(:func:`psbench.api.simulated_setup`) and plans a run from at ``setup``; :class:`TrainerOptions` and
:class:`DistOptions` are the ``trainer`` and ``engine=dist`` groups, typed. The engines import this module, never
the assembly: a config goes no further than :mod:`psbench.assemble`. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from psbench.cluster import CostModel, Topology
    from psbench.lr import LRPolicy
    from psbench.ps import Protocol, Schedule


@dataclass(frozen=True)
class TrainerOptions:
    """The ``trainer`` group, typed; its defaults are ``conf/trainer/default.yaml``'s (every key is there)."""

    max_updates: int | None
    eval_every_epochs: int
    log_every_n_updates: int
    progress: str
    num_threads: int | None
    deterministic: bool
    checkpoint_every: int
    stop_after_updates: int | None
    save_weights: bool
    timeline_updates: int | None
    batching: str
    gradient_clip_val: float | None
    divergence_factor: float | None
    accelerator: str | None
    updates_per_step: int | None
    memory_budget_mb: float | None

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> TrainerOptions:
        return cls(**{f.name: node[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class DistOptions:
    """``engine=dist``'s keys, typed; their defaults are ``conf/engine/dist.yaml``'s (every key is there)."""

    mode: str
    schedule: str | None
    backend: str
    launch: str
    master_addr: str
    port: int
    max_learners: int
    connect_timeout_s: float
    timeout_s: float
    tolerate_failures: bool
    learner_threads: int
    learner_delay_s: Mapping[int, float] | None

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> DistOptions:
        return cls(**{f.name: node[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class RunSetup:
    """Everything one run needs, built from a config by :func:`psbench.assemble.build_run`.

    ``config`` is the resolved config as plain data (for tracking and checkpoints only). ``data`` is a set-up
    data module (``x_train``, ``y_train``, ``x_test``, ``y_test``, ``num_train``, ``input_shape``,
    ``num_classes``, ``task``, ``output_size``); ``model`` the model's config node as plain data (how a dist learner
    builds the same ``net``, :func:`psbench.models.net.build_net`); ``loss`` the per-sample loss
    (:class:`psbench.models.loss.SampleLoss`, ``model.loss``). ``schedule`` is the simulated schedule (engine sim,
    and a dist replay of this config), the replayed file (``engine.schedule``) or None (a dist free run);
    ``sim_stats`` its simulation's statistics and ``trace`` its record of the first ``trainer.timeline_updates``
    updates (:mod:`psbench.ps.timeline`); ``hardware`` the hardware profile's name as the timeline's title says it.
    """

    config: Mapping[str, Any]
    seed: int
    data: Any
    net: torch.nn.Module
    model: Mapping[str, Any]
    loss: Any  # psbench.models.loss.SampleLoss
    protocol: Protocol
    topology: Topology
    policy: LRPolicy
    batch_size: int  # μ
    gradients: int  # G: gradients (or local-step commits) of the run
    cost: CostModel
    compression: Mapping[str, Any] | None  # the codec's options (None: fp32 gradients)
    codecs: Any  # per-learner codecs (psbench.compression.pipeline.LearnerCompression), or None
    optimizer: Mapping[str, Any]  # the PS's
    learner_optimizer: Mapping[str, Any]  # the learners' (local-step protocols)
    schedule: Schedule | None
    sim_stats: Mapping[str, Any] | None
    trace: Any  # the simulator's trace of the first updates (psbench.ps.trace.Trace), for timeline.png; or None
    trainer: TrainerOptions
    engine: str  # sim | dist
    dist: DistOptions | None
    schedule_only: bool
    hardware: str = ""
    threads: int = 0  #: torch intra-op threads the run trains with (psbench.threads.run_threads)
    threads_from: str = ""  #: where that count comes from: trainer.num_threads, or the rule's reasoning

    @property
    def samples_per_gradient(self) -> int:
        """μ·H: the samples one gradient (or one commit of H local steps) reads."""
        return self.batch_size * self.protocol.local_steps


@dataclass(frozen=True)
class SimulatedSetup:
    """What ``ParameterServerStrategy.simulated`` runs: the pieces of a :class:`RunSetup` that the groups alone say,
    built by the CLI's builders (:func:`psbench.api.simulated_setup`). The rest (N, μ, G, the message size, the
    schedule) comes from the user's Trainer, module and data at ``setup`` (:mod:`psbench.strategy.simulated`);
    ``cost`` has ``message_bytes`` 0 until then."""

    protocol: Protocol
    topology: Topology
    policy: LRPolicy
    cost: CostModel
    compression: Mapping[str, Any] | None  # the codec's options (None: fp32 gradients)
    seed: int
    updates_per_step: int | None
    log_every_n_updates: int
    batching: str  # auto (checked batching) | loop (one training_step call per learner)
    memory_budget_mb: float | None
    hardware: str = ""  # the hardware profile's name (timeline.png's title)
    progress: str = "auto"  # the simulation's progress lines (trainer.progress's words; none: none)
    timeline_updates: int | None = None  # updates timeline.png draws (None: auto; 0: none)
    divergence_factor: float | None = 4.0  # the loss rule's factor (psbench.ps.divergence; None: non-finite only)
