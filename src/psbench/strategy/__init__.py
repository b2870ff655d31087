"""Executing PS schedules with Lightning: batches per update, snapshots, gradients computed ahead, the strategy.

Attributes load lazily, so the torch-free :mod:`psbench.strategy.options` imports without torch.
"""

from psbench.lazy import lazy
from psbench.strategy.options import BATCHING

__getattr__ = lazy(
    __name__,
    {
        "SampleStream": "psbench.strategy.batches",
        "SnapshotGroup": "psbench.strategy.batches",
        "UpdateBatch": "psbench.strategy.batches",
        "UpdateBatches": "psbench.strategy.batches",
        "Lookahead": "psbench.strategy.lookahead",
        "ClassifierModule": "psbench.strategy.module",
        "build_optimizer": "psbench.optimizer.build",
        "ParameterServerStrategy": "psbench.strategy.ps_strategy",
        "SnapshotStore": "psbench.ps.snapshots",
    },
)

__all__ = [
    "BATCHING",
    "ClassifierModule",
    "Lookahead",
    "ParameterServerStrategy",
    "SampleStream",
    "SnapshotGroup",
    "SnapshotStore",
    "UpdateBatch",
    "UpdateBatches",
    "build_optimizer",
]
