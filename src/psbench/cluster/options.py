"""The ``topology`` and ``hardware`` config groups (Rudra §3.2–3.3 shapes; cost-model profiles)."""

from __future__ import annotations

from psbench.cluster.cost import PROFILES
from psbench.cluster.topology import TOPOLOGIES
from psbench.schema import Group, Keys, boolean, integer, number

TOPOLOGY = Group({name: {"learners_per_node": integer(1), "broadcast_fanout": integer(1), "leaf_gather": boolean(),
                         "nodes": integer(1, null="learners_per_node per node")}
                  for name in TOPOLOGIES})

_SECONDS, _RATE = "seconds", "bytes/s"
_HARDWARE: Keys = {
    "compute": {"overhead_s": number(0, unit=_SECONDS), "per_sample_s": number(0, lo_open=True, unit=_SECONDS)},
    "calibrate": boolean(),
    "bandwidth_Bps": number(0, lo_open=True, unit=_RATE),
    "intra_node_bandwidth_Bps": number(0, lo_open=True, unit=_RATE),
    "latency_s": number(0, unit=_SECONDS),
    "ps_service_s": number(0, unit=_SECONDS),
    "ps_apply_Bps": number(0, lo_open=True, unit=_RATE),
    "jitter_cv": number(0),
    "ps_jitter_cv": number(0),
    "stragglers": {"fraction": number(0, 1), "slowdown": number(1)},
    "heavy_tail": number(1, lo_open=True, null=True, unit="a Pareto shape"),
    "contention": number(0),
    "ps_shards": integer(1),
    "ps_colocated": boolean(),
    "node_share": number(0),
}
#: one option per cost-model profile; every key may be overridden
HARDWARE = Group({name: _HARDWARE for name in PROFILES})
