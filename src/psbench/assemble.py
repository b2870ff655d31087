"""Run assembly: the data, model, protocol, topology, cost model, lr policy and codecs of a composed config.

Both executors build a run from these (the simulator's Lightning path, :mod:`psbench.strategy.executor`,
and the real processes, :mod:`psbench.dist.launcher`), so a config means the same run in either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from psbench.cluster import CostModel, Topology
from psbench.errors import require
from psbench.lr import LRPolicy
from psbench.ps import Protocol


def setting(cfg: Mapping, key: str, default: Any = None) -> Any:
    v = cfg.get(key, default) if cfg is not None else default
    return default if v is None else v


def build_protocol(cfg: DictConfig) -> Protocol:
    p = cfg.protocol
    rho = p.get("rho")
    return Protocol(p.name, int(cfg.learners), n=p.get("n"), staleness_bound=p.get("staleness_bound"),
                    local_steps=int(setting(p, "local_steps", 1)), rho=None if rho is None else float(rho))


def build_topology(cfg: DictConfig) -> Topology:
    t = cfg.topology
    nodes = t.get("nodes")
    return Topology(t.name, int(setting(t, "learners_per_node", 4)), int(setting(t, "broadcast_fanout", 2)),
                    bool(setting(t, "leaf_gather", False)), None if nodes is None else int(nodes))


def build_cost(cfg: DictConfig, message_bytes: int, net: torch.nn.Module | None = None,
               input_shape: tuple = (), num_classes: int = 10) -> CostModel:
    h = cfg.hardware
    overrides = {k: h.get(k) for k in ("bandwidth_Bps", "intra_node_bandwidth_Bps", "latency_s", "ps_service_s",
                                       "ps_apply_Bps", "jitter_cv", "ps_jitter_cv", "heavy_tail",
                                       "contention", "ps_shards", "ps_colocated", "node_share")}
    compute = h.get("compute") or {}
    overrides.update(overhead_s=compute.get("overhead_s"), per_sample_s=compute.get("per_sample_s"))
    strag = h.get("stragglers") or {}
    overrides.update(straggler_fraction=strag.get("fraction"), straggler_slowdown=strag.get("slowdown"))
    cost = CostModel.from_profile(h.name, message_bytes, **overrides)
    if h.get("calibrate") and net is not None:
        from dataclasses import replace

        from psbench.cluster.calibrate import calibrate

        mu = int(cfg.batch_size)
        cost = replace(cost, compute=calibrate(net, input_shape, num_classes, sorted({1, 4, 16, 64, mu})))
    return cost


def build_data_and_model(cfg: DictConfig):
    """The data module (prepared and set up) and the seeded model of a config; sets the torch thread count."""
    from psbench.data import build_datamodule
    from psbench.models import build_model

    seed = int(cfg.seed)
    if cfg.trainer.get("num_threads"):
        torch.set_num_threads(int(cfg.trainer.num_threads))
    torch.manual_seed(seed)
    ds = OmegaConf.to_container(cfg.dataset, resolve=True)
    if ds["name"] == "imagenet":  # type: ignore[index, call-overload]
        from psbench.data.options import imagenet_crop

        ds["crop"] = imagenet_crop(ds["crop"], cfg.model.name)  # type: ignore[index, call-overload]
    dm = build_datamodule(ds.pop("name"), cfg.paths.data_dir, seed=seed, **ds)  # type: ignore[union-attr, arg-type]
    dm.prepare_data()
    dm.setup("fit")
    m = OmegaConf.to_container(cfg.model, resolve=True)
    torch.manual_seed(seed)
    net = build_model(m.pop("name"), dm.input_shape, dm.num_classes, **m)  # type: ignore[union-attr, arg-type]
    return dm, net


def build_lr_policy(cfg: DictConfig) -> LRPolicy:
    lp = OmegaConf.to_container(cfg.lr_policy, resolve=True)
    return LRPolicy(**lp)  # type: ignore[arg-type]


def total_gradients(cfg: DictConfig, num_train: int, protocol: Protocol) -> int:
    spg = int(cfg.batch_size) * protocol.local_steps
    g = int(float(cfg.epochs) * num_train) // spg
    max_updates = cfg.trainer.get("max_updates")
    if max_updates is not None:
        g = min(g, int(max_updates) * protocol.gradients_per_update)
    require(g >= protocol.gradients_per_update, "epochs", cfg.epochs,
            f"enough epochs for one update of c = {protocol.gradients_per_update} gradients of μ = {cfg.batch_size}")
    return g


def updates_per_epoch(updates: int, gradients: int, samples_per_gradient: int, num_train: int) -> float:
    """PS updates per epoch of N samples: where the lr schedule's epoch milestones and evaluations fall."""
    return updates * num_train / max(1, gradients * samples_per_gradient)


def optimizers(cfg: DictConfig, protocol: Protocol) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the PS's optimizer config, the learners'): the same for every protocol but the local-step ones, whose
    learners run ``cfg.optimizer`` for H steps and whose PS adds their commits (:func:`server_optimizer`)."""
    from psbench.optimizer.build import server_optimizer
    from psbench.ps.local import uses_local_steps

    learner = OmegaConf.to_container(cfg.optimizer, resolve=True)
    return (server_optimizer(learner) if uses_local_steps(protocol.name) else learner), learner  # type: ignore[arg-type,return-value]


def build_run_cost(cfg: DictConfig, net: torch.nn.Module, dm, protocol: Protocol, compression=None) -> CostModel:
    """The run's cost model: the hardware profile for this model, with the codec's exact push/pull payloads."""
    from psbench.models import model_bytes

    cost = build_cost(cfg, model_bytes(net), net, dm.input_shape, dm.num_classes)
    if compression is None:
        return cost
    from dataclasses import replace  # codec payloads are data-independent: they set the transfer times

    return replace(cost, push_bytes=compression.push_bytes(),
                   pull_bytes=compression.pull_bytes(protocol.gradients_per_update), pull_delta=compression.localize)


def build_compression(cfg: DictConfig, net: torch.nn.Module):
    """Per-learner codecs for ``cfg.compression`` (:mod:`psbench.compression`), or None for ``none``."""
    c = cfg.get("compression")
    if c is None or setting(c, "name", "none") == "none":
        return None
    from psbench.compression.pipeline import LearnerCompression

    return LearnerCompression(OmegaConf.to_container(c, resolve=True),  # type: ignore[arg-type]
                              {k: p.shape for k, p in net.named_parameters()}, int(cfg.seed))
