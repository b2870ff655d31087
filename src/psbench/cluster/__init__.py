"""Cost model and topologies: what time things take (no gradient values involved)."""

from psbench.cluster.cost import PROFILES, ComputeModel, CostModel, JitterStreams
from psbench.cluster.topology import TOPOLOGIES, Topology

__all__ = ["PROFILES", "TOPOLOGIES", "ComputeModel", "CostModel", "JitterStreams", "Topology"]
