"""psbench's strategy for the unified ``lightning`` package (``lightning.pytorch``, ``import lightning as L``)::

    import lightning as L
    from psbench.lightning import ParameterServerStrategy

    strategy = ParameterServerStrategy.simulated(protocol="softsync", n=4, learners=8)
    trainer = L.Trainer(strategy=strategy, max_epochs=2)

The same definition as ``psbench.ParameterServerStrategy`` (:class:`~psbench.strategy.ps_strategy.
ParameterServerStrategyCore`), over ``lightning.pytorch``'s ``SingleDeviceStrategy``: a Trainer accepts only a Strategy
of its own namespace (:mod:`psbench.lightning_namespaces`). In a LightningCLI config::

    trainer:
      strategy:
        class_path: psbench.lightning.SimulatedStrategy
        init_args: {protocol: softsync, n: 4, learners: 8}
"""

# mypy: disable-error-code="misc"
# (mypy sees the core over pytorch_lightning's SingleDeviceStrategy, whose attribute types are the same classes under
# the other namespace's names; at run time the core extends only this one)
from __future__ import annotations

from lightning.pytorch.strategies import SingleDeviceStrategy

from psbench.strategy.ps_strategy import ParameterServerStrategyCore, SimulatedArguments

__all__ = ["ParameterServerStrategy", "SimulatedStrategy"]


class ParameterServerStrategy(ParameterServerStrategyCore, SingleDeviceStrategy):
    """The strategy for ``lightning.pytorch`` Trainers (:class:`~psbench.strategy.ps_strategy.
    ParameterServerStrategyCore`)."""

    lightning_namespace = "lightning.pytorch"


class SimulatedStrategy(SimulatedArguments, ParameterServerStrategy):
    """:class:`~psbench.strategy.ps_strategy.SimulatedArguments` for ``lightning.pytorch`` Trainers."""


ParameterServerStrategy.simulated_class = SimulatedStrategy
