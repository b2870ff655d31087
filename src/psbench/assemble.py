"""Run assembly: a composed config becomes one typed :class:`~psbench.run_setup.RunSetup`, and the config goes no
further.

:func:`build_run` builds everything a run needs — data, model, protocol, topology, lr policy, codecs, cost
model, the simulated schedule (:mod:`psbench.ps.plan`, as ``ParameterServerStrategy.simulated`` plans it), the
optimizer settings and the typed trainer/engine options — and makes every check that needs them (data files, the
schedule's size; the engine's memory budget and device are checked by :func:`psbench.train.prepare`). Both engines
take the :class:`~psbench.run_setup.RunSetup` (:func:`psbench.strategy.executor.train_sim`,
:func:`psbench.distributed.launcher.train_dist`), so a config means the same run in either; they, and the packages
they run, never read the composed config (nor import this module). The CLI builds the setup before it creates the
MLflow run: input that a check refuses leaves no run behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from psbench.cluster import CostModel
from psbench.cluster.options import build_cost as hardware_cost
from psbench.cluster.options import build_topology, hardware_name
from psbench.compression.options import compression_options
from psbench.data import output_size, task_of
from psbench.errors import ConfigError, require
from psbench.lr import LRPolicy
from psbench.lr.options import build_lr_policy as lr_policy_of
from psbench.ps import Protocol, Schedule, plan
from psbench.ps.options import build_protocol as protocol_of
from psbench.run_setup import DistOptions, RunSetup, TrainerOptions


# --------------------------------------------------------------------------- the pieces, from a config
def build_protocol(cfg: DictConfig | Mapping[str, Any]) -> Protocol:
    return protocol_of(_plain(cfg))


def build_cost(
    cfg: DictConfig | Mapping[str, Any],
    message_bytes: int,
    net: torch.nn.Module | None = None,
    input_shape: tuple = (),
    num_classes: int = 10,
    loss=None,
    target_shape: tuple | None = None,
) -> CostModel:
    """The ``hardware`` group's cost model (:func:`psbench.cluster.options.build_cost`), its compute times measured
    on this machine for ``net`` where ``hardware.calibrate`` says so (:mod:`psbench.calibration.model_time`)."""
    cfg = _plain(cfg)
    cost = hardware_cost(cfg, message_bytes)
    if cfg["hardware"].get("calibrate") and net is not None:
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
    _check_model_memory(model, dm.input_shape, output_size(dm), getattr(dm, "name", None))
    torch.manual_seed(seed)
    net = build_net(model, dm.input_shape, output_size(dm))
    choice = intra_op.run_threads(resolved, net, dm.input_shape)
    intra_op.apply(choice)
    return dm, net, choice


def _check_model_memory(node: Mapping[str, Any], input_shape, outputs: int, data: str | None = None) -> None:
    """The model's weights, a gradient and two optimizer buffers fit in half this machine's memory (its parameters
    counted on the meta device, nothing allocated); else :class:`ConfigError` naming the model — or, when the same
    model with two outputs would fit, :class:`~psbench.errors.DataError` naming the data set ``data``, whose
    classes (the largest label + 1) are then what is too many. A user's model that cannot be built on the meta
    device is counted once it is built."""
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
    if need > memory // 2 and outputs > 2 and data is not None:  # the data's labels, not the model, ask too much
        from psbench.errors import DataError

        try:
            with torch.device("meta"):
                small = 4 * model_bytes(build_net(node, input_shape, 2))
        except Exception:  # a model that cannot have two outputs: the model is named below
            small = need
        if small <= memory // 2:
            raise DataError(
                f"{data}: its {outputs:,} classes (the largest label + 1) give the model an output layer of "
                f"{(need - small) // 16:,} more parameters than two classes would, more than half this machine's "
                f"memory ({memory / 2**30:.1f} GiB) with its gradient and optimizer state: is a label wrong?"
            )
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
    check_net(model, net, bool(resolved["schedule_only"]), resolved["engine"]["name"], resolved["protocol"])
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
    return lr_policy_of(_plain(cfg), build_protocol(cfg))


def total_gradients(cfg: DictConfig | Mapping[str, Any], num_train: int, protocol: Protocol) -> int:
    """G = ⌊epochs·N / (μ·H)⌋, capped by ``trainer.max_updates`` (:func:`psbench.ps.plan.gradient_count`)."""
    spg = int(cfg["batch_size"]) * protocol.local_steps
    limits = {"epochs": (cfg["epochs"], float(cfg["epochs"]) * num_train / spg)}
    max_updates = cfg["trainer"].get("max_updates")
    if max_updates is not None:
        limits["trainer.max_updates"] = (max_updates, float(max_updates) * protocol.gradients_per_update)
    return plan.gradient_count(protocol, num_train, spg, limits)


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
    """The run's cost model: the hardware profile for this model, with the codec's exact push/pull payloads
    (:func:`psbench.ps.plan.codec_cost`)."""
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
    return plan.codec_cost(cost, compression, protocol)


def build_compression(cfg: DictConfig | Mapping[str, Any], net: torch.nn.Module):
    """Per-learner codecs for ``cfg.compression`` (:mod:`psbench.compression`), or None for ``none``."""
    options = compression_options(_plain(cfg))
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
        hardware=hardware_name(resolved),
        threads=threads.threads,
        threads_from=threads.threads_from,
    )
    return _with_schedule(setup)


def _with_schedule(setup: RunSetup) -> RunSetup:
    """``setup`` with its schedule: simulated (:func:`psbench.ps.plan.simulate`), the replayed file
    (``engine.schedule``, for as many learners) or none (a dist free run: the real processes make it)."""
    dist, protocol, trainer = setup.dist, setup.protocol, setup.trainer
    if dist is not None and dist.mode == "free_run":
        return setup
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
    sim = plan.simulate(
        protocol,
        setup.cost,
        setup.topology,
        setup.batch_size,
        setup.gradients,
        setup.seed,
        progress=trainer.progress,
        timeline_updates=trainer.timeline_updates,
    )
    return replace(setup, schedule=sim.schedule, sim_stats=sim.stats, trace=sim.trace)


def _plain(node: Any) -> Any:
    """A config node as plain dicts and lists (resolved)."""
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    return node
