"""The ``topology`` and ``hardware`` config groups (Rudra §3.2–3.3 shapes; cost-model profiles).

Every cost-model parameter has an upper bound (and rates a lower one) far past any cluster's, so that the virtual
clock of a run of at most 2**31 − 1 gradients stays finite and exact to the microsecond: at most 10**6 s per
message, per mini-batch overhead or per PS service, 10**3 s per sample, a coefficient of variation of 10, slowdown
and sharing factors of 10**6 and 10**3, rates of 1 B/s to 10**15 B/s.
"""

from __future__ import annotations

from psbench.cluster.cost import PROFILES
from psbench.cluster.topology import TOPOLOGIES
from psbench.schema import MAX_LEARNERS, Group, Keys, boolean, integer, number

_NODES = integer(1, MAX_LEARNERS)
TOPOLOGY = Group({name: {"learners_per_node": _NODES, "broadcast_fanout": _NODES, "leaf_gather": boolean(),
                         "nodes": integer(1, MAX_LEARNERS, null="learners_per_node per node")}
                  for name in TOPOLOGIES})

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
