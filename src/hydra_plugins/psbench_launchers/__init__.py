"""Hydra's plugin scan imports this: psbench's launcher configs (see :mod:`psbench.launchers`)."""

from psbench.launchers import register_configs

register_configs()
