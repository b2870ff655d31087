"""Hydra's launchers as psbench options: ``hydra/launcher=joblib | submitit_local | submitit_slurm | ray``.

The plugins come with the ``cluster`` extra (``pip install -e '.[cluster]'``). :func:`check` refuses a
launcher whose plugin is not installed with one line naming the extra, before anything runs (Hydra itself
would only list the launchers it has). :func:`register_configs` (run by Hydra's plugin scan, from
``hydra_plugins.psbench_launchers``) stores each installed plugin's config under its own name with the
``resources`` preset of the scale (``conf/resources/``) in its resource keys and, for submitit, the
launcher of :mod:`hydra_plugins.psbench_launchers.requeue` (a requeued job resumes from its checkpoint); for
joblib, that of :mod:`hydra_plugins.psbench_launchers.joblib_launcher` (a signal ends each job in flight KILLED).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from typing import Any

from psbench.errors import ConfigError
from psbench.schema import Group, integer

EXTRA = "cluster"
INSTALL = f"pip install -e '.[{EXTRA}]' (or pip install 'psbench[{EXTRA}]')"
#: hydra/launcher option -> (module of the Hydra plugin that provides it, its distribution)
PLUGINS: dict[str, tuple[str, str]] = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher.joblib_launcher", "hydra-joblib-launcher"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher.submitit_launcher", "hydra-submitit-launcher"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher.submitit_launcher", "hydra-submitit-launcher"),
    "ray": ("hydra_plugins.hydra_ray_launcher.ray_launcher", "hydra-ray-launcher"),
}

#: ``resources``: what one job of a sweep asks the SLURM / Ray launcher for (``conf/resources/<scale>.yaml``)
_PER_JOB = {
    "gpus": integer(0),  # GPUs per job (SLURM gpus_per_node, Ray num_gpus)
    "cpus": integer(1),  # CPU cores per job (SLURM cpus_per_task, Ray num_cpus)
    "mem_gb": integer(1),  # memory per job, GB (SLURM mem_gb)
    "timeout_min": integer(1),  # wall-clock limit per job, minutes (SLURM timeout_min; then requeued)
}
RESOURCES = Group({scale: _PER_JOB for scale in ("ci", "small", "full", "paper_jpeg", "paper")})

_OPTION = re.compile(r"^hydra/launcher=(\w+)$")


def requested(overrides: Sequence[str]) -> str | None:
    """The ``hydra/launcher`` option the command line asks for (the last one), if any."""
    found = [m.group(1) for m in map(_OPTION.match, overrides) if m]
    return found[-1] if found else None


def installed(name: str) -> bool:
    """Whether the Hydra plugin of launcher ``name`` imports (always true for an option it does not know)."""
    if name not in PLUGINS:
        return True
    try:
        importlib.import_module(PLUGINS[name][0])
    except ImportError:
        return False
    return True


def check(overrides: Sequence[str]) -> None:
    """Refuse a ``hydra/launcher=<name>`` whose plugin is not installed (:class:`ConfigError`, one line)."""
    name = requested(overrides)
    if name is None or installed(name):
        return
    have = ["basic", *(n for n in PLUGINS if n != name and installed(n))]
    raise ConfigError(
        "hydra/launcher",
        name,
        f"one of {', '.join(have)} (installed); {name} is {PLUGINS[name][1]}, in psbench's {EXTRA} extra: {INSTALL}",
    )


#: what each launcher's config takes from ``resources`` (interpolations into its own keys)
SUBMITIT = {
    "timeout_min": "${resources.timeout_min}",
    "cpus_per_task": "${resources.cpus}",
    "gpus_per_node": "${resources.gpus}",
    "mem_gb": "${resources.mem_gb}",
}
RAY = {
    "ray": {
        "init": {"num_cpus": None, "include_dashboard": False},  # num_cpus: a local instance's (null: all)
        "remote": {"num_cpus": "${resources.cpus}", "num_gpus": "${resources.gpus}"},
    }
}


def register_configs() -> None:
    """Store psbench's config of each installed launcher plugin under the plugin's own name.

    It is the plugin's config (its keys, their types) with the ``resources`` preset interpolated into
    its resource keys and, for submitit, :mod:`hydra_plugins.psbench_launchers.requeue`'s launcher. Run by
    Hydra's plugin scan (``hydra_plugins.psbench_launchers``, after the plugins' own modules) and again by
    ``psbench.cli`` once the scan is done, so the plugins' registrations never win.
    """
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    cs = ConfigStore.instance()
    try:
        from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
    except ImportError:
        pass
    else:  # a signal ends each job in flight KILLED with its record (hydra_plugins.psbench_launchers.joblib_launcher)
        target = "hydra_plugins.psbench_launchers.joblib_launcher.JoblibLauncher"
        node = OmegaConf.merge(OmegaConf.structured(JobLibLauncherConf), {"_target_": target})
        cs.store(group="hydra/launcher", name="joblib", node=node, provider="psbench")
    try:
        from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
    except ImportError:
        pass
    else:
        # SLURM: requeue after up to 3 time-outs, as the local executor does (the requeued job resumes)
        for name, conf, target, more in (
            ("submitit_slurm", SlurmQueueConf, "SlurmLauncher", {"max_num_timeout": 3}),
            ("submitit_local", LocalQueueConf, "LocalLauncher", {}),
        ):
            target = f"hydra_plugins.psbench_launchers.requeue.{target}"
            keys: dict[str, Any] = {"_target_": target, **SUBMITIT, **more}
            node = OmegaConf.merge(OmegaConf.structured(conf), keys)
            cs.store(group="hydra/launcher", name=name, node=node, provider="psbench")
    try:
        from hydra_plugins.hydra_ray_launcher._config import RayLauncherConf
    except ImportError:
        pass
    else:
        cs.store(
            group="hydra/launcher",
            name="ray",
            node=OmegaConf.merge(OmegaConf.structured(RayLauncherConf), RAY),
            provider="psbench",
        )
