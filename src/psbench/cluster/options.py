"""The ``topology`` and ``hardware`` config groups (Rudra §3.2–3.3 shapes; cost-model profiles).

Every cost-model parameter has an upper bound (and rates a lower one) far past any cluster's, so that the virtual
clock of a run of at most 2**31 − 1 gradients stays finite and exact to the microsecond: at most 10**6 s per
message, per mini-batch overhead or per PS service, 10**3 s per sample, a coefficient of variation of 10, slowdown
and sharing factors of 10**6 and 10**3, rates of 1 B/s to 10**15 B/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psbench.cluster.cost import PROFILES, CostModel
from psbench.cluster.topology import TOPOLOGIES, Topology
from psbench.schema import MAX_LEARNERS, Group, Keys, boolean, integer, number

_NODES = integer(1, MAX_LEARNERS)
TOPOLOGY = Group(
    {
        name: {
            "learners_per_node": _NODES,
            "broadcast_fanout": _NODES,
            "leaf_gather": boolean(),
            "nodes": integer(1, MAX_LEARNERS, null="learners_per_node per node"),
        }
        for name in TOPOLOGIES
    }
)

_SECONDS, _RATE = "seconds", "bytes/s"
_TIME = number(0, 1e6, unit=_SECONDS)
_BANDWIDTH = number(1, 1e15, unit=_RATE)
_CV = number(0, 10, unit="a coefficient of variation")
_HARDWARE: Keys = {
    "compute": {"overhead_s": _TIME, "per_sample_s": number(0, 1e3, lo_open=True, unit=_SECONDS)},
    "calibrate": boolean(),
    "bandwidth_Bps": _BANDWIDTH,
    "intra_node_bandwidth_Bps": _BANDWIDTH,
    "latency_s": _TIME,
    "ps_service_s": _TIME,
    "ps_apply_Bps": _BANDWIDTH,
    "jitter_cv": _CV,
    "ps_jitter_cv": _CV,
    "stragglers": {"fraction": number(0, 1), "slowdown": number(1, 1e6)},
    "heavy_tail": number(1, 1e6, lo_open=True, null=True, unit="a Pareto shape"),
    "contention": number(0, 1e3),
    "ps_shards": integer(1, MAX_LEARNERS),
    "ps_colocated": boolean(),
    "node_share": number(0, 1e3),
}
#: one option per cost-model profile; every key may be overridden
HARDWARE = Group({name: _HARDWARE for name in PROFILES})


def build_topology(cfg: Mapping[str, Any]) -> Topology:
    """The :class:`~psbench.cluster.topology.Topology` of a resolved config's ``topology`` group."""
    t = cfg["topology"]
    nodes = t.get("nodes")
    return Topology(
        t["name"],
        int(t["learners_per_node"]),
        int(t["broadcast_fanout"]),
        bool(t["leaf_gather"]),
        None if nodes is None else int(nodes),
    )


#: the ``hardware`` keys that override a profile's cost-model parameter of the same name
_OVERRIDES = (
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


def build_cost(cfg: Mapping[str, Any], message_bytes: int) -> CostModel:
    """The cost model of a resolved config's ``hardware`` group for messages of ``message_bytes`` (the profile with
    the group's overrides; ``hardware.calibrate`` is :func:`psbench.assemble.build_cost`'s)."""
    h = cfg["hardware"]
    overrides = {k: h.get(k) for k in _OVERRIDES}
    compute = h.get("compute") or {}
    overrides.update(overhead_s=compute.get("overhead_s"), per_sample_s=compute.get("per_sample_s"))
    strag = h.get("stragglers") or {}
    overrides.update(straggler_fraction=strag.get("fraction"), straggler_slowdown=strag.get("slowdown"))
    return CostModel.from_profile(h["name"], message_bytes, **overrides)


def hardware_name(cfg: Mapping[str, Any]) -> str:
    """The hardware profile as a run's timeline names it (``p775``, ``laptop (calibrated)``)."""
    h = cfg["hardware"]
    return str(h["name"]) + (" (calibrated)" if h.get("calibrate") else "")
