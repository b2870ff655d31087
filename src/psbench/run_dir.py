"""A run's or a sweep's directory: no run overwrites another, and one psbench at a time works in it.

Hydra writes a job's ``.hydra/`` and its log into the run dir before the job starts, and the job then replaces
``summary.json``, ``weights.pt``, the checkpoint, the plots: a reused ``hydra.run.dir`` (or a sweep dir run again)
silently replaced an earlier run's files while MLflow kept both runs. So, before Hydra touches the dir
(:class:`psbench.hydra_callback.OutputDirCheck`) and again in the job (:func:`psbench.job.execute`):

* :func:`held_run` says which run a dir holds — a ``checkpoint.pt``, or a ``summary.json`` of a run (any status
  but ``failed`` with no MLflow run, which is bad input refused before anything ran);
* :func:`reuse_refusal` refuses such a dir unless ``resume=auto`` finds the same config there (it then resumes
  the run or reports it done), ``resume=<dir>`` names it, or ``overwrite=true`` says to replace it
  (:func:`clear` removes the earlier run's files psbench wrote; MLflow keeps its run);
* :func:`hold` locks the dir (``flock`` on the directory itself) for as long as this process runs: a second psbench
  on the same run or sweep dir is refused in one line while the first runs (two copies of one sweep trained the
  same job dirs and contradicted each other's records).

Torch-free.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psbench.errors import ConfigError
from psbench.tracking.run_info import leaves

#: Keys that may differ between a run and its resume: they do not change what the run computes.
RESUME_FREE_KEYS = (
    "resume",
    "overwrite",
    "trainer.checkpoint_every",
    "trainer.stop_after_updates",
    "trainer.progress",
    "trainer.save_weights",
    "trainer.updates_per_step",
    "trainer.timeline_updates",
    "paths.output_dir",
    "paths.data_dir",
)
CHECKPOINT_FILE = "checkpoint.pt"
SUMMARY_FILE = "summary.json"
CONFIG_FILE = "resolved_config.yaml"
#: what a psbench job writes in its run dir (``overwrite=true`` removes an earlier run's before the new run starts)
OUTPUTS = (
    SUMMARY_FILE,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    "weights.pt",
    "schedule.npz",
    "staleness_hist.png",
    "timeline.png",
    "dist_pids.json",
    "learner_data.pt",
)


class RunDirTaken(ConfigError):
    """The dir holds another run: refused, and nothing is written there (not even this job's ``summary.json``)."""


def config_diff(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``key (saved → current)`` for every key that differs, except :data:`RESUME_FREE_KEYS`, ``tags.*`` and
    ``resources.*``.

    Tags label a run (a sweep's retried trial carries its new trial number) and resources say what a cluster
    launcher gave its job (a requeue may ask for more), without changing what it computes.
    """
    a, b = leaves(saved), leaves(current)
    keys = sorted(
        k
        for k in a.keys() | b.keys()
        if k not in RESUME_FREE_KEYS
        and not k.startswith(("tags.", "resources."))
        and a.get(k, "<unset>") != b.get(k, "<unset>")
    )
    return [f"{k} ({a.get(k, '<unset>')!r} → {b.get(k, '<unset>')!r})" for k in keys]


def held_run(run_dir: str | os.PathLike[str]) -> str | None:
    """The run ``run_dir`` holds, in words (``a finished run (…/summary.json, MLflow run 3bbe…)``), or None."""
    d = Path(run_dir)
    if (d / CHECKPOINT_FILE).is_file():
        return f"a stopped run's checkpoint ({d / CHECKPOINT_FILE})"
    summary = d / SUMMARY_FILE
    if not summary.is_file():
        return None
    try:
        data = json.loads(summary.read_text())
    except (OSError, ValueError):
        return f"a run's summary.json that cannot be read ({summary})"
    if not isinstance(data, dict):
        return f"a run's summary.json that cannot be read ({summary})"
    status, run_id = data.get("status"), data.get("mlflow_run_id")
    if status == "failed" and not run_id:
        return None  # bad input, refused before anything ran: nothing of it to lose
    if status == "killed" and not run_id and not data.get("updates_done"):
        return None  # killed before training (a sweep's queued job at a session's end): nothing of it to lose
    return f"a {status} run ({summary}{f', MLflow run {run_id}' if run_id else ''})"


def saved_config(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The resolved config of the run ``run_dir`` holds (``resolved_config.yaml``), or None."""
    import yaml

    try:
        saved = yaml.safe_load((Path(run_dir) / CONFIG_FILE).read_text())
    except (OSError, yaml.YAMLError):
        return None
    return saved if isinstance(saved, dict) else None


def reuse_refusal(
    key: str,
    run_dir: str | os.PathLike[str],
    resume: Any,
    overwrite: bool,
    resolved: Mapping[str, Any] | None,
) -> RunDirTaken | None:
    """Why this job may not run in ``run_dir`` (named by ``key``), or None.

    A dir that holds a run (:func:`held_run`) is refused unless ``overwrite``, ``resume`` names a run dir, or
    ``resume=auto`` finds the same config there (``resolved``: this job's resolved config; None: not known yet,
    only the dir is checked)."""
    if overwrite or resume not in (None, "auto"):
        return None
    held = held_run(run_dir)
    if held is None:
        return None
    if resume is None:
        return RunDirTaken(
            key,
            str(run_dir),
            f"a directory that holds no run, or resume=auto (continue it, or report it done, if the config is the "
            f"same) or overwrite=true (replace it): it holds {held}",
        )
    if resolved is None:
        return None
    saved = saved_config(run_dir)
    diff = ["the saved config (resolved_config.yaml is missing)"] if saved is None else config_diff(saved, resolved)
    if not diff:
        return None
    return RunDirTaken(
        "resume",
        resume,
        f"a run dir whose config matches this one, or overwrite=true (replace the run): {run_dir} holds {held}; "
        f"differing keys: {', '.join(diff)}",
    )


def sweep_refusal(key: str, sweep_dir: str | os.PathLike[str], resume: Any, overwrite: bool) -> RunDirTaken | None:
    """Why a sweep (``-m``) may not run in ``sweep_dir`` (named by ``key``), or None: its job dirs hold runs of an
    earlier sweep and neither ``resume=auto`` (each job then checks its own dir: :func:`reuse_refusal`) nor
    ``overwrite`` was given."""
    if overwrite or resume == "auto":
        return None
    d = Path(sweep_dir)
    if not d.is_dir():
        return None
    found = sorted({p.parent for name in (SUMMARY_FILE, CHECKPOINT_FILE) for p in d.rglob(name)} - {d})
    held = [(sub, h) for sub in found if (h := held_run(sub)) is not None]
    if not held:
        return None
    return RunDirTaken(
        key,
        str(sweep_dir),
        f"a directory that holds no earlier sweep's runs, or resume=auto (each job continues its run, or reports "
        f"it done, if its config is the same) or overwrite=true (replace them): it holds {len(held)} "
        f"(e.g. {held[0][0].name}/: {held[0][1]})",
    )


def clear(run_dir: str | os.PathLike[str]) -> list[str]:
    """``overwrite=true``: remove the earlier run's files psbench wrote in ``run_dir`` (:data:`OUTPUTS`, and the
    ``.tmp`` files of an interrupted write); return their names. Other files stay."""
    d = Path(run_dir)
    gone = []
    for name in OUTPUTS:
        for p in (d / name, d / f"{name}.tmp"):
            if p.is_file() or p.is_symlink():
                with contextlib.suppress(OSError):
                    p.unlink()
                    gone.append(p.name)
    return gone


_held: dict[str, int] = {}  # dir -> the fd this process holds its lock on


def hold(key: str, folder: str | os.PathLike[str]) -> None:
    """Lock ``folder`` (a run or sweep dir, created if missing) for this process; :class:`ConfigError` naming
    ``key`` if another process holds it. Released when the process ends (or by :func:`release`). A file system
    without ``flock`` (some network file systems) is not locked."""
    path = str(Path(folder).resolve())
    if path in _held:
        return
    Path(path).mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(
            key,
            str(folder),
            "a directory no other psbench is working in: another psbench process is running in it now "
            "(wait for it to end, or choose another directory)",
        ) from None
    except OSError:  # no flock here: unlocked, as before
        os.close(fd)
        return
    _held[path] = fd


def release(folder: str | os.PathLike[str] | None = None) -> None:
    """Release the lock on ``folder`` (None: every lock this process holds)."""
    paths = list(_held) if folder is None else [str(Path(folder).resolve())]
    for p in paths:
        fd = _held.pop(p, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
