"""Where psbench reads and writes: the OmegaConf resolvers ``conf/`` uses for its paths.

``paths.root_dir`` is ``$PSBENCH_ROOT``, else the launch directory; ``paths.data_dir`` is ``$PSBENCH_DATA``, else
``shared/datasets`` beside the git work tree psbench runs in (the offline copies), else ``<root>/data`` (an empty
variable is an unset one, :func:`env_or`); ``hydra.run.dir`` is the run dir a ``resume=<dir>`` names, else a new
dated dir. :func:`register_resolvers` registers them (the CLI does on import; code that composes ``conf/`` with Hydra's
compose API imports :mod:`psbench.cli` or calls it).
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import OmegaConf


def shared_datasets(start: Path) -> Path | None:
    """``shared/datasets`` beside the git work tree that holds ``start``, if that folder exists."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            found = folder.parent / "shared" / "datasets"
            return found if found.is_dir() else None
    return None


def default_data_dir(root_dir: str) -> str:
    """``paths.data_dir`` unless ``$PSBENCH_DATA`` is set: the offline copies in ``shared/datasets``
    beside the repository of the current directory, else beside the checkout that holds this
    package (an editable install), else ``<root>/data``."""
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        found = shared_datasets(start)
        if found is not None:
            return str(found)
    return str(Path(root_dir) / "data")


def env_or(name: str, default: str) -> str:
    """``$name``, else ``default``: unset, empty and blank are the same (``PSBENCH_ROOT=''`` used to be the root
    ``''``, which put ``outputs/`` at the file system's root)."""
    value = os.environ.get(name, "")
    return value if value.strip() else default


def run_dir(resume: str | None, default: str) -> str:
    """``hydra.run.dir``: the run dir named by ``resume=<dir>``, else ``default`` (a new dated dir)."""
    return default if resume in (None, "", "auto") else str(Path(resume).expanduser().absolute())


def register_resolvers() -> None:
    """Register the OmegaConf resolvers ``conf/`` uses (idempotent).

    Runs on import of this module; code that composes ``conf/`` with Hydra's compose API
    must import :mod:`psbench.cli` first.
    """
    if not OmegaConf.has_resolver("psbench_env"):
        OmegaConf.register_new_resolver("psbench_env", env_or)
    if not OmegaConf.has_resolver("psbench_default_data_dir"):
        OmegaConf.register_new_resolver("psbench_default_data_dir", default_data_dir)
    if not OmegaConf.has_resolver("psbench_run_dir"):
        OmegaConf.register_new_resolver("psbench_run_dir", run_dir)
    if not OmegaConf.has_resolver("psbench_artifact_location"):
        from psbench.tracking.options import default_artifact_location

        OmegaConf.register_new_resolver("psbench_artifact_location", default_artifact_location)
