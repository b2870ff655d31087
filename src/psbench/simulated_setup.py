"""The assembly of ``ParameterServerStrategy.simulated(...)``: keyword arguments → a checked :class:`SimulatedSetup`.

The arguments mean what the CLI's groups mean: ``protocol``, ``hardware``, ``topology``, ``lr_policy`` and
``compression`` are an option's name or a mapping of its keys, composed as the CLI composes them (the option's
file in ``psbench/conf/<group>/``, the given keys merged in) and checked by the groups' own declarations, so a bad
value raises the CLI's one line (:class:`~psbench.errors.ConfigError`, ``protocol.n=9 is invalid: allowed …``)
when the strategy is made. What needs the model and the data (the message size, N, μ, the run's length) is the
strategy's, at ``setup`` (:mod:`psbench.strategy.simulated`). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psbench.cluster import CostModel, Topology
from psbench.errors import require
from psbench.lr import LRPolicy
from psbench.ps.protocols import Protocol

#: each group's option when the argument names none
DEFAULTS = {"protocol": "hardsync", "lr_policy": "constant", "compression": "none", "hardware": "laptop",
            "topology": "rudra_base"}
#: how learners' gradients are computed: ``auto`` (checked batching), ``loop`` (one call per learner)
BATCHINGS = ("auto", "loop")


@dataclass(frozen=True)
class SimulatedSetup:
    """What :class:`~psbench.strategy.ps_strategy.SimulatedStrategy` runs. ``cost`` has ``message_bytes`` 0 until
    the module is known; ``compression`` is the codec's options (None: fp32 gradients)."""

    protocol: Protocol
    topology: Topology
    policy: LRPolicy
    cost: CostModel
    compression: Mapping[str, Any] | None
    seed: int
    updates_per_step: int | None
    log_every_n_updates: int
    batching: str
    memory_budget_mb: float | None


def compose(groups: Mapping[str, str | Mapping[str, Any] | None], learners: int, seed: int) -> dict[str, Any]:
    """The resolved config of the groups (plus ``learners`` and ``seed``), checked as :func:`psbench.validate.validate`
    checks them; the local-step protocols and ``hardware.calibrate`` are refused (they need psbench's own model)."""
    from omegaconf import OmegaConf

    from psbench.conf import CONF_DIR
    from psbench.ps.local import LOCAL_PROTOCOLS
    from psbench.schema import check_group, check_keys
    from psbench.validate import GROUPS, TOP

    check_keys("", {"learners": learners, "seed": seed}, {k: TOP[k] for k in ("learners", "seed")}, "the top level")
    cfg: dict[str, Any] = {"learners": learners, "seed": seed}
    for group, value in groups.items():
        node = {"name": value} if isinstance(value, str) or value is None else dict(value)
        name = node.get("name") or DEFAULTS[group]
        options = GROUPS[group].options
        require(isinstance(name, str) and name in options, f"{group}.name", name, "one of " + ", ".join(options))
        merged = OmegaConf.merge(OmegaConf.load(CONF_DIR / group / f"{name}.yaml"), {**node, "name": name})
        cfg[group] = OmegaConf.to_container(merged, resolve=True)
        check_group(group, cfg[group], GROUPS[group])
    name = cfg["protocol"]["name"]
    require(name not in LOCAL_PROTOCOLS, "protocol.name", name,
            "hardsync, softsync, async or ssp with a LightningModule (the local-step protocols "
            f"{', '.join(LOCAL_PROTOCOLS)} run psbench's own loss for H steps: use the psbench command)")
    require(not cfg["hardware"].get("calibrate"), "hardware.calibrate", True,
            "false with a LightningModule (calibration times psbench's own models; give hardware.compute instead)")
    for group in groups:
        if GROUPS[group].check is not None:
            GROUPS[group].check(cfg)
    return cfg


def simulated_setup(protocol: str | Mapping[str, Any] = "hardsync", *, learners: int, n: int | None = None,
                    staleness_bound: int | None = None, hardware: str | Mapping[str, Any] = "laptop",
                    topology: str | Mapping[str, Any] = "rudra_base", lr_policy: str | Mapping[str, Any] = "constant",
                    compression: str | Mapping[str, Any] | None = "none", seed: int = 0,
                    updates_per_step: int | None = None, log_every_n_updates: int = 10, batching: str = "auto",
                    memory_budget_mb: float | None = None) -> SimulatedSetup:
    """The checked :class:`SimulatedSetup` of ``ParameterServerStrategy.simulated``'s arguments.

    Args:
        protocol: ``hardsync`` | ``softsync`` | ``async`` | ``ssp``, or a mapping of the ``protocol`` group.
        learners: λ.
        n: softsync's splitting parameter (``protocol.n``); staleness_bound: SSP's s (``protocol.staleness_bound``).
        hardware: a cost-model profile (``laptop``, ``p775``, ``p775_cluster``) or a mapping of the ``hardware``
            group's keys (``{"name": "laptop", "bandwidth_Bps": 1e8}``).
        topology: ``rudra_base`` | ``rudra_adv`` | ``rudra_adv_star``, or a mapping.
        lr_policy: the staleness-aware lr policy (``constant``, ``mean_staleness``, ``per_gradient``, …), or a mapping.
        compression: a codec (``none``, ``terngrad``, ``qsgd``, ``topk``, …), or a mapping of its keys.
        seed: the simulator's jitter streams and the sample stream.
        updates_per_step: PS updates per Trainer step (None: the updates of ~128 samples, at most 64).
        log_every_n_updates: psbench's ``ps/*`` metrics every this many updates.
        batching: ``auto`` (learners that read one snapshot in one call, channels_last convs on the CPU, each checked
            on the first gradients it applies to) | ``loop`` (one ``training_step`` call per learner).
        memory_budget_mb: bound on snapshots and gradients computed ahead (None: 2048 MiB or what the schedule
            needs, if more).
    """
    from psbench.cluster.options import cost_model
    from psbench.ps.options import build_protocol
    from psbench.schema import check_keys, one_of
    from psbench.strategy.options import TRAINER

    proto = {"name": protocol} if isinstance(protocol, str) else dict(protocol)
    proto.update({k: v for k, v in (("n", n), ("staleness_bound", staleness_bound)) if v is not None})
    cfg = compose({"protocol": proto, "lr_policy": lr_policy, "compression": compression, "hardware": hardware,
                   "topology": topology}, learners, seed)
    keys = TRAINER.options["default"]
    knobs = {"updates_per_step": updates_per_step, "log_every_n_updates": log_every_n_updates,
             "memory_budget_mb": memory_budget_mb, "batching": batching}
    check_keys("", knobs, {**{k: keys[k] for k in ("updates_per_step", "log_every_n_updates", "memory_budget_mb")},
                           "batching": one_of(*BATCHINGS)}, "ParameterServerStrategy.simulated")
    t, codec = cfg["topology"], cfg["compression"]  # as psbench.assemble builds them
    topo = Topology(t["name"], int(t["learners_per_node"]), int(t["broadcast_fanout"]), bool(t["leaf_gather"]),
                    None if t.get("nodes") is None else int(t["nodes"]))
    return SimulatedSetup(build_protocol(cfg), topo, LRPolicy(**cfg["lr_policy"]), cost_model(cfg["hardware"], 0),
                          None if codec["name"] == "none" else codec, int(seed), updates_per_step,
                          int(log_every_n_updates), batching, memory_budget_mb)
