"""The ``psbench`` command: compose a config with Hydra, validate it, train, track in MLflow.

One run::

    psbench protocol=softsync protocol.n=4 learners=30 batch_size=4

does, in order: resolve the composed config, print it as a tree and check it
(:func:`psbench.validate.validate`) before any work; save ``resolved_config.yaml`` in the
run dir; create the MLflow store/experiment (race-safe) and a RUNNING run whose params are
the flattened config; call :func:`psbench.train.train` with a Lightning ``MLFlowLogger``
attached to that run; write ``summary.json``; log it, the resolved config and the
training artifacts; mark the run FINISHED (also when training diverged: tag
``diverged=true``, exit 0, so a sweep goes on). ``resume=<run dir>|auto`` reopens the run of a
checkpoint in its own dir instead of starting one (:mod:`psbench.checkpoint`); a requested stop
(``trainer.stop_after_updates``) ends the run KILLED with its checkpoint kept. The task function returns the test error,
which is what a Hydra sweeper (Optuna) minimizes.

Bad input — a :class:`~psbench.errors.ConfigError` or :class:`~psbench.errors.DataError`,
a Hydra composition error such as an unknown group option, or an output dir that cannot
be written — ends with one line ``psbench: error: …`` on stderr and exit code 2; a run
already started in MLflow is marked FAILED. A handled failure of the run
(:class:`~psbench.errors.RunFailure`: a learner died, learners did not join) is one line too,
exit 1, the run FAILED with tag ``failure_reason``. ``HYDRA_FULL_ERROR=1`` shows the traceback
instead. Any other exception marks the run FAILED (with ``failure_reason``) and propagates.

SIGINT, SIGTERM and SIGHUP (:mod:`psbench.lifecycle`) end the run KILLED at the next PS update boundary:
``summary.json`` with ``status: killed`` and what was done, tag ``failure_reason``, one line on
stderr, exit 130 / 143 / 129; in a multirun no further job starts.

A multirun (``-m``) gets an MLflow parent run whose children are its jobs
(:mod:`psbench.tracking.sweep`). In a plain grid, a job with bad input prints its line and
records its failure (``summary.json`` status ``failed``) and the grid goes on; at the end one
line counts the failed jobs and the exit code is 1.

The config ships with the package, in ``psbench/conf/`` (found from this file, so an
editable and a regular ``pip install .`` compose the same config).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from psbench import lifecycle
from psbench.errors import ConfigError, DataError, RunFailure, failure_reason
from psbench.summary import RunSummary, write_json
from psbench.validate import check_writable_dir, validate

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = Path(__file__).resolve().parent / "conf"

EXIT_BAD_INPUT = 2
EXIT_JOBS_FAILED = 1
#: seconds MLflow's asynchronous logging gathers a run's per-update metrics before writing them in one batch
ASYNC_BUFFER_S = "2"

log = logging.getLogger("psbench")


# --------------------------------------------------------------------------- resolvers
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


def run_dir(resume: str | None, default: str) -> str:
    """``hydra.run.dir``: the run dir named by ``resume=<dir>``, else ``default`` (a new dated dir)."""
    return default if resume in (None, "", "auto") else str(Path(resume).expanduser().absolute())


def register_resolvers() -> None:
    """Register the OmegaConf resolvers ``conf/`` uses (idempotent).

    Runs on import of this module; code that composes ``conf/`` with Hydra's compose API
    must import :mod:`psbench.cli` first.
    """
    if not OmegaConf.has_resolver("psbench_default_data_dir"):
        OmegaConf.register_new_resolver("psbench_default_data_dir", default_data_dir)
    if not OmegaConf.has_resolver("psbench_run_dir"):
        OmegaConf.register_new_resolver("psbench_run_dir", run_dir)
    if not OmegaConf.has_resolver("psbench_artifact_location"):
        from psbench.tracking.options import default_artifact_location

        OmegaConf.register_new_resolver("psbench_artifact_location", default_artifact_location)


register_resolvers()


# --------------------------------------------------------------------------- hydra hooks
class OutputDirCheck(Callback):
    """Hydra callback (``conf/hydra/default.yaml``): refuse an unwritable run/sweep dir.

    Hydra itself would fail with a traceback while creating the directory; checking here,
    before it does, turns that into one line naming ``hydra.run.dir``. Hydra swallows
    exceptions raised by callbacks (it only warns), so the check exits through
    :func:`report` itself. Before a multirun it also creates the MLflow store and
    experiment once, so parallel jobs do not race on first creation, and the sweep's parent
    run (:mod:`psbench.tracking.sweep`); after it, ends that run and, if jobs failed, prints
    one line counting them and exits 1.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        # run_job does this first thing too; the dir's interpolations need ${hydra:...}
        HydraConfig.instance().set_config(config)
        resume = config.get("resume")
        if resume not in (None, "auto"):  # resume=<run dir> is the run dir: it must hold a run to resume
            from psbench.checkpoint import CHECKPOINT_FILE

            d = Path(str(resume))
            if not ((d / CHECKPOINT_FILE).is_file() or (d / "summary.json").is_file()):
                report(ConfigError("resume", resume, f"null, auto, or a run dir holding {CHECKPOINT_FILE}"))
        self._check("hydra.run.dir", config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        HydraConfig.instance().set_config(config)
        resume = config.get("resume")
        if resume not in (None, "auto"):
            report(ConfigError("resume", resume, "null or auto in a sweep (-m): each job resumes its own dir"))
        self._check("hydra.sweep.dir", config)
        from psbench.tracking import sweep

        try:
            sweep.begin(config)  # the store, and the parent run of the jobs with their ledger
        except ConfigError as err:
            report(err)
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
    def _check(key: str, config: DictConfig) -> None:
        try:
            check_writable_dir(key, OmegaConf.select(config, key, throw_on_missing=True))
        except (ConfigError, OmegaConfBaseException) as err:
            report(err)


# --------------------------------------------------------------------------- output
def config_tree(cfg: Mapping[str, Any], label: str = "config"):
    """The resolved config as a :class:`rich.tree.Tree` (groups as branches)."""
    from rich.text import Text
    from rich.tree import Tree

    def add(node: Tree, mapping: Mapping[str, Any]) -> None:
        for key, value in mapping.items():
            if isinstance(value, Mapping) and value:
                add(node.add(Text(str(key), style="bold cyan")), value)
            else:
                text = Text(f"{key}: ", style="green")
                text.append(json.dumps(value, default=str, ensure_ascii=False))
                node.add(text)

    tree = Tree(Text(label, style="bold"))
    add(tree, cfg)
    return tree


def print_config(resolved: Mapping[str, Any]) -> None:
    from rich.console import Console

    Console(soft_wrap=True).print(config_tree(resolved))


# main() sets this from the user's HYDRA_FULL_ERROR before it forces the variable on
_show_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"


def report(err: BaseException) -> None:
    """Bad input: print one line ``psbench: error: …`` and exit 2 (re-raise for tracebacks).

    With ``HYDRA_FULL_ERROR=1`` set by the user, ``err`` is re-raised instead.
    """
    if _show_traceback:
        raise err
    print(f"psbench: error: {error_message(err)}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_INPUT)


def error_message(err: BaseException) -> str:
    """The one-line message of a bad-input error."""
    message = str(err) if isinstance(err, ConfigError | DataError) else hydra_error_line(err)
    return " ".join(message.split())  # one line, whatever the message held


def run_failure(err: RunFailure) -> None:
    """A handled failure of a run: one line ``psbench: error: …``, exit 1 (re-raise for tracebacks)."""
    if _show_traceback:
        raise err
    print(f"psbench: error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
    sys.exit(1)


def hydra_error_line(err: BaseException) -> str:
    """One line for a Hydra/OmegaConf error: ``protocol='foo' is invalid: allowed one of …``."""
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        # "In 'config': Could not find 'experiment/rudra/nope' ... Available options in
        # 'experiment': ..." -> the group is the one Hydra names, options from conf/<group>/
        found = re.search(r"Available options in '([^']+)'", str(err))
        group = found.group(1) if found else err.missing_cfg_file.rpartition("/")[0]
        option = err.missing_cfg_file.removeprefix(group + "/")
        options = group_options(group) or list(err.options or [])
        if options:
            return str(ConfigError(group or "config", option, "one of " + ", ".join(options)))
    text = str(err)
    appended = re.search(r"Could not append to config\. An item is already at '([^']+)'.*?'\1=([^']*)'", text, re.S)
    if appended:  # +key=value on a key the config has: the user meant key=value
        key, value = appended.groups()
        return str(ConfigError(f"+{key}", value, f"{key}={value} without the + ({key} is a key of the config; "
                                                 f"++{key}=... adds or overrides)"))
    unknown = re.search(r"Could not override '([^']+)'\.\s*To append to your config use \+\1=(.*)", text)
    if unknown and "not in struct" in str(err.__cause__):  # a typo: name the keys there are, not "use +key"
        from psbench.validate import unknown_override

        return str(unknown_override(unknown.group(1), unknown.group(2).strip()))
    if isinstance(err, OverrideParseException):
        # the message says what is wrong, not where: "no viable alternative at input '['"
        text = f"cannot parse override {err.override!r}: {text.splitlines()[0]}"
    if isinstance(err.__cause__, OmegaConfBaseException):
        text += f" ({str(err.__cause__).splitlines()[0]})"
    if isinstance(err, OmegaConfBaseException) and getattr(err, "full_key", None):
        head = text.splitlines()[0] if text else type(err).__name__
        return f"{err.full_key}: {head}"
    return " ".join(text.split()) or type(err).__name__


def group_options(group: str) -> list[str]:
    """The options of a config group, from the yaml files under ``conf/<group>/``."""
    base = CONF_DIR / group
    return sorted(p.relative_to(base).with_suffix("").as_posix() for p in base.rglob("*.yaml"))


# --------------------------------------------------------------------------- the job
def _hydra_choices() -> dict[str, Any]:
    if not HydraConfig.initialized():
        return {}
    return dict(HydraConfig.get().runtime.choices)


class _Run:
    """The MLflow side of one job (a no-op with ``logger=none``)."""

    def __init__(self, resolved: Mapping[str, Any], run_dir: Path, provenance: Mapping[str, Any],
                 resume: Mapping[str, Any] | None = None) -> None:
        lg = resolved["logger"]
        self.enabled = lg["name"] == "mlflow"
        self.uri: str = lg.get("tracking_uri", "")
        self.run_id: str | None = None
        self.ended = False
        self.last_steps: dict[str, int] = {}  # a resumed run's metric history: last step per key
        if not self.enabled:
            return
        from psbench import tracking
        from psbench.tracking import sweep

        self.t = tracking
        if resume is not None and resume.get("mlflow_run_id"):  # the same run, RUNNING again
            self.run_id = resume["mlflow_run_id"]
            self.last_steps = tracking.reopen_run(self.uri, self.run_id, int(resume["update"]))
            log.info("MLflow run %s resumed before update %s in %s", self.run_id, resume["update"], self.uri)
            return
        exp_id = tracking.ensure_experiment(
            self.uri, lg["experiment_name"], lg.get("artifact_location"), lg.get("lock_timeout_s", 30)
        )
        tags = tracking.run_tags(resolved, _hydra_choices())
        tags["run_dir"] = str(run_dir)
        tags["mlflow.source.name"] = "psbench"
        if provenance.get("git_commit"):
            tags["mlflow.source.git.commit"] = provenance["git_commit"]
        tags.update(tracking.provenance_tags(provenance), **sweep.job_tags(self.uri))
        name = tracking.run_name(resolved, tracking.config_defaults(CONF_DIR / "config.yaml"))
        self.run_id = tracking.start_run(self.uri, exp_id, name, tracking.flatten(resolved), tags)
        log.info("MLflow run %s in %s", self.run_id, self.uri)

    def lightning_logger(self, resolved: Mapping[str, Any]):
        if self.run_id is None:
            return None
        from pytorch_lightning.loggers import MLFlowLogger

        lg = resolved["logger"]
        last = self.last_steps

        class NoRepeat(MLFlowLogger):
            """Drops a metric at a step the resumed run already has (the interrupted part logged it)."""

            def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
                if step is not None:
                    metrics = {k: v for k, v in metrics.items() if step > last.get(k, -1)}
                if metrics:
                    super().log_metrics(metrics, step)

        # MLflow's own asynchronous logging, its queue merged into one transaction per ASYNC_BUFFER_S: one sqlite
        # write per logged update cost 11 % of an asynchronous μ = 4 run at one thread (Zhang Fig 3's 30-softsync,
        # 3.1 of 28.5 s, py-spy); set_terminated (Lightning's finalize, end_run, abort) drains the queue first
        os.environ.setdefault("MLFLOW_ASYNC_LOGGING_BUFFERING_SECONDS", ASYNC_BUFFER_S)
        return NoRepeat(
            experiment_name=lg["experiment_name"],
            tracking_uri=self.uri,
            run_id=self.run_id,
            artifact_location=lg.get("artifact_location"),
            log_model=False,
            synchronous=False,
        )

    def finish(self, summary: RunSummary, files: list[Path]) -> None:
        if self.run_id is None:
            return
        t = self.t
        t.log_summary(self.uri, self.run_id, summary.to_dict())  # summary/<key>: never a point of a series
        t.log_artifacts(self.uri, self.run_id, files)
        t.set_tags(self.uri, self.run_id, {
            "status": summary.status,
            "diverged": str(summary.diverged).lower(),
            "weights_sha256": summary.weights_sha256,
        })
        t.end_run(self.uri, self.run_id, t.FINISHED)
        self.ended = True

    def abort(self, status: str, reason: str, summary: RunSummary | None = None,
              files: Sequence[Path] = ()) -> None:
        """Mark the run ``status`` (FAILED/KILLED) with tag ``failure_reason``; never masks the error handled."""
        if self.run_id is None or self.ended:
            return
        self.ended = True
        t = self.t
        with contextlib.suppress(Exception):
            if summary is not None:
                t.log_summary(self.uri, self.run_id, summary.to_dict())
                t.log_artifacts(self.uri, self.run_id, files)
            t.set_tags(self.uri, self.run_id, {"failure_reason": " ".join(reason.split()),
                                               **({"status": summary.status} if summary else {})})
        with contextlib.suppress(Exception):
            t.end_run(self.uri, self.run_id, status)


def execute(cfg: DictConfig) -> float | None:
    """Run one job for a composed config; return its test error (``None`` if not trained).

    In order: the config is checked (:func:`~psbench.validate.validate`), the run is built
    (:func:`psbench.train.prepare`: data, model, schedule and the checks they make possible), and only then is
    the MLflow run created and the engine started — input refused at any of these steps leaves no MLflow run.
    Whatever ends the job after its run dir exists (success, bad input, a signal, a failure) leaves its
    ``summary.json``.
    """
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert isinstance(resolved, dict)
    run_dir = Path(resolved["paths"]["output_dir"])
    summary_file = run_dir / "summary.json"
    engine = resolved.get("engine") or {}
    note = (resolved.get("dataset") or {}).get("data_note")  # in every summary.json of the run (RunSummary.data_note)
    run: _Run | None = None
    prov: dict[str, Any] | None = None
    try:
        lifecycle.release()  # a signal held since start-up is raised here, where this job's record is kept
        print_config(resolved)
        validate(cfg)
        # torch, Lightning and the training code load before the MLflow run exists: a signal is then not
        # delivered in the middle of an import (where a finalizer could swallow it)
        from psbench.checkpoint import CHECKPOINT_FILE, Plan, RunStopped, resume_state
        from psbench.train import prepare
        from psbench.train import run as run_engine

        mode, found = resume_state(resolved.get("resume"), run_dir, resolved)
        if mode == "done":
            print(f"psbench: {run_dir} already finished ({found.status}); not run again", file=sys.stderr)
            return None if found.test_error is None else float(found.test_error)
        config_file = run_dir / "resolved_config.yaml"
        OmegaConf.save(OmegaConf.create(resolved), config_file)
        overrides = run_dir / ".hydra" / "overrides.yaml"
        files = [summary_file, config_file, overrides]

        from psbench.tracking.provenance import provenance

        prov = provenance(resolved["trainer"].get("num_threads"))
        tr = resolved["trainer"]
        plan = Plan(run_dir / CHECKPOINT_FILE, int(tr.get("checkpoint_every") or 0), tr.get("stop_after_updates"),
                    {"config": resolved}, found if mode == "resume" else None)
        setup = prepare(cfg, plan)  # every check that can refuse the job, before any MLflow run
        with lifecycle.deferred():  # a signal while the MLflow run is created ends it once it exists
            run = _Run(resolved, run_dir, prov, plan.state)
        plan.meta["mlflow_run_id"] = run.run_id
        try:
            summary = run_engine(setup, run_dir, run.lightning_logger(resolved), plan)
        except RunStopped as stop:  # a requested stop (trainer.stop_after_updates): KILLED, with its checkpoint
            stopped = RunSummary(status="killed", updates_done=stop.update, checkpoint=str(stop.path),
                                 failure_reason=str(stop), engine="sim", mlflow_run_id=run.run_id, provenance=prov,
                                 data_note=note)
            write_json(summary_file, stopped)
            run.abort("KILLED", str(stop), stopped, files)
            log.info("%s; resume with resume=%s", stop, run_dir)
            return None
        summary = replace(summary, mlflow_run_id=run.run_id, provenance=prov, data_note=note)
        artifacts = [*files, *(Path(p) for p in summary.artifacts)]
        with lifecycle.deferred():
            write_json(summary_file, summary)
            run.finish(summary, artifacts)
            plan.path.unlink(missing_ok=True)  # finished: the weights are an artifact, summary.json says done
    except lifecycle.Killed as k:
        if run is None or not run.ended:
            _end_killed(k, run, summary_file, prov, engine, note)
        raise
    except BaseException as err:
        status, reason = _ended_by(err)
        ended = RunSummary(status=status.lower(), failure_reason=" ".join(reason.split()), engine=engine.get("name"),
                           mlflow_run_id=run.run_id if run is not None else None, provenance=prov, data_note=note)
        with contextlib.suppress(OSError):  # an output dir that cannot be written is the error itself
            write_json(summary_file, ended)
        if run is not None:
            run.abort(status, reason, ended, [summary_file])
        raise
    clock = "sim_time_s" if summary.run_time_s is None else "run_time_s"  # simulated, or measured (dist)
    log.info("%s: test_error=%s staleness_mean=%s %s=%s -> %s", summary.status, summary.test_error,
             summary.staleness_mean, clock, getattr(summary, clock), summary_file)
    return None if summary.test_error is None else float(summary.test_error)


def _ended_by(err: BaseException) -> tuple[str, str]:
    """MLflow status and ``failure_reason`` of a job ended by ``err``: KILLED when submitit requeues it
    (:mod:`hydra_plugins.psbench_launchers.requeue`: pre-empted or timed out, it resumes), else FAILED."""
    requeue = sys.modules.get("hydra_plugins.psbench_launchers.requeue")
    if isinstance(err, SystemExit) and requeue is not None and requeue.requeued:
        return "KILLED", requeue.requeued[-1]
    return "FAILED", failure_reason(err)


def _end_killed(k: lifecycle.Killed, run: _Run | None, summary_file: Path, prov: Mapping[str, Any] | None,
                engine: Mapping[str, Any], note: str | None = None) -> None:
    """A killed job: ``summary.json`` (status killed), its MLflow run (if one exists yet) KILLED with
    ``failure_reason``, one line on stderr."""
    dist = engine.get("name") == "dist"
    summary = replace(lifecycle.summary(k), engine=engine.get("name", "sim"),
                      mode=engine.get("mode", "free_run") if dist else None,
                      mlflow_run_id=run.run_id if run is not None else None, provenance=prov, data_note=note)
    with contextlib.suppress(OSError):
        write_json(summary_file, summary)
    if run is not None:
        d = summary_file.parent
        run.abort("KILLED", str(summary.failure_reason), summary,
                  [summary_file, d / "resolved_config.yaml", d / ".hydra" / "overrides.yaml"])
    print(f"psbench: {summary.failure_reason}; summary in {summary_file}", file=sys.stderr, flush=True)
    k.reported = True


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    try:
        return execute(cfg)
    except (ConfigError, DataError, OmegaConfBaseException) as err:
        from psbench.tracking import sweep

        if sweep.in_worker() and not sweep.in_basic_sweep():  # the launcher hands the error to the sweeper
            print(f"psbench: error: {error_message(err)}", file=sys.stderr, flush=True)
            raise err if isinstance(err, ConfigError | DataError) else ValueError(error_message(err)) from None
        if not sweep.in_basic_sweep() or _show_traceback:
            report(err)  # exiting from inside the job keeps Hydra from adding its own report lines
        print(f"psbench: error: {error_message(err)}", file=sys.stderr, flush=True)
        sweep.fail_job(error_message(err))  # the grid goes on, as after a diverged run; counted at its end
        return None
    except RunFailure as err:
        if HydraConfig.get().mode != RunMode.MULTIRUN:  # in a sweep the other jobs go on; main() reports it
            run_failure(err)
        raise


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
    (HYDRA_FULL_ERROR is set for the duration of the call) and passed to :func:`report`.
    When the user set HYDRA_FULL_ERROR=1 the traceback is shown as usual.
    """
    global _show_traceback
    _show_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
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
        run_failure(err)
    except (ConfigError, DataError, HydraException, OmegaConfBaseException) as err:
        report(err)
    finally:
        if not _show_traceback:
            os.environ.pop("HYDRA_FULL_ERROR", None)


if __name__ == "__main__":
    # ``python -m psbench.cli``: run the canonical module, not this __main__ copy, so that
    # the Hydra callback (psbench.cli.OutputDirCheck) shares main()'s error settings
    from psbench.cli import main as canonical_main

    canonical_main()
