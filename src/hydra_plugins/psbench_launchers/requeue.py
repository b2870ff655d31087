"""A pre-empted or timed-out submitit job (SLURM, or the local executor) is requeued and resumes.

On the signal SLURM sends before a time limit or a pre-emption (``--signal``, USR2), submitit calls the
launcher's ``checkpoint()`` and requeues what it returns. Hydra's launcher returns the same job; these
return it with ``resume=auto``, so the requeued job continues from the ``checkpoint.pt`` its run dir
holds (written every ``trainer.checkpoint_every`` PS updates) in the same MLflow run, instead of
starting over. The run is KILLED in between (tag ``failure_reason``), as after SIGTERM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

try:
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher
except ImportError:  # no cluster extra: no submitit launchers (psbench.launchers.check says which extra)
    submitit_launcher = None

#: set in the job's process when submitit requeues it: the run ends KILLED, not FAILED
requeued: list[str] = []


def resuming(overrides: Sequence[str]) -> list[str]:
    """The job's overrides with ``resume=auto`` (replacing a ``resume=`` it had)."""
    return [*(o for o in overrides if not o.lstrip("+").startswith("resume=")), "resume=auto"]


class _Resume:
    def checkpoint(self, sweep_overrides: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        import submitit

        requeued.append("pre-empted or timed out: requeued, resumes from its checkpoint")
        launcher = cast(Callable[..., Any], self)  # a launcher: the class this mixes into is callable
        return submitit.helpers.DelayedSubmission(launcher, resuming(sweep_overrides), *args, **kwargs)


if submitit_launcher is not None:

    class SlurmLauncher(_Resume, submitit_launcher.SlurmLauncher):
        """``hydra/launcher=submitit_slurm``: Hydra's, with a requeued job resuming."""

    class LocalLauncher(_Resume, submitit_launcher.LocalLauncher):
        """``hydra/launcher=submitit_local``: Hydra's, with a requeued job resuming."""
