"""Lightning's two namespaces: ``pytorch_lightning`` (the standalone package) and ``lightning.pytorch`` (the unified
``lightning`` package, as lightning-hydra-template and Lightning's own examples import it).

They hold the same code under two names, and their classes do not mix: a ``lightning.Trainer`` accepts only a
``lightning.pytorch`` Strategy, a ``pytorch_lightning`` module is no ``lightning.pytorch.LightningModule``. psbench
never imports a namespace to ask whether an object belongs to it: an object whose class comes from a namespace
was made after that namespace was imported, so :func:`is_instance` looks only at those in ``sys.modules``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

#: the two names of Lightning's PyTorch package, the standalone one first
NAMES = ("pytorch_lightning", "lightning.pytorch")
#: each namespace's Fabric (its ``move_data_to_device``, its accelerators' base)
FABRIC = {"pytorch_lightning": "lightning_fabric", "lightning.pytorch": "lightning.fabric"}


def get(name: str, dotted: str) -> Any:
    """``<name>.<dotted>`` (``get("lightning.pytorch", "strategies.Strategy")``), imported."""
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(f"{name}.{module}" if module else name), attr)


def of(obj: object) -> str | None:
    """The namespace ``obj``'s class (or ``obj``, a class) derives from Lightning through, or None: the first class of
    its MRO defined in ``pytorch_lightning``, ``lightning_fabric``, ``lightning.pytorch`` or ``lightning.fabric``."""
    cls = obj if isinstance(obj, type) else type(obj)
    for c in cls.__mro__:
        mod = c.__module__ or ""
        for name, fabric in FABRIC.items():
            if any(mod == p or mod.startswith(p + ".") for p in (name, fabric)):
                return name
    return None


def classes(dotted: str) -> tuple[type, ...]:
    """``dotted`` (``"LightningDataModule"``, ``"loggers.MLFlowLogger"``) of every namespace already imported."""
    return tuple(get(name, dotted) for name in NAMES if name in sys.modules)


def is_instance(obj: object, dotted: str) -> bool:
    """``isinstance(obj, <namespace>.<dotted>)`` for either namespace."""
    return isinstance(obj, classes(dotted))


def version(name: str) -> str:
    """``name``'s version, as its package says (``pytorch-lightning 2.6.6`` / ``lightning 2.6.6``)."""
    top = name.split(".")[0]
    dist = "pytorch-lightning" if top == "pytorch_lightning" else top
    return f"{dist} {importlib.import_module(top).__version__}"
