"""Parameter-server semantics: protocols, the gate, the event schedule, staleness accounting."""

from psbench.ps.gate import Gate
from psbench.ps.protocols import PROTOCOLS, Protocol
from psbench.ps.schedule import Contribution, Schedule, Update
from psbench.ps.simulator import SimStats, Simulator
from psbench.ps.staleness import StalenessStats

__all__ = [
    "PROTOCOLS",
    "Contribution",
    "Gate",
    "Protocol",
    "Schedule",
    "SimStats",
    "Simulator",
    "StalenessStats",
    "Update",
]
