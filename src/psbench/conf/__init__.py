"""psbench's Hydra config (``config.yaml`` and one folder per group), shipped with the package."""

from pathlib import Path

#: the folder Hydra composes ``psbench`` from (an editable and a regular install alike)
CONF_DIR = Path(__file__).resolve().parent
