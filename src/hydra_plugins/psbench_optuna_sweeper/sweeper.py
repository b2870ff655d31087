"""The Hydra ``Sweeper`` plugin class; the work is in :mod:`._impl` (imported on first use)."""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.psbench_optuna_sweeper import config as _config  # noqa: F401  (registers the config)


class PsbenchOptunaSweeper(Sweeper):
    """``hydra/sweeper=psbench_optuna``: an Optuna ≥ 4 study over Hydra overrides.

    Keys: :class:`~hydra_plugins.psbench_optuna_sweeper.config.PsbenchOptunaSweeperConf`.
    """

    def __init__(self, **kwargs: Any) -> None:
        from hydra_plugins.psbench_optuna_sweeper._impl import OptunaSweeperImpl

        self.impl = OptunaSweeperImpl(**kwargs)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self.impl.sweep(arguments)
