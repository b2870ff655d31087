"""Executing PS schedules with Lightning: batches per update, snapshots, batched gradients, the strategy."""

from psbench.strategy.batches import SampleStream, SnapshotGroup, UpdateBatch, UpdateBatches
from psbench.strategy.gradients import BATCHING, update_gradient
from psbench.strategy.module import ClassifierModule, build_optimizer
from psbench.strategy.ps_strategy import ParameterServerStrategy
from psbench.strategy.snapshots import SnapshotStore

__all__ = ["BATCHING", "ClassifierModule", "ParameterServerStrategy", "SampleStream", "SnapshotGroup",
           "SnapshotStore", "UpdateBatch", "UpdateBatches", "build_optimizer", "update_gradient"]
