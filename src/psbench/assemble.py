"""Run assembly: a composed config becomes one typed :class:`RunSetup`, and the config goes no further.

:func:`build_run` builds everything a run needs — data, model, protocol, topology, lr policy, codecs, cost
model, the simulated schedule, the optimizer settings and the typed trainer/engine options — and makes every
check that needs them (data files, the schedule's size; the engine's memory budget and device are checked by
:func:`psbench.train.prepare`). :func:`build_simulated` builds the same pieces for
``ParameterServerStrategy.simulated``, whose model and data are the user's. Both engines take the
:class:`RunSetup` (:func:`psbench.strategy.executor.train_sim`, :func:`psbench.distributed.launcher.train_dist`), so a
config means the same run in either; they, and the packages they run, never read the composed config. The CLI
builds the setup before it creates the MLflow run: input that a check refuses leaves no run behind.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from psbench import lifecycle
from psbench.cluster import CostModel, Topology
from psbench.data import output_size, task_of
from psbench.distributed.options import DistOptions
from psbench.errors import ConfigError, require
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule, Simulator, Update
from psbench.ps.options import build_protocol as protocol_of
from psbench.ps.schedule import max_gradients
from psbench.strategy.options import TrainerOptions


@dataclass(frozen=True)
class RunSetup:
    """Everything one run needs, built from a config by :func:`build_run`.

    ``config`` is the resolved config as plain data (for tracking and checkpoints only). ``data`` is a set-up
    data module (``x_train``, ``y_train``, ``x_test``, ``y_test``, ``num_train``, ``input_shape``,
    ``num_classes``, ``task``, ``output_size``); ``model`` the model's config node as plain data (how a dist learner
    builds the same ``net``, :func:`psbench.models.net.build_net`); ``loss`` the per-sample loss
    (:class:`psbench.models.loss.SampleLoss`, ``model.loss``). ``schedule`` is the simulated schedule (engine sim,
    and a dist replay of this config), the replayed file (``engine.schedule``) or None (a dist free run);
    ``sim_stats`` its simulation's statistics and ``trace`` its record of the first ``trainer.timeline_updates``
    updates (:mod:`psbench.ps.timeline`).
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
    threads: int = 0  #: torch intra-op threads the run trains with (psbench.threads.run_threads)
    threads_from: str = ""  #: where that count comes from: trainer.num_threads, or the rule's reasoning

    @property
    def samples_per_gradient(self) -> int:
        """μ·H: the samples one gradient (or one commit of H local steps) reads."""
        return self.batch_size * self.protocol.local_steps

    def plot_timeline(self, path) -> str | None:
        """``timeline.png`` of the traced updates (:func:`psbench.ps.timeline.plot_timeline`), titled with the
        protocol, λ, μ, hardware and topology; None when nothing was traced."""
        if self.trace is None or self.sim_stats is None:
            return None
        from psbench.ps.timeline import plot_timeline, timeline_title

        h = self.config["hardware"]
        hw = str(h["name"]) + (" (calibrated)" if h.get("calibrate") else "")
        title = timeline_title(self.protocol, self.batch_size, hw, self.topology.name)
        return str(plot_timeline(self.trace, self.sim_stats["staleness_hist"], title, path))

    @property
    def schedule_meta(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol.label,
            "learners": self.protocol.learners,
            "batch_size": self.batch_size,
            "topology": self.topology.name,
            "seed": self.seed,
        }


# --------------------------------------------------------------------------- the pieces, from a config
def build_protocol(cfg: DictConfig | Mapping[str, Any]) -> Protocol:
    return protocol_of(_plain(cfg))


def build_topology(cfg: DictConfig | Mapping[str, Any]) -> Topology:
    t = cfg["topology"]
    nodes = t.get("nodes")
    return Topology(
        t["name"],
        int(t["learners_per_node"]),
        int(t["broadcast_fanout"]),
        bool(t["leaf_gather"]),
        None if nodes is None else int(nodes),
    )


def build_cost(
    cfg: DictConfig | Mapping[str, Any],
    message_bytes: int,
    net: torch.nn.Module | None = None,
    input_shape: tuple = (),
    num_classes: int = 10,
    loss=None,
    target_shape: tuple | None = None,
) -> CostModel:
    h = cfg["hardware"]
    overrides = {
        k: h.get(k)
        for k in (
            "bandwidth_Bps",
            "intra_node_bandwidth_Bps",
            "latency_s",
            "ps_service_s",
            "ps_apply_Bps",
            "jitter_cv",
            "ps_jitter_cv",
            "heavy_tail",
            "contention",
            "ps_shards",
            "ps_colocated",
            "node_share",
        )
    }
    compute = h.get("compute") or {}
    overrides.update(overhead_s=compute.get("overhead_s"), per_sample_s=compute.get("per_sample_s"))
    strag = h.get("stragglers") or {}
    overrides.update(straggler_fraction=strag.get("fraction"), straggler_slowdown=strag.get("slowdown"))
    cost = CostModel.from_profile(h["name"], message_bytes, **overrides)
    if h.get("calibrate") and net is not None:
        from psbench.calibration.model_time import calibrate

        mu = int(cfg["batch_size"])
        cost = replace(
            cost,
            compute=calibrate(
                net, input_shape, num_classes, sorted({1, 4, 16, 64, mu}), loss=loss, target_shape=target_shape
            ),
        )
    return cost


def build_data_and_model(cfg: DictConfig | Mapping[str, Any]):
    """The data module (prepared and set up) and the seeded model of a config; sets the torch thread count
    (:func:`psbench.threads.run_threads`: ``trainer.num_threads``, else the count that fits the run's gradients).

    Either may be a user's ``_target_`` (:mod:`psbench.data.target`, :mod:`psbench.models.net`)."""
    dm, net, _ = _data_model_threads(_plain(cfg))
    return dm, net


def _data_model_threads(resolved: Mapping[str, Any]):
    """:func:`build_data_and_model`, and the threads it set (:class:`psbench.threads.Threads`)."""
    from psbench import threads as intra_op
    from psbench.data import build_datamodule
    from psbench.models.net import build_net
    from psbench.target import is_target

    seed = int(resolved["seed"])
    intra_op.default_threads()  # torch's, read before psbench sets any
    threads = resolved["trainer"].get("num_threads")
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    ds = dict(resolved["dataset"])
    model = resolved["model"]
    if is_target(ds):
        from psbench.data.target import target_datamodule

        dm = target_datamodule(ds, resolved["paths"]["data_dir"], seed=seed)
    else:
        if ds["name"] == "imagenet":
            from psbench.data.options import imagenet_crop

            ds["crop"] = imagenet_crop(ds["crop"], model.get("name", ""))
        dm = build_datamodule(
            ds.pop("name"), resolved["paths"]["data_dir"], seed=seed, root_dir=resolved["paths"]["root_dir"], **ds
        )
    dm.prepare_data()
    dm.setup("fit")
    _check_model_memory(model, dm.input_shape, output_size(dm))
    torch.manual_seed(seed)
    net = build_net(model, dm.input_shape, output_size(dm))
    choice = intra_op.run_threads(resolved, net, dm.input_shape)
    intra_op.apply(choice)
    return dm, net, choice


def _check_model_memory(node: Mapping[str, Any], input_shape, outputs: int) -> None:
    """The model's weights, a gradient and two optimizer buffers fit in half this machine's memory (its parameters
    counted on the meta device, nothing allocated); else :class:`ConfigError` naming the model. A user's model
    that cannot be built on the meta device is counted once it is built."""
    from psbench.machine import physical_memory
    from psbench.models import model_bytes
    from psbench.models.net import build_net
    from psbench.target import is_target

    memory = physical_memory()
    if memory is None:
        return
    try:
        with torch.device("meta"):
            need = 4 * model_bytes(build_net(node, input_shape, outputs))
    except ConfigError:
        if not is_target(node):
            raise
        return  # the real build says why (one line naming model._target_)
    except Exception:  # a user's network that needs real tensors to build
        if not is_target(node):
            raise
        return
    if need > memory // 2:  # name the key that sized it where there is one (the hidden layers), else the model
        if is_target(node):
            key, shown = "model._target_", node["_target_"]
        else:
            key, shown = ("model.hidden", node["hidden"]) if node.get("hidden") else ("model", dict(node))
        raise ConfigError(
            key,
            shown,
            f"a model whose weights, gradient and optimizer state fit in half this "
            f"machine's memory ({memory / 2**30:.1f} GiB): {need // 16:,} parameters take "
            f"{need / 2**30:.3g} GiB",
        )


def build_run_loss(resolved: Mapping[str, Any], dm, net: torch.nn.Module):
    """The run's per-sample loss (``model.loss``, :func:`psbench.models.loss.build_loss`), checked with the network
    on one training batch where anything is the user's (a ``_target_`` model, a loss, float targets):
    :func:`~psbench.models.loss.check_fit`, in the memory layout the executor feeds; and a ``_target_`` network's
    layers (:func:`~psbench.models.net.check_net`)."""
    from psbench.models.loss import build_loss, check_fit
    from psbench.models.net import check_net
    from psbench.strategy.module import prefers_channels_last
    from psbench.target import is_target

    model = resolved["model"]
    loss = build_loss(model.get("loss"), task_of(dm))
    check_net(model, net, bool(resolved["schedule_only"]))
    if not (is_target(model) or model.get("loss") is not None or task_of(dm) != "classification"):
        return loss
    if not isinstance(dm.x_train, torch.Tensor):
        return loss
    key, shown = ("model._target_", model["_target_"]) if is_target(model) else ("model.name", model["name"])
    x, y = dm.x_train[:4], dm.y_train[:4]
    check_fit(net, loss, x, y, output_size(dm), key, shown)
    if prefers_channels_last(net, x):  # the layout the sim engine's grouped gradients feed on the CPU
        check_fit(net, loss, x.contiguous(memory_format=torch.channels_last), y, output_size(dm), key, shown)
    return loss


def build_lr_policy(cfg: DictConfig | Mapping[str, Any]) -> LRPolicy:
    """``lr_policy``, bound to the run's protocol (α0/n reads its splitting parameter n)."""
    protocol = build_protocol(cfg)
    return LRPolicy(**_plain(cfg["lr_policy"])).for_protocol(protocol.name, protocol.splitting)


def total_gradients(cfg: DictConfig | Mapping[str, Any], num_train: int, protocol: Protocol) -> int:
    """G = ⌊epochs·N / (μ·H)⌋ (capped by ``trainer.max_updates``): at least one update, at most what a schedule
    can hold in this machine's memory (:func:`psbench.ps.schedule.max_gradients`)."""
    mu, epochs = int(cfg["batch_size"]), float(cfg["epochs"])
    spg = mu * protocol.local_steps
    wanted = epochs * num_train / spg
    max_updates = cfg["trainer"].get("max_updates")
    if max_updates is not None:
        wanted = min(wanted, float(max_updates) * protocol.gradients_per_update)
    most = max_gradients()
    if not wanted <= most:
        raise ConfigError(
            "epochs",
            cfg["epochs"],
            f"at most {most * spg / num_train:.4g} epochs for this run: its "
            f"schedule would hold {wanted:.3g} gradients of μ·H = {spg} samples (N = {num_train}), "
            f"and at most {most:,} fit in this machine's memory",
        )
    g = int(wanted)
    require(
        g >= protocol.gradients_per_update,
        "epochs",
        cfg["epochs"],
        f"enough epochs for one update of c = {protocol.gradients_per_update} gradients of μ = {mu}",
    )
    return g


def optimizers(cfg: DictConfig | Mapping[str, Any], protocol: Protocol) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the PS's optimizer config, the learners'): the same for every protocol but the local-step ones, whose
    learners run ``cfg.optimizer`` for H steps and whose PS adds their commits (:func:`server_optimizer`)."""
    from psbench.optimizer.build import server_optimizer
    from psbench.ps.local import uses_local_steps

    learner = _plain(cfg["optimizer"])
    return (server_optimizer(learner) if uses_local_steps(protocol.name) else learner), learner


def build_run_cost(
    cfg: DictConfig | Mapping[str, Any], net: torch.nn.Module, dm, protocol: Protocol, compression=None, loss=None
) -> CostModel:
    """The run's cost model: the hardware profile for this model, with the codec's exact push/pull payloads."""
    from psbench.models import model_bytes

    regression = task_of(dm) == "regression"
    cost = build_cost(
        cfg,
        model_bytes(net),
        net,
        dm.input_shape,
        output_size(dm),
        loss=loss,
        target_shape=tuple(dm.y_train.shape[1:]) if regression else None,
    )
    if compression is None:
        return cost
    # codec payloads are data-independent: they set the transfer times
    return replace(
        cost,
        push_bytes=compression.push_bytes(),
        pull_bytes=compression.pull_bytes(protocol.gradients_per_update),
        pull_delta=compression.localize,
    )


def compression_options(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``compression`` group as plain data, or None for ``none`` (fp32 gradients)."""
    c = cfg.get("compression")
    if c is None or (c.get("name") or "none") == "none":
        return None
    return _plain(c)


def build_compression(cfg: DictConfig | Mapping[str, Any], net: torch.nn.Module):
    """Per-learner codecs for ``cfg.compression`` (:mod:`psbench.compression`), or None for ``none``."""
    options = compression_options(cfg)
    if options is None:
        return None
    from psbench.compression.pipeline import LearnerCompression

    return LearnerCompression(options, {k: p.shape for k, p in net.named_parameters()}, int(cfg["seed"]))


# --------------------------------------------------------------------------- the run
def build_run(cfg: DictConfig | Mapping[str, Any]) -> RunSetup:
    """Build the :class:`RunSetup` of a validated config (:func:`psbench.validate.validate`).

    Raises :class:`~psbench.errors.ConfigError` / :class:`~psbench.errors.DataError` for what only the built
    pieces can tell: a data file, a schedule too long for memory (the engine's checks of the setup are
    :func:`psbench.train.prepare`'s). The simulation of the schedule shows progress when it is long
    (``trainer.progress``) and stops at a signal (:mod:`psbench.lifecycle`).
    """
    resolved = _plain(cfg)
    trainer = TrainerOptions.from_config(resolved["trainer"])
    engine = str(resolved["engine"]["name"])
    dist = None
    if engine == "dist":  # what real processes cannot run (also checked by validate; torch-free)
        from psbench.distributed.options import ENGINE, check_dist
        from psbench.schema import check_group

        check_group("engine", resolved["engine"], ENGINE)
        check_dist(resolved)
        dist = DistOptions.from_config(resolved["engine"])
    seed = int(resolved["seed"])
    dm, net, threads = _data_model_threads(resolved)
    loss = build_run_loss(resolved, dm, net)
    protocol, topology, policy = build_protocol(resolved), build_topology(resolved), build_lr_policy(resolved)
    codecs = build_compression(resolved, net)
    cost = build_run_cost(resolved, net, dm, protocol, codecs, loss)
    require(
        int(resolved["batch_size"]) <= dm.num_train,
        "batch_size",
        resolved["batch_size"],
        f"an integer in [1, {dm.num_train}] (a mini-batch of at most the training set's N samples)",
    )
    gradients = total_gradients(resolved, dm.num_train, protocol)
    opt, learner_opt = optimizers(resolved, protocol)
    setup = RunSetup(
        config=resolved,
        seed=seed,
        data=dm,
        net=net,
        model=dict(resolved["model"]),
        loss=loss,
        protocol=protocol,
        topology=topology,
        policy=policy,
        batch_size=int(resolved["batch_size"]),
        gradients=gradients,
        cost=cost,
        compression=compression_options(resolved),
        codecs=codecs,
        optimizer=opt,
        learner_optimizer=learner_opt,
        schedule=None,
        sim_stats=None,
        trace=None,
        trainer=trainer,
        engine=engine,
        dist=dist,
        schedule_only=bool(resolved["schedule_only"]),
        threads=threads.threads,
        threads_from=threads.threads_from,
    )
    if dist is not None and dist.mode == "free_run":
        return setup  # the real processes make the schedule
    if dist is not None and dist.schedule is not None:
        schedule = Schedule.load(dist.schedule)
        got = schedule.meta.get("learners")
        require(
            got in (None, protocol.learners),
            "engine.schedule",
            dist.schedule,
            f"a schedule for learners={protocol.learners} (it has {got})",
        )
        return replace(setup, schedule=schedule)
    from psbench.ps.timeline import default_updates

    k = default_updates(protocol) if trainer.timeline_updates is None else trainer.timeline_updates
    sim = Simulator(protocol, cost, topology, setup.batch_size, gradients, seed, trace_updates=k)
    schedule = Schedule.collect(
        _with_progress(sim.run(), sim.total_gradients, trainer.progress), meta=setup.schedule_meta
    )
    return replace(setup, schedule=schedule, sim_stats=sim.stats.as_dict(), trace=sim.trace)


@dataclass(frozen=True)
class SimulatedSetup:
    """What ``ParameterServerStrategy.simulated`` runs (:class:`~psbench.strategy.ps_strategy.SimulatedStrategy`):
    the pieces of a :class:`RunSetup` that the groups alone say, built by the same builders. The rest (N, μ, G,
    the message size, the schedule) comes from the user's Trainer, module and data at ``setup``
    (:mod:`psbench.strategy.simulated`); ``cost`` has ``message_bytes`` 0 until then."""

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


def build_simulated(
    protocol: str | Mapping[str, Any] = "hardsync",
    *,
    learners: int,
    n: int | None = None,
    staleness_bound: int | None = None,
    hardware: str | Mapping[str, Any] = "laptop",
    topology: str | Mapping[str, Any] = "rudra_base",
    lr_policy: str | Mapping[str, Any] = "constant",
    compression: str | Mapping[str, Any] | None = "none",
    seed: int = 0,
    updates_per_step: int | None = None,
    log_every_n_updates: int = 10,
    batching: str = "auto",
    memory_budget_mb: float | None = None,
) -> SimulatedSetup:
    """The checked :class:`SimulatedSetup` of ``ParameterServerStrategy.simulated``'s arguments: the groups mean
    what the CLI's mean (:func:`psbench.validate.compose_groups`), so a bad value raises the CLI's
    :class:`ConfigError` line when the strategy is made.

    Args:
        protocol: ``hardsync`` | ``softsync`` | ``async`` | ``ssp``, or a mapping of the ``protocol`` group.
        learners: λ. n: softsync's splitting parameter; staleness_bound: SSP's s.
        hardware, topology, lr_policy, compression: an option of the group, or a mapping of its keys
            (``{"name": "laptop", "bandwidth_Bps": 1e8}``).
        seed: the simulator's jitter streams and the sample stream.
        updates_per_step: PS updates per Trainer step (None: the updates of ~128 samples, at most 64).
        log_every_n_updates: psbench's ``ps/*`` metrics every this many updates.
        batching: ``auto`` (learners that read one snapshot in one call, channels_last convs on the CPU, each checked
            on the first gradients it applies to) | ``loop`` (one ``training_step`` call per learner).
        memory_budget_mb: bound on snapshots and gradients computed ahead (None: as ``trainer.memory_budget_mb``).
    """
    from psbench.ps.local import LOCAL_PROTOCOLS
    from psbench.schema import check_keys, one_of
    from psbench.strategy.options import TRAINER
    from psbench.validate import compose_groups

    proto: dict[str, Any] = {"name": protocol} if isinstance(protocol, str) else dict(protocol)
    proto.update({k: v for k, v in (("n", n), ("staleness_bound", staleness_bound)) if v is not None})
    cfg = compose_groups(
        {
            "protocol": proto,
            "lr_policy": lr_policy,
            "compression": compression,
            "hardware": hardware,
            "topology": topology,
        },
        {"learners": learners, "seed": seed},
    )
    name = cfg["protocol"]["name"]
    require(
        name not in LOCAL_PROTOCOLS,
        "protocol.name",
        name,
        "hardsync, softsync, async or ssp with a LightningModule (the local-step protocols "
        f"{', '.join(LOCAL_PROTOCOLS)} run psbench's own loss for H steps: use the psbench command)",
    )
    require(
        not cfg["hardware"].get("calibrate"),
        "hardware.calibrate",
        True,
        "false with a LightningModule (calibration times psbench's own models; give hardware.compute instead)",
    )
    keys = TRAINER.options["default"]
    knobs = {
        "updates_per_step": updates_per_step,
        "log_every_n_updates": log_every_n_updates,
        "memory_budget_mb": memory_budget_mb,
        "batching": batching,
    }
    check_keys(
        "",
        knobs,
        {
            **{k: keys[k] for k in ("updates_per_step", "log_every_n_updates", "memory_budget_mb")},
            "batching": one_of("auto", "loop"),
        },
        "ParameterServerStrategy.simulated",
    )
    return SimulatedSetup(
        build_protocol(cfg),
        build_topology(cfg),
        build_lr_policy(cfg),
        build_cost(cfg, 0),
        compression_options(cfg),
        int(seed),
        updates_per_step,
        int(log_every_n_updates),
        batching,
        memory_budget_mb,
    )


def _with_progress(updates: Iterator[Update], total: int, mode: str, after_s: float = 2.0) -> Iterator[Update]:
    """The simulation's updates, with a safe point for signals every 256 and, once it has run ``after_s``, a
    progress line every few seconds on stderr (``trainer.progress``: none shows nothing)."""
    t0 = last = time.perf_counter()
    done = 0
    for u in lifecycle.checked(updates):
        done += len(u.contributions)
        yield u
        if mode != "none" and done % 1024 < len(u.contributions):
            now = time.perf_counter()
            if now - t0 >= after_s and now - last >= (0.5 if mode == "rich" and sys.stderr.isatty() else 5.0):
                last = now
                eta = (now - t0) * (total - done) / max(1, done)
                print(
                    f"psbench: simulating the schedule: {done:,} of {total:,} gradients "
                    f"({100 * done / total:.0f} %), {now - t0:.0f} s, ~{eta:.0f} s left",
                    file=sys.stderr,
                    flush=True,
                )
    if mode != "none" and time.perf_counter() - t0 >= after_s:
        print(
            f"psbench: simulated the schedule: {done:,} gradients in {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def _plain(node: Any) -> Any:
    """A config node as plain dicts and lists (resolved)."""
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    return node
