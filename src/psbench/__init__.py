"""psbench: parameter-server protocols simulated on one machine (``psbench --help``; README).

``from psbench import ParameterServerStrategy`` is the Lightning strategy, for the user's own script
(``ParameterServerStrategy.simulated(...)``; ``psbench.lightning``'s for ``import lightning``); it loads on first use,
so the CLI starts without torch.

Started as ``python -m psbench…``, Python puts the working directory first on ``sys.path``, ahead of the installed
packages; it is moved last here, before anything else is imported, so a ``torch.py`` or ``PIL.py`` in the directory
psbench is started from is never imported in place of the package (a user's own ``_target_`` modules there are
still found: :func:`psbench.target.add_to_sys_path`).
"""

import os as _os
import sys as _sys


def _launched_as_module(argv: list[str]) -> bool:
    """Whether ``argv`` (``sys.orig_argv``) starts the interpreter as ``python -m psbench…``."""
    args = iter(argv[1:])
    for a in args:
        if a == "-m":
            return next(args, "").split(".")[0] == "psbench"
        if a.startswith("-m"):
            return a[2:].split(".")[0] == "psbench"
        if a in ("-X", "-W"):  # an option with a value
            next(args, None)
        elif a == "-c" or not a.startswith("-"):  # a command or a script
            return False
    return False


if not _sys.flags.safe_path and _sys.path and _launched_as_module(list(getattr(_sys, "orig_argv", []))):
    if _sys.path[0] in ("", _os.getcwd()):
        _sys.path.append(_sys.path.pop(0))

from psbench.lazy import lazy  # noqa: E402

__getattr__ = lazy(
    __name__,
    {"ParameterServerStrategy": "psbench.strategy.ps_strategy", "SimulatedStrategy": "psbench.strategy.ps_strategy"},
)

__all__ = ["ParameterServerStrategy", "SimulatedStrategy"]
