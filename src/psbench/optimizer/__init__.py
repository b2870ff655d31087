"""The PS optimizer: its config group (:mod:`.options`, torch-free) and its construction (:mod:`.build`)."""

from psbench.lazy import lazy
from psbench.optimizer.options import OPTIMIZER, OPTIMIZERS

__getattr__ = lazy(
    __name__,
    {
        "configure": "psbench.optimizer.build",
        "build_optimizer": "psbench.optimizer.build",
        "param_groups": "psbench.optimizer.build",
        "server_optimizer": "psbench.optimizer.build",
    },
)

__all__ = ["OPTIMIZER", "OPTIMIZERS", "build_optimizer", "configure", "param_groups", "server_optimizer"]
