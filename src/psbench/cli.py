"""The ``psbench`` command: compose a config with Hydra, run its job(s), say what went wrong in one line.

One run::

    psbench protocol=softsync protocol.n=4 learners=30 batch_size=4

composes ``psbench/conf/`` (shipped with the package: an editable and a regular install compose the same config)
and runs the job (:func:`psbench.job.execute`: check, build, MLflow run, engine, ``summary.json``). The task
function returns the test error, which a Hydra sweeper (Optuna) minimizes.

Bad input — a :class:`~psbench.errors.ConfigError` or :class:`~psbench.errors.DataError`, a Hydra composition
error such as an unknown group option, or an output dir that cannot be written — ends with one line
``psbench: error: …`` on stderr and exit code 2 (:mod:`psbench.console`), before any MLflow run exists. A handled
failure of the run (:class:`~psbench.errors.RunFailure`: a learner died, learners did not join) is one line too,
exit 1. ``HYDRA_FULL_ERROR=1`` shows the traceback instead. SIGINT, SIGTERM and SIGHUP (:mod:`psbench.lifecycle`)
end the run KILLED, exit 130 / 143 / 129; in a multirun no further job starts.

A multirun (``-m``) gets an MLflow parent run whose children are its jobs (:mod:`psbench.hydra_callback`,
:mod:`psbench.tracking.sweep`). In a plain grid, a job with bad input prints its line and records its failure
(``summary.json`` status ``failed``) and the grid goes on; at the end one line counts the failed jobs and the exit
code is 1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, cast

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from psbench import console, lifecycle
from psbench.conf import CONF_DIR
from psbench.errors import ConfigError, DataError, RunFailure
from psbench.job import execute
from psbench.paths import default_data_dir, register_resolvers, shared_datasets
from psbench.summary import COMPLETED, RunSummary

register_resolvers()

__all__ = ["CONF_DIR", "default_data_dir", "execute", "main", "shared_datasets"]


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    if not lifecycle.started_as_worker():  # one run, a job in the sweep's own process, submitit's, Ray's
        return _job(cfg)
    from psbench.tracking import sweep

    lifecycle.on_orphaned_sweep(sweep.end_orphaned_parent)
    try:
        hc = HydraConfig.get()  # a joblib worker's job (hydra_plugins.psbench_launchers.joblib_launcher)
        with lifecycle.worker_job(hc.job.num, hc.runtime.output_dir, hc.sweep.dir):
            return _job(cfg)
    except lifecycle.Killed as k:  # its record is written; the launcher's other jobs go on
        done = _finished(HydraConfig.get().runtime.output_dir)
        if done is not None:  # the signal came as the job ended: it finished, and says so
            return None if done.test_error is None else float(done.test_error)
        if sweep.in_basic_sweep():
            return None  # the grid's ledger reads summary.json (killed); the sweep's own signal ends the sweep
        raise lifecycle.JobKilled(lifecycle.describe(k), k.signum) from None


def _finished(run_dir: str) -> RunSummary | None:
    """The job's ``summary.json`` if it says the job finished (or diverged), else None."""
    try:
        done = RunSummary.read(Path(run_dir) / "summary.json")
    except (OSError, ValueError, TypeError):
        return None
    return done if done.status in COMPLETED else None


def _job(cfg: DictConfig) -> float | None:
    try:
        return execute(cfg)
    except (ConfigError, DataError, OmegaConfBaseException) as err:
        from psbench.tracking import sweep

        if sweep.in_worker() and not sweep.in_basic_sweep():  # the launcher hands the error to the sweeper
            print(f"psbench: error: {console.error_message(err)}", file=sys.stderr, flush=True)
            raise err if isinstance(err, ConfigError | DataError) else ValueError(console.error_message(err)) from None
        if not sweep.in_basic_sweep() or console.settings.show_traceback:
            console.report(err)  # exiting from inside the job keeps Hydra from adding its own report lines
        print(f"psbench: error: {console.error_message(err)}", file=sys.stderr, flush=True)
        from psbench.run_dir import RunDirTaken

        if isinstance(err, RunDirTaken):  # the job dir is another run's: nothing is written there
            sweep.record_refusal(console.error_message(err))
        else:
            sweep.fail_job(console.error_message(err))  # the grid goes on, as after a diverged run; counted at its end
        return None
    except RunFailure as err:
        if HydraConfig.get().mode != RunMode.MULTIRUN:  # in a sweep the other jobs go on; main() reports it
            console.run_failure(err)
        raise


def _run_dir_or_cwd() -> str:
    """The run (or sweep) dir Hydra was making, for a line about it; else the working directory."""
    from omegaconf import OmegaConf

    cfg = HydraConfig.instance().cfg
    for key in ("hydra.runtime.output_dir", "hydra.run.dir", "hydra.sweep.dir"):
        try:
            found = OmegaConf.select(cast(Any, cfg), key, default=None) if cfg is not None else None
        except OmegaConfBaseException:
            found = None
        if found:
            return str(found)
    return os.getcwd()


def check_launcher(overrides: list[str]) -> None:
    """``hydra/launcher=<name>`` whose Hydra plugin is not installed: one line naming the extra, exit 2."""
    from hydra.core.plugins import Plugins

    from psbench import launchers

    launchers.check(overrides)
    Plugins.instance()  # the plugin scan (Hydra's first step anyway), then psbench's launcher configs over the plugins'
    launchers.register_configs()


def main() -> None:
    """Console entry point (``psbench``).

    Hydra's own error report is several lines ending in a hint about HYDRA_FULL_ERROR; to
    print one line instead, its composition errors are let through to here
    (HYDRA_FULL_ERROR is set for the duration of the call) and passed to :func:`psbench.console.report`.
    When the user set HYDRA_FULL_ERROR=1 the traceback is shown as usual.
    """
    console.settings.show_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    import logging

    logging.raiseExceptions = False  # a log file on a full disk: no "--- Logging error ---" traceback on stderr
    from psbench.tracking import sweep

    lifecycle.install()
    try:
        check_launcher(sys.argv[1:])
        with sweep.closing_parent():  # a sweep cut short: its parent run says why
            _hydra_main()
        lifecycle.release()  # --help, --cfg: a signal held since start-up still ends the process as a signal
    except lifecycle.Killed as k:
        if not k.reported:
            print(f"psbench: {k.reason}", file=sys.stderr, flush=True)
        sys.exit(k.exit_code)
    except RunFailure as err:
        console.run_failure(err)
    except (ConfigError, DataError, HydraException, OmegaConfBaseException, YAMLError) as err:
        console.report(err)  # a YAML syntax error in a config file: its file:line (console.yaml_error_line)
    except OSError as err:  # Hydra writing the run dir's .hydra/ on a full disk: one line, exit 1
        from psbench.files import DiskFull, disk_full, disk_full_line

        if not disk_full(err):
            raise
        console.run_failure(DiskFull(disk_full_line(err, _run_dir_or_cwd())))
    finally:
        if not console.settings.show_traceback:
            os.environ.pop("HYDRA_FULL_ERROR", None)


if __name__ == "__main__":
    # ``python -m psbench.cli``: run the canonical module, not this __main__ copy (one Hydra task function)
    from psbench.cli import main as canonical_main

    canonical_main()
