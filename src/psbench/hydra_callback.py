"""The Hydra callback of ``conf/hydra/default.yaml``: checks before Hydra touches a dir, and a sweep's MLflow parent.

Hydra would fail with a traceback while creating an unwritable run/sweep dir; checking here first turns that into
one line naming ``hydra.run.dir``. Hydra swallows exceptions a callback raises (it only warns), so the checks exit
through :func:`psbench.console.report` themselves. Around a multirun the callback begins and ends the sweep's
MLflow parent run and job ledger (:mod:`psbench.tracking.sweep`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from psbench import console, lifecycle
from psbench.errors import ConfigError
from psbench.validate import check_writable_dir

EXIT_JOBS_FAILED = 1


def _resolved(config: DictConfig, run_dir: Path) -> dict[str, Any] | None:
    """The job's config as :func:`psbench.job.execute` will resolve it in ``run_dir`` (None: it does not resolve;
    the job then says why)."""
    import copy

    from omegaconf import open_dict, read_write

    cfg = copy.deepcopy(config)
    with read_write(cfg.hydra.runtime), open_dict(cfg.hydra.runtime):
        cfg.hydra.runtime.output_dir = str(run_dir.absolute())
    hc = HydraConfig.instance()
    try:
        hc.set_config(cfg)
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]  # what the task function gets (run_job drops it too)
        out = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:
        return None
    finally:
        hc.set_config(config)
    return {str(k): v for k, v in out.items()} if isinstance(out, dict) else None


class OutputDirCheck(Callback):
    """Refuse an unwritable run/sweep dir or a ``resume`` that names no run (one line, exit 2); around a multirun,
    begin (the MLflow store and experiment once, so parallel jobs do not race on first creation; the parent run)
    and end the sweep (the parent's status and, if jobs failed, one line counting them, exit 1)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        # run_job does this first thing too; the dir's interpolations need ${hydra:...}
        HydraConfig.instance().set_config(config)
        resume = config.get("resume")
        if resume not in (None, "auto"):  # resume=<run dir> is the run dir: it must hold a run to resume
            from psbench.run_dir import CHECKPOINT_FILE

            d = Path(str(resume))
            if not ((d / CHECKPOINT_FILE).is_file() or (d / "summary.json").is_file()):
                console.report(ConfigError("resume", resume, f"null, auto, or a run dir holding {CHECKPOINT_FILE}"))
        self._check("hydra.run.dir", config)
        self._own("hydra.run.dir", config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        HydraConfig.instance().set_config(config)
        resume = config.get("resume")
        if resume not in (None, "auto"):
            console.report(ConfigError("resume", resume, "null or auto in a sweep (-m): each job resumes its own dir"))
        self._check("hydra.sweep.dir", config)
        from psbench.tracking import sweep

        if not sweep.defers_parent(config):  # the psbench_optuna sweeper owns its dir once it is final (open_parent)
            self._own("hydra.sweep.dir", config)
        try:
            sweep.begin(config)  # the store, and the parent run of the jobs with their ledger
        except ConfigError as err:
            console.report(err)
        lifecycle.release()  # a signal held since start-up ends the sweep now (its parent KILLED, if it has one)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            from psbench.tracking import sweep

            sweep.record_job(config, job_return)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from psbench.tracking import sweep

        line = sweep.end_sweep(config)
        if line:  # the sweep went on past its failed jobs; its exit status says they failed
            print(f"psbench: {line}", file=sys.stderr, flush=True)
            sys.exit(EXIT_JOBS_FAILED)

    @staticmethod
    def _own(key: str, config: DictConfig) -> None:
        """The run or sweep dir is this process's (:func:`psbench.run_dir.hold`), and it holds no earlier run that
        this one would overwrite (:func:`psbench.run_dir.reuse_refusal`; a sweep: none in its job dirs), before
        Hydra writes its ``.hydra/`` and log there."""
        from psbench import run_dir as rd

        folder = Path(str(OmegaConf.select(config, key, throw_on_missing=True)))
        resume, overwrite = config.get("resume"), bool(config.get("overwrite"))
        err: ConfigError | None
        try:  # Hydra swallows what a callback raises: every refusal goes through console.report
            rd.hold(key, folder)
            if key == "hydra.sweep.dir":
                err = rd.sweep_refusal(key, folder, resume, overwrite)
            else:
                again = resume == "auto" and not overwrite and rd.held_run(folder) is not None
                err = rd.reuse_refusal(key, folder, resume, overwrite, _resolved(config, folder) if again else None)
        except ConfigError as exc:
            err = exc
        except (OSError, OmegaConfBaseException) as exc:
            err = ConfigError(key, str(folder), f"a directory psbench can lock and read ({exc})")
        if err is not None:
            console.report(err)

    @staticmethod
    def _check(key: str, config: DictConfig) -> None:
        try:
            check_writable_dir(key, OmegaConf.select(config, key, throw_on_missing=True))
        except (ConfigError, OmegaConfBaseException) as err:
            console.report(err)
