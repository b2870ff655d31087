"""Lazy package attributes (PEP 562): a package's torch-free parts import without torch.

``__getattr__ = lazy(__name__, {"Name": "package.module", ...})`` in a package's ``__init__``
imports ``Name`` from its module on first use, and any submodule on attribute access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
