"""The network of a ``model`` config node — one function for the run (:mod:`psbench.assemble`) and for every
``engine=dist`` learner (:mod:`psbench.distributed.learner`), so both hold the same network.

A node with ``_target_`` (a user's network, in psbench's ``conf/model/`` or the user's ``--config-dir``) is built
by Hydra's ``instantiate`` (:func:`psbench.target.build`) with its keys, and ``input_shape``, ``num_classes`` and
``output_size`` where the target's signature names them (``num_classes`` = ``output_size`` = the model's output
width: the classes, or a regression's targets k). A built-in is built by its ``name``
(:func:`psbench.models.build_model`). The built-in classes take the same arguments, so they are targets too:
``_target_: psbench.models.CifarCNN`` builds, seed for seed, the network ``model=cifar_cnn`` builds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from psbench.errors import ConfigError, require
from psbench.target import is_target

#: psbench's keys of a model node (never the network's arguments)
OWN_KEYS = ("name", "loss")


def build_net(node: Mapping[str, Any], input_shape: Sequence[int], output_size: int) -> torch.nn.Module:
    """The network of ``node`` for inputs ``input_shape`` and ``output_size`` outputs (see the module doc)."""
    shape = tuple(int(s) for s in input_shape)
    if is_target(node):
        from psbench import target

        offered = {"input_shape": shape, "num_classes": int(output_size), "output_size": int(output_size)}
        net = target.build("model._target_", node, OWN_KEYS, offered, what="a callable returning a torch.nn.Module")
        require(
            isinstance(net, torch.nn.Module),
            "model._target_",
            node["_target_"],
            f"a callable returning a torch.nn.Module (it returned {type(net).__name__})",
        )
        return net
    from psbench.models import build_model

    return build_model(node["name"], shape, int(output_size), **{k: v for k, v in node.items() if k not in OWN_KEYS})


def check_net(
    node: Mapping[str, Any], net: torch.nn.Module, schedule_only: bool, engine: str, protocol: Mapping[str, Any]
) -> None:
    """A ``_target_`` network with BatchNorm trains where :func:`~psbench.models.options.batchnorm_refusal` allows it
    (always with ``schedule_only``); else one line naming ``model._target_``."""
    if not is_target(node) or schedule_only:
        return
    from psbench.models.options import batchnorm_refusal

    bn = [name for name, m in net.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    why = batchnorm_refusal(engine, protocol) if bn else None
    if why is not None:
        raise ConfigError(
            "model._target_",
            node["_target_"],
            f"a network without BatchNorm, or {why}: it has {len(bn)} BatchNorm layers, e.g. {bn[0]}",
        )
