"""Checkpoint and resume of a simulated run (``engine=sim``): one file, ``checkpoint.pt``, in the run dir.

A checkpoint is taken at an update boundary i — updates 0…i−1 applied, the evaluation after update i−1
done, update i not started — every ``trainer.checkpoint_every`` updates and when a stop is requested
(``trainer.stop_after_updates``, or :meth:`Checkpointer.request_stop`, e.g. from a signal handler).
It holds everything the rest of the run depends on:

* the weights, the optimizer (momentum / AdaGrad / Adam buffers) and lr-schedule state;
* the strategy: weight snapshots that pending gradients still read, per-learner codec state (error
  feedback, generators), local-step learners (models, optimizers, captured windows), counters and the
  recent-loss window;
* every RNG stream (torch, numpy, python; per-learner generators live in the codec state);
* the resolved config, the schedule's hash and the MLflow run id.

The schedule and the sample stream are deterministic functions of the config (the stream's position
is the update index), so they are recomputed and checked, not stored. The file holds tensors and plain data only
(numpy arrays are stored as tensors): it is read with ``torch.load(weights_only=True)``, so a ``checkpoint.pt``
that someone else placed in a run dir on a shared file system cannot run code when ``resume=`` reads it.
Resuming rebuilds the run from the config, loads this state, and continues the Trainer at update i with
Lightning's counters (global step, logging step, evaluation cadence) set to where they were: the result equals
the uninterrupted run's bit for bit. The file is written atomically (``.tmp`` then rename); only the last one is kept.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytorch_lightning as pl
import torch

from psbench import lightning_seams as seams
from psbench.optimizer.build import load_optimizer_state

# the keys that may differ between a run and its resume and the diff that names the others live in the torch-free
# psbench.run_dir (the run-dir check before Hydra writes the dir uses them too)
from psbench.run_dir import CHECKPOINT_FILE as CHECKPOINT_FILE
from psbench.run_dir import RESUME_FREE_KEYS as RESUME_FREE_KEYS
from psbench.run_dir import config_diff as config_diff

FORMAT = 1


class RunStopped(Exception):
    """Raised at an update boundary after a checkpoint was written for a requested stop."""

    def __init__(self, update: int, reason: str, path: Path) -> None:
        super().__init__(f"stopped after {update} updates ({reason}); checkpoint {path}")
        self.update, self.reason, self.path = update, reason, path


_NUMPY = "__numpy__"  # an array stored as a tensor: {_NUMPY: tensor}


def _plain(x: Any) -> Any:
    """``x`` with every numpy array as a tensor and every numpy scalar as a Python number (what
    ``torch.load(weights_only=True)`` reads without unpickling a global)."""
    if isinstance(x, np.ndarray):
        return {_NUMPY: torch.from_numpy(np.array(x, copy=True))}
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return x


def _numpy(x: Any) -> Any:
    """Undo :func:`_plain`'s arrays."""
    if isinstance(x, dict):
        if set(x) == {_NUMPY}:
            return x[_NUMPY].numpy()
        return {k: _numpy(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_numpy(v) for v in x)
    return x


def save(path: Path, state: Mapping[str, Any]) -> float:
    """Write ``state`` atomically (tmp + rename, no ``.tmp`` left by a failed write) as tensors and plain data;
    return the seconds it took. A full disk is :class:`psbench.files.DiskFull` naming the file."""
    from psbench.files import torch_save

    t0 = time.perf_counter()
    torch_save(_plain(dict(state)), path)
    return time.perf_counter() - t0


def load(path: Path) -> dict[str, Any]:
    """A checkpoint written by :func:`save`, read without running code (``weights_only=True``): a file that
    holds anything but tensors and plain data raises ``pickle.UnpicklingError`` naming what it holds."""
    return _numpy(torch.load(path, map_location="cpu", weights_only=True))


def _load_error(e: Exception) -> str:
    """What is wrong with a checkpoint file, in a few words (torch's weights-only message is a page long)."""
    text = str(e)
    found = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) ([\w.]+)", text)
    if found:
        return f"it holds {found.group(1)}, which a psbench checkpoint never holds (a pickle that runs code)"
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:300]


def rng_state() -> dict[str, Any]:
    """The RNG streams a resumed run continues: torch's CPU generator, numpy's, python's, and each CUDA device's
    where the run has used CUDA (dropout on a GPU draws from those; an unused CUDA is not initialised for this)."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(s: Mapping[str, Any]) -> None:
    """Set the streams of :func:`rng_state`; the CUDA ones where this process has as many CUDA devices (a checkpoint
    of a GPU run resumed on the CPU, or on another device count, draws other dropout masks there)."""
    torch.set_rng_state(s["torch"])
    np.random.set_state(s["numpy"])
    random.setstate(s["python"])
    cuda = s.get("cuda")
    if cuda is not None and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all(cuda)


@dataclass
class Plan:
    """What a run checkpoints and where; ``state`` is the loaded checkpoint of a resumed run."""

    path: Path
    every: int = 0  # updates between checkpoints (0: none)
    stop_after: int | None = None  # stop (with a checkpoint) once this many updates are done
    meta: dict[str, Any] = field(default_factory=dict)  # config, mlflow_run_id: stored as they are
    state: dict[str, Any] | None = None

    @property
    def start(self) -> int:
        return int(self.state["update"]) if self.state else 0

    def prior(self, key: str) -> float:
        """Time already spent before the resume (``fit_time_s``, ``wall_time_s``)."""
        return float((self.state or {}).get("elapsed", {}).get(key, 0.0))


_active: list[Checkpointer] = []  # the fit running in this process, for request_stop()


def request_stop(reason: str) -> bool:
    """Ask the running fit to write a checkpoint and stop at the next update boundary (e.g. from a signal handler).

    The fit then raises :class:`RunStopped` with ``reason``; returns False when no fit is running (nothing to save).
    """
    for c in _active:
        c.request_stop(reason)
    return bool(_active)


class Checkpointer(pl.Callback):
    """Writes :class:`Plan`'s checkpoints at update boundaries and restores a resumed run's state.

    Restoring happens in ``on_train_start`` (optimizer, schedulers, strategy, loop counters) and, for the
    RNG streams, at the first update's ``on_train_batch_start`` — the same point where they were saved.
    """

    def __init__(self, plan: Plan, schedule_sha256: str, t_wall0: float) -> None:
        self.plan, self.sha, self.t_wall0 = plan, schedule_sha256, t_wall0
        self._stop: str | None = None
        self._rng: Mapping[str, Any] | None = None
        self._t_fit0 = time.perf_counter()
        self.saves: list[tuple[int, float, int]] = []  # (update, seconds, bytes) of each checkpoint written

    def request_stop(self, reason: str) -> None:
        """Stop at the next update boundary, after writing a checkpoint (raises :class:`RunStopped` there)."""
        self._stop = reason

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t_fit0 = time.perf_counter()
        _active[:] = [self]
        s = self.plan.state
        if s is None:
            return
        cast(torch.nn.Module, pl_module.net).load_state_dict(s["weights"])
        load_optimizer_state(trainer.optimizers[0], s["optimizer"])
        for cfg, sd in zip(trainer.lr_scheduler_configs, s["schedulers"], strict=True):
            cfg.scheduler.load_state_dict(sd)
        cast(Any, trainer.strategy).load_ps_state(s["strategy"])  # psbench's ParameterServerStrategy
        seams.resume_step_counters(trainer, int(s["update"]))  # global_step, the logging step, the lr schedules'
        self._rng = s["rng"]

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._rng is not None:
            set_rng_state(self._rng)
            self._rng = None
        self.on_ps_update_start(trainer, int(batch.index))

    def on_ps_update_start(self, trainer: pl.Trainer, i: int) -> None:
        """Before update i (also between the updates of one Trainer step): the requested or periodic checkpoint. The
        updates applied so far are read back first: if one of them diverged, the run ends there, as diverged (the
        strategy stops the fit at its next update), and nothing is written."""
        stop_at = self.plan.stop_after
        if stop_at is not None and i >= stop_at and i > self.plan.start and self._stop is None:
            self._stop = f"trainer.stop_after_updates={self.plan.stop_after}"
        if self._stop is None and not (self.plan.every and i > self.plan.start and i % self.plan.every == 0):
            return
        settle = getattr(trainer.strategy, "settle", None)
        if settle is not None:  # (weights after a divergence restored)
            settle()
            if getattr(trainer.strategy, "diverged_at", None) is not None:
                return
        self.write(trainer, i)
        if self._stop is not None:
            raise RunStopped(i, self._stop, self.plan.path)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self in _active:
            _active.remove(self)

    def write(self, trainer: pl.Trainer, update: int) -> None:
        """The checkpoint before update ``update`` (the strategy has read back every update applied before it)."""
        now = time.perf_counter()
        state = {
            "format": FORMAT,
            "update": update,
            "schedule_sha256": self.sha,
            **self.plan.meta,
            "weights": cast(torch.nn.Module, trainer.lightning_module.net).state_dict(),
            "optimizer": trainer.optimizers[0].state_dict(),
            "schedulers": [c.scheduler.state_dict() for c in trainer.lr_scheduler_configs],
            "strategy": cast(Any, trainer.strategy).ps_state(),
            "rng": rng_state(),
            "elapsed": {
                "fit_time_s": self.plan.prior("fit_time_s") + now - self._t_fit0,
                "wall_time_s": self.plan.prior("wall_time_s") + now - self.t_wall0,
            },
        }
        seconds = save(self.plan.path, state)
        self.saves.append((update, seconds, self.plan.path.stat().st_size))


def resume_state(resume: str | None, run_dir: Path, resolved: Mapping[str, Any]) -> tuple[str, Any]:
    """What ``resume`` means for this run: ``("fresh", None)``, ``("resume", checkpoint)`` or ``("done", RunSummary)``.

    ``resume`` is null (always fresh), ``auto`` (resume from ``run_dir`` if it holds a checkpoint of the same
    config, report the run as done if its ``summary.json`` says it finished with the same config, else fresh)
    or a run dir (which is ``run_dir``: resume it, or refuse with :class:`~psbench.errors.ConfigError`).
    """
    from omegaconf import OmegaConf

    from psbench.errors import ConfigError
    from psbench.summary import COMPLETED, RunSummary

    if resume is None:
        return "fresh", None
    explicit = resume != "auto"
    ckpt, summary, config = run_dir / CHECKPOINT_FILE, run_dir / "summary.json", run_dir / "resolved_config.yaml"

    def mismatch(saved: Mapping[str, Any]) -> str | None:
        diff = config_diff(saved, resolved)
        return "a run dir whose config matches this one; differing keys: " + ", ".join(diff) if diff else None

    if ckpt.is_file():
        try:
            state = load(ckpt)
        except Exception as e:  # truncated, foreign, or holding code: a line, not a traceback (and nothing ran)
            raise ConfigError(
                "resume", resume, f"a run dir with a psbench {CHECKPOINT_FILE} ({ckpt}: {_load_error(e)})"
            ) from None
        why = mismatch(state.get("config") or {})
        if why is None:
            return "resume", state
        if explicit:
            raise ConfigError("resume", resume, why)
        return "fresh", None
    if summary.is_file() and config.is_file():
        done = RunSummary.read(summary)
        saved = OmegaConf.to_container(OmegaConf.load(config), resolve=True)
        if done.status in COMPLETED:
            why = mismatch(saved)  # type: ignore[arg-type]
            if why is None:
                return "done", done
            if explicit:
                raise ConfigError("resume", resume, why)
            return "fresh", None
    if explicit:
        raise ConfigError("resume", resume, f"null, auto, or a run dir holding {CHECKPOINT_FILE}")
    return "fresh", None
