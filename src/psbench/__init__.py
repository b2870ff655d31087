"""psbench: parameter-server protocols simulated on one machine (``psbench --help``; README).

``from psbench import ParameterServerStrategy`` is the Lightning strategy, for the user's own script
(``ParameterServerStrategy.simulated(...)``); it loads on first use, so the CLI starts without torch.
"""

from psbench.lazy import lazy

__getattr__ = lazy(__name__, {"ParameterServerStrategy": "psbench.strategy.ps_strategy"})

__all__ = ["ParameterServerStrategy"]
