"""The factory of ``ParameterServerStrategy.simulated``: its arguments, checked as the CLI checks the same groups,
become a :class:`~psbench.run_setup.SimulatedSetup`.

It reads only the groups' declarations and builders (``ps/``, ``cluster/``, ``lr/``, ``compression/`` and
``strategy/options.py``, composed by :func:`psbench.validate.compose_groups`), never the run assembly
(:mod:`psbench.assemble`); the strategy plans the rest from the user's Trainer at ``setup``
(:mod:`psbench.strategy.simulated`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.errors import require
from psbench.run_setup import SimulatedSetup


def simulated_setup(
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
    progress: str = "auto",
    timeline_updates: int | None = None,
    divergence_factor: float | None = 4.0,
) -> SimulatedSetup:
    """The checked :class:`~psbench.run_setup.SimulatedSetup` of ``ParameterServerStrategy.simulated``'s arguments:
    the groups mean what the CLI's mean (:func:`psbench.validate.compose_groups`), so a bad value raises the CLI's
    :class:`~psbench.errors.ConfigError` line when the strategy is made.

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
        progress: the simulation's progress lines on stderr once it runs for seconds (``none``: none), as
            ``trainer.progress``.
        timeline_updates: the updates ``timeline.png`` draws (None: a few pushes of every learner; 0: none), as
            ``trainer.timeline_updates``.
        divergence_factor: the run diverged when its train loss exceeds this × its start (None: only a non-finite
            one), as ``trainer.divergence_factor`` (:mod:`psbench.ps.divergence`).
    """
    from psbench.cluster.options import build_cost, build_topology, hardware_name
    from psbench.compression.options import compression_options
    from psbench.lr.options import build_lr_policy
    from psbench.ps.options import build_protocol
    from psbench.validate import compose_groups

    proto: dict[str, Any] = {"name": protocol} if isinstance(protocol, str) else dict(protocol)
    proto.update({k: v for k, v in (("n", n), ("staleness_bound", staleness_bound)) if v is not None})
    if proto.get("name") is not None:  # (none: the config's default protocol)
        _check_protocol(proto["name"])
    groups = {"protocol": proto, "lr_policy": lr_policy, "compression": compression, "hardware": hardware}
    cfg = compose_groups({**groups, "topology": topology}, {"learners": learners, "seed": seed})
    _check_groups(cfg)
    knobs = {
        "updates_per_step": updates_per_step,
        "log_every_n_updates": log_every_n_updates,
        "memory_budget_mb": memory_budget_mb,
        "progress": progress,
        "timeline_updates": timeline_updates,
        "divergence_factor": divergence_factor,
    }
    _check_knobs(knobs, batching)
    built = build_protocol(cfg)
    return SimulatedSetup(
        built,
        build_topology(cfg),
        build_lr_policy(cfg, built),
        build_cost(cfg, 0),
        compression_options(cfg),
        int(seed),
        updates_per_step,
        int(log_every_n_updates),
        batching,
        memory_budget_mb,
        hardware_name(cfg),
        progress,
        timeline_updates,
        divergence_factor,
    )


def _check_knobs(knobs: dict[str, Any], batching: str) -> None:
    """The strategy's own knobs, as the ``trainer`` group declares its keys of the same names (``batching``: auto or
    loop)."""
    from psbench.schema import check_keys, one_of
    from psbench.strategy.options import TRAINER

    declared = {k: TRAINER.options["default"][k] for k in knobs}
    allowed = {**declared, "batching": one_of("auto", "loop")}
    check_keys("", {**knobs, "batching": batching}, allowed, "ParameterServerStrategy.simulated")


def _check_protocol(name: Any) -> None:
    """The protocols a LightningModule runs (the ``protocol`` group's others are the local-step ones, which run
    psbench's own loss for H steps), before the group is composed: its error would list those too."""
    from psbench.ps.local import LOCAL_PROTOCOLS
    from psbench.ps.protocols import PROTOCOLS

    runs = [p for p in PROTOCOLS if p not in LOCAL_PROTOCOLS]
    require(
        name in runs,
        "protocol.name",
        name,
        f"{', '.join(runs[:-1])} or {runs[-1]} with a LightningModule (the local-step protocols "
        f"{', '.join(LOCAL_PROTOCOLS)} run psbench's own loss for H steps: use the psbench command)",
    )


def _check_groups(cfg: dict[str, Any]) -> None:
    """What a LightningModule cannot run with a group's option: calibration (it times psbench's own models)."""
    require(
        not cfg["hardware"].get("calibrate"),
        "hardware.calibrate",
        True,
        "false with a LightningModule (calibration times psbench's own models; give hardware.compute instead)",
    )
