"""The ask → launch → tell loop of ``hydra/sweeper=psbench_optuna`` (Optuna ≥ 4).

One sweep = one Optuna study in ``storage`` (sqlite under the sweep dir by default):

1. **identity**: a study is what its command says (:mod:`._identity`). Without a ``hydra.sweep.dir``
   of the user's the sweep dir is ``<…>/multirun/optuna/<study_name>-<hash of the identity>``,
   so the same command finds its study again; a command whose identity differs from the
   stored one is refused before any trial runs (``continue_study=true`` opts in);
2. **resume**: a trial left RUNNING by a sweep process that no longer exists (killed) is marked
   FAIL ``interrupted`` and its parameters are enqueued again (same job dir); so are crashed
   trials with ``retry_failed``; ``n_trials`` counts the trials already *finished* (complete,
   crashed or diverged), so re-running the same command only runs the remaining ones;
3. **ask** up to ``n_jobs`` trials, the sampler seeded with a function of (``seed``, trial
   number), so a resumed study continues its sequence instead of replaying it; a proposal
   equal to a trial already run is FAIL ``duplicate_of`` and asked again; ``cases``, ``derived``
   values and ``constraints`` turn the sampled values into job overrides; a trial that
   violates a constraint is recorded PRUNED (``infeasible``) without running;
4. **launch** the batch through Hydra's launcher; a job runs in ``<sweep dir>/<trial number>``
   (a retry in the dir of the trial it retries);
5. **tell** the objectives (:func:`._results.read_objectives`); a job that raised or exited is
   FAIL (``crashed``), a diverged run FAIL (``diverged``, or COMPLETE with ``on_diverged:
   complete``); an objective a job does not report stops the study; more than
   ``max_failure_rate`` crashed stops it too;
6. write ``optimization_results.yaml`` (best trial or Pareto front) in the sweep dir and exit
   non-zero after one line when crashed trials are left. For (test error, simulated time) the
   Pareto front is Rudra's set of "virtuous" configurations (§5.2, Figs 6–7; Table 3).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import math
import os
import signal
import socket
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, flag_override
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import TrialState

from hydra_plugins.psbench_optuna_sweeper._identity import default_sweep_dir, differences, fingerprint, identity
from hydra_plugins.psbench_optuna_sweeper._results import (
    RESULTS_FILE,
    StudyStop,
    counts,
    outcome,
    read_objectives,
    retried_numbers,
    write_results,
)
from hydra_plugins.psbench_optuna_sweeper._search_space import (
    CASE_PARAM,
    _override_value,
    case_overrides,
    case_values,
    evaluate,
    parse,
)
from psbench.lifecycle import JobKilled, Killed
from psbench.summary import COMPLETED

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "random", "grid", "nsgaii")
DIRECTIONS = ("minimize", "maximize")
# outcomes whose parameter set is taken: a sampler proposing it again gets a duplicate
TAKEN = ("complete", "diverged", "crashed", "retried", "running", "waiting")


def _changed_choices(study: optuna.Study, space: Mapping[str, BaseDistribution]) -> list[str]:
    """``name: stored -> asked`` for each parameter whose distribution in ``space`` Optuna would refuse next to
    the one the study's trials were asked with (e.g. ``seed`` widened from choice(0) to choice(0, 1, 2))."""
    out: dict[str, str] = {}
    for t in study.get_trials(deepcopy=False):
        for name, old in t.distributions.items():
            new = space.get(name)
            if new is None or name in out:
                continue
            try:
                optuna.distributions.check_distribution_compatibility(old, new)
            except ValueError:
                show = lambda d: getattr(d, "choices", d)  # noqa: E731
                out[name] = f"{name}: {show(old)} -> {show(new)}"
    return list(out.values())


def _crash_reasons(study: optuna.Study, most: int = 2) -> str:
    """``: trial 3: RuntimeError: boom …; trial 5: …`` — why the last crashed trials crashed, for the sweep's line (the
    reason was only in ``optimization_results.yaml``)."""
    from hydra_plugins.psbench_optuna_sweeper._results import outcome, retried_numbers

    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    crashed = [t for t in trials if outcome(t, retried) == "crashed" and t.user_attrs.get("crashed")]
    if not crashed:
        return ""
    shown = "; ".join(
        f"trial {t.number}: {' '.join(str(t.user_attrs['crashed']).split())[:300]}" for t in crashed[-most:]
    )
    return f": {shown}" + (f" (and {len(crashed) - most} more)" if len(crashed) > most else "")


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler, minus its ``study.stop()`` after the last grid point.

    ``Study.stop`` only works inside ``study.optimize``; this loop is ask/tell and stops by
    itself when :meth:`is_exhausted` says so.
    """

    def after_trial(self, study, trial, state, values) -> None:
        return None


def trial_seed(seed: int | None, number: int) -> int | None:
    """The sampler seed of trial ``number``: a function of (``seed``, trial number) only."""
    return None if seed is None else int(np.random.SeedSequence([int(seed), int(number)]).generate_state(1)[0])


def make_sampler(
    conf: Mapping[str, Any], space: Mapping[str, BaseDistribution], seed: int | None = None
) -> optuna.samplers.BaseSampler:
    """The Optuna sampler named by ``conf["name"]`` (one of :data:`SAMPLERS`), seeded with ``seed``.

    The grid sampler always takes ``conf["seed"]``: its seed fixes the order of the grid, and
    trial ``k`` runs point ``k`` of that order.
    """
    name = str(conf.get("name", "tpe")).lower()
    if name == "tpe":
        kw: dict[str, Any] = {"seed": seed, "multivariate": bool(conf.get("multivariate", False))}
        if conf.get("n_startup_trials") is not None:
            kw["n_startup_trials"] = int(conf["n_startup_trials"])
        return optuna.samplers.TPESampler(**kw)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return _AskTellGridSampler({k: list(d.choices) for k, d in space.items()}, seed=conf.get("seed"))  # type: ignore[attr-defined]
    if name == "nsgaii":
        kw = {"seed": seed}
        if conf.get("population_size") is not None:
            kw["population_size"] = int(conf["population_size"])
        return optuna.samplers.NSGAIISampler(**kw)
    raise StudyStop(f"hydra.sweeper.sampler.name={name} is invalid: allowed one of {', '.join(SAMPLERS)}")


#: tables of an MLflow tracking store; a database holding them is not an Optuna storage (both keep alembic_version)
MLFLOW_TABLES = {"experiments", "runs", "metrics", "params"}


def check_storage(url: str, tracking_uri: str | None = None) -> None:
    """Refuse (:class:`StudyStop`, one line) a storage that is the MLflow store or a database Optuna did not make.

    A database with tables but no ``studies`` table is someone else's (Optuna would stop with a misleading schema
    error); an empty or new one is Optuna's to create.
    """
    if tracking_uri and url == tracking_uri:
        raise _invalid(
            "storage",
            url,
            "an Optuna database, not the MLflow store (logger.tracking_uri); the default "
            "sqlite:///${hydra.sweep.dir}/optuna.db keeps each study beside its trials",
        )
    import sqlalchemy

    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        return
    try:
        engine = sqlalchemy.create_engine(url)
        try:
            tables = set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    except Exception as err:  # not a database, no such server, a driver missing: said in the line
        lines = [s for s in str(err).splitlines() if s.strip()]
        raise _invalid(
            "storage",
            url,
            "an Optuna RDB storage URL (sqlite:///<file> or postgresql+psycopg://...) "
            f"that can be opened: {type(err).__name__}: {lines[0][:200] if lines else ''}",
        ) from None
    if tables & MLFLOW_TABLES >= {"experiments", "runs"}:
        raise _invalid(
            "storage",
            url,
            "an Optuna database, not an MLflow tracking store (it holds MLflow's experiments and runs tables)",
        )
    if tables and "studies" not in tables:
        raise _invalid(
            "storage",
            url,
            "an Optuna database or a new one (it holds other tables: " + ", ".join(sorted(tables)[:6]) + ")",
        )


def make_storage(url: str | None) -> optuna.storages.BaseStorage | None:
    """RDB storage; for sqlite the parent dir is created and writers wait for the lock (30 s).

    A database server (PostgreSQL) shared by sweeps that start at once: Optuna creates its tables on first use
    without a lock, so all but one of them fail with a duplicate-key error; they retry, and find the tables made.
    """
    if not url:
        return None
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    for attempt in range(4):
        try:
            return optuna.storages.RDBStorage(url)
        except (IntegrityError, ProgrammingError):
            time.sleep(0.5 * (attempt + 1))
    return optuna.storages.RDBStorage(url)  # the fifth try: its error is the one to report


def _quoted(path: str) -> str:
    return "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _params_key(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _invalid(key: str, value: Any, allowed: str) -> StudyStop:
    shown = "null" if value is None else ("[" + ",".join(map(str, value)) + "]" if isinstance(value, list) else value)
    return StudyStop(f"hydra.sweeper.{key}={shown} is invalid: allowed {allowed}")


class OptunaSweeperImpl:
    """State and loop of one sweep (see the module docstring); keys as in ``config.py``."""

    def __init__(
        self,
        sampler: Mapping[str, Any],
        study_name: str,
        storage: str | None,
        objectives: Sequence[str] | None,
        direction: Any,
        n_trials: int | None,
        n_jobs: int,
        max_failure_rate: float,
        on_diverged: str,
        params: Mapping[str, str] | None,
        cases: Mapping[str, Any] | None,
        derived: Mapping[str, str] | None,
        constraints: Sequence[str] | None,
        max_infeasible: int,
        tag_runs: bool,
        continue_study: bool = False,
        retry_failed: bool = True,
    ) -> None:
        self.sampler_conf = dict(sampler or {})
        self.study_name = str(study_name)
        self.storage_url = storage
        dirs = [str(d) for d in ([direction] if isinstance(direction, str) else list(direction or []))]
        if objectives is None:  # hydra-optuna-sweeper's configs name directions only
            objectives = ["test_error"] if len(dirs) <= 1 else [f"objective_{i}" for i in range(len(dirs))]
        self.objectives = [str(o) for o in objectives]
        self.directions = dirs * len(self.objectives) if isinstance(direction, str) else dirs
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.max_failure_rate = max_failure_rate
        self.on_diverged = on_diverged
        self.params = dict(params or {})
        self.cases_conf = cases
        self.derived = dict(derived or {})
        self.constraints = list(constraints or [])
        self.max_infeasible = max_infeasible
        self.tag_runs = bool(tag_runs)
        self.continue_study = bool(continue_study)
        self.retry_failed = bool(retry_failed)
        self.cases: dict[str, list[str]] = {}
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None
        self.sweep_dir: Path | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config, self.hydra_context = config, hydra_context
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # its "study created/loaded" lines: ours say more
        try:
            self.check_keys()
            self.cases = case_overrides(self.cases_conf or {})
        except StudyStop as stop:
            self._exit(stop)
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def check_keys(self) -> None:
        """Refuse bad ``hydra.sweeper`` keys up front (:class:`StudyStop`, one line each)."""
        name = str(self.sampler_conf.get("name", "tpe")).lower()
        if name not in SAMPLERS:
            raise _invalid("sampler.name", self.sampler_conf.get("name"), "one of " + ", ".join(SAMPLERS))
        if self.n_trials is None and name != "grid":
            raise _invalid("n_trials", None, "an integer >= 1 (null: the whole grid, with sampler.name=grid)")
        if self.n_trials is not None and self.n_trials < 1:
            raise _invalid("n_trials", self.n_trials, "an integer >= 1 (null: the whole grid, with sampler.name=grid)")
        if self.n_jobs < 1:
            raise _invalid("n_jobs", self.n_jobs, "an integer >= 1")
        if not self.objectives or len(set(self.objectives)) != len(self.objectives) or not all(self.objectives):
            raise _invalid("objectives", self.objectives, "a list of distinct keys of what a job reports")
        reported = self._reported_keys()
        unknown = [k for k in self.objectives if k not in (reported or self.objectives)]
        if reported is not None and unknown:
            close = difflib.get_close_matches(unknown[0], reported, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise _invalid(
                "objectives",
                self.objectives,
                f"numbers a psbench job reports in summary.json{hint}: " + ", ".join(reported),
            )
        for d in self.directions:
            if d not in DIRECTIONS:
                raise _invalid("direction", d, "minimize, maximize or a list of them, one per objective")
        if len(self.directions) != len(self.objectives):
            raise _invalid(
                "direction",
                self.directions,
                f"one direction per objective ({len(self.objectives)}: {', '.join(self.objectives)})",
            )
        if not 0 <= self.max_failure_rate <= 1:
            raise _invalid("max_failure_rate", self.max_failure_rate, "a fraction in [0, 1]")
        if self.on_diverged not in ("fail", "complete"):
            raise _invalid("on_diverged", self.on_diverged, "one of fail, complete")
        if self.max_infeasible < 1:
            raise _invalid("max_infeasible", self.max_infeasible, "an integer >= 1")
        pop = self.sampler_conf.get("population_size")
        if pop is not None and pop < 2:
            raise _invalid("sampler.population_size", pop, "an integer >= 2 (or null: Optuna's 50)")
        startup = self.sampler_conf.get("n_startup_trials")
        if startup is not None and startup < 0:
            raise _invalid("sampler.n_startup_trials", startup, "an integer >= 0 (or null: Optuna's default)")

    def _reported_keys(self) -> tuple[str, ...] | None:
        """The numbers every job reports, when the app is psbench (``summary.json``'s number fields); None for
        another app, whose jobs are asked at the first trial (:func:`._results.read_objectives`)."""
        assert self.config is not None
        if OmegaConf.select(self.config, "hydra.job.name") != "psbench":
            return None
        try:
            from psbench.summary import NUMBERS
        except ImportError:
            return None
        return NUMBERS

    def _exit(self, stop: StudyStop) -> None:
        """Print ``stop`` as one line, end the multirun's callbacks (they would be skipped), exit."""
        assert self.config is not None
        app = OmegaConf.select(self.config, "hydra.job.name") or "psbench"
        message = " ".join(str(stop).split())
        print(f"{app}: error: {message}" if stop.code == 2 else f"{app}: {message}", file=sys.stderr, flush=True)
        if self.hydra_context is not None:
            self.hydra_context.callbacks.on_multirun_end(
                config=self.config, config_name=self.config.hydra.job.config_name
            )
        sys.exit(stop.code)

    # ------------------------------------------------------------------ study
    def _use_sweep_dir(self, fp: str) -> Path:
        """The sweep dir: the user's, or the study's deterministic default (see :mod:`._identity`)."""
        assert self.config is not None
        raw = cast(dict[str, Any], OmegaConf.to_container(self.config.hydra.sweep, resolve=False))["dir"]
        new = default_sweep_dir(str(raw), self.study_name, fp)
        if new is not None:
            old = Path(str(self.config.hydra.sweep.dir))
            with flag_override(self.config.hydra, ["readonly", "struct"], False):
                self.config.hydra.sweep.dir = new
            self.storage_url = OmegaConf.select(self.config, "hydra.sweeper.storage")
            if old != Path(str(self.config.hydra.sweep.dir)):
                with contextlib.suppress(OSError):  # the timestamped dir a callback made; only if empty
                    old.rmdir()
                    old.parent.rmdir()
        return Path(str(self.config.hydra.sweep.dir))

    def _study(self, ident: dict[str, Any], fp: str, space: Mapping[str, BaseDistribution]) -> optuna.Study:
        """Create or load the study; refuse one whose stored identity differs (unless ``continue_study``), and a
        storage that is not an Optuna database (:func:`check_storage`)."""
        assert self.config is not None
        if self.storage_url:
            check_storage(str(self.storage_url), OmegaConf.select(self.config, "logger.tracking_uri"))
        study = optuna.create_study(
            study_name=self.study_name,
            storage=make_storage(self.storage_url),
            sampler=optuna.samplers.RandomSampler(),  # replaced at each ask
            directions=[optuna.study.StudyDirection[d.upper()] for d in self.directions],
            load_if_exists=True,
        )
        old = study.user_attrs.get("identity")
        diffs = differences(old, ident) if old is not None else []
        c = counts(study)
        if diffs and c["complete"] + c["diverged"] and not self.continue_study:
            raise StudyStop(
                f"study {self.study_name!r} in {self.storage_url} was run with other settings "
                f"({'; '.join(diffs)}): start a new study with hydra.sweeper.study_name="
                f"{self.study_name}_{fp}, or add these trials to it with "
                f"hydra.sweeper.continue_study=true"
            )
        have = [d.name.lower() for d in study.directions]
        if have != self.directions:
            raise StudyStop(
                f"study {self.study_name!r} in {self.storage_url} has directions {have}, not "
                f"{self.directions}: start a new study with "
                f"hydra.sweeper.study_name={self.study_name}_{fp}"
            )
        if diffs and c["complete"] + c["diverged"]:
            changed = _changed_choices(study, space)
            if changed:  # Optuna keeps one distribution per parameter in a study: asking another raises
                raise StudyStop(
                    f"hydra.sweeper.continue_study=true cannot change a parameter's values in study "
                    f"{self.study_name!r} ({'; '.join(changed)}): Optuna keeps one set per parameter in "
                    f"a study; start a new study with hydra.sweeper.study_name={self.study_name}_{fp}"
                )
            log.warning("continuing study %r although its settings differ: %s", self.study_name, "; ".join(diffs))
        else:  # a new study, or one without results yet: this command defines it
            study.set_user_attr("identity", ident)
            study.set_user_attr("identity_hash", fp)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(self.objectives)
        study.set_user_attr("objectives", self.objectives)
        return study

    @property
    def _grid(self) -> bool:
        return str(self.sampler_conf.get("name", "tpe")).lower() == "grid"

    def _recover(self, study: optuna.Study) -> None:
        """Trials left RUNNING by a dead sweep process: FAIL ``interrupted`` (:meth:`_requeue` reruns them)."""
        from psbench.tracking.mlflow_store import process_alive

        host = socket.gethostname()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            pid = t.user_attrs.get("pid")  # None: killed between ask and its first attribute
            if pid is not None and (
                t.user_attrs.get("host") != host or (pid != os.getpid() and process_alive(int(pid)))
            ):
                continue  # another live worker (or another machine) owns it
            log.warning("trial %d was interrupted (sweep pid %s is gone): running it again", t.number, pid)
            optuna.trial.Trial(study, t._trial_id).set_user_attr("interrupted", True)
            study.tell(t.number, state=TrialState.FAIL)

    def _requeue(self, study: optuna.Study) -> None:
        """Enqueue interrupted trials, and crashed ones with ``retry_failed``, once each, in their job dir."""
        trials = study.get_trials(deepcopy=False)
        retried = retried_numbers(trials)
        for t in trials:
            kind = outcome(t, retried)
            fresh = t.user_attrs.get("retry_of") is None  # a retry shares its params with the trial it retries
            if kind == "interrupted" and fresh and self._duplicate_of(study, t) is not None:
                continue  # killed while it was being recorded as a duplicate: nothing to run
            if (kind == "interrupted" and t.number not in retried) or (kind == "crashed" and self.retry_failed):
                if kind == "crashed":
                    log.info(
                        "trial %d crashed before (%s): running it again",
                        t.number,
                        str(t.user_attrs.get("crashed", ""))[:200],
                    )
                study.enqueue_trial(
                    t.params, user_attrs={"retry_of": t.number, "subdir": t.user_attrs.get("subdir", str(t.number))}
                )

    # ------------------------------------------------------------------ the loop
    def sweep(self, arguments: list[str]) -> Any:
        try:
            return self._sweep(arguments)
        except StudyStop as stop:
            self._exit(stop)

    def _sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        try:
            space, fixed = parse(self.params, arguments)
        except (ValueError, HydraException) as err:
            raise StudyStop(f"hydra/sweeper=psbench_optuna: {str(err).splitlines()[0]}") from None
        if self.cases:
            space[CASE_PARAM] = CategoricalDistribution(list(self.cases))
        if not space:
            raise StudyStop(
                "hydra/sweeper=psbench_optuna: empty search space "
                "(set hydra.sweeper.params, hydra.sweeper.cases or sweep overrides)"
            )
        if self._grid:
            for key, dist in space.items():
                if not isinstance(dist, CategoricalDistribution):
                    raise StudyStop(
                        f"hydra.sweeper.sampler.name=grid is invalid for {key}: allowed choice or range "
                        "sweeps only (or another sampler)"
                    )
        ident = identity(
            space,
            fixed,
            self.cases,
            self.derived,
            self.constraints,
            self.sampler_conf,
            self.objectives,
            self.directions,
        )
        fp = fingerprint(ident)
        sweep_dir = self._use_sweep_dir(fp)
        with contextlib.suppress(ImportError):  # one psbench at a time in a sweep dir (two copies trained one dir)
            from psbench.run_dir import hold

            try:
                hold("hydra.sweep.dir", sweep_dir)
            except ValueError as err:  # psbench.errors.ConfigError
                raise StudyStop(str(err)) from None
        study = self._study(ident, fp, space)
        with contextlib.suppress(ImportError):  # psbench's MLflow parent run, where the sweep's results live
            from psbench.tracking.sweep import open_parent

            open_parent(self.config)
        self.sweep_dir = sweep_dir
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self._recover(study)
        self._requeue(study)
        c = counts(study)
        log.info(
            "study %r (%s, identity %s): %d trials finished before, target %s; space %s",
            self.study_name,
            self.storage_url,
            fp,
            c["finished"],
            self.n_trials or "whole grid",
            dict(space),
        )
        try:
            returns = self._loop(study, space, fixed, sweep_dir)
        except StudyStop:
            self._write_results(study, sweep_dir, fp)
            raise
        self._write_results(study, sweep_dir, fp)
        c = counts(study)
        if c["crashed"]:
            hint = (
                "re-run the same command to retry them"
                if self.retry_failed
                else "hydra.sweeper.retry_failed=true retries them"
            )
            raise StudyStop(
                f"{c['crashed']} of {c['finished']} trials crashed (see {sweep_dir / RESULTS_FILE}; {hint})"
                + _crash_reasons(study),
                code=1,
            )
        return returns

    def _loop(
        self, study: optuna.Study, space: Mapping[str, BaseDistribution], fixed: list[str], sweep_dir: Path
    ) -> list[Sequence[JobReturn]]:
        returns: list[Sequence[JobReturn]] = []
        while True:
            c = counts(study)
            left = (self.n_trials - c["finished"]) if self.n_trials is not None else self.n_jobs
            if left <= 0:
                break
            batch: list[tuple[optuna.Trial, list[str]]] = []
            infeasible = duplicates = 0
            while len(batch) < min(self.n_jobs, left):
                waiting = bool(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
                if not waiting and self._exhausted(study, space):
                    break
                trial = self._ask(study, space)
                trial.set_user_attr("host", socket.gethostname())  # first: a kill from here on is recovered
                trial.set_user_attr("pid", os.getpid())
                dup = None if trial.user_attrs.get("retry_of") is not None else self._duplicate_of(study, trial)
                if dup is not None:
                    trial.set_user_attr("duplicate_of", dup)
                    study.tell(trial, state=TrialState.FAIL)
                    duplicates += 1
                    if duplicates > self.max_infeasible:
                        log.warning("%d proposals in a row repeat trials already run: stopping", duplicates)
                        break
                    continue
                overrides = self._job(trial, fixed, space)
                if overrides is None:
                    study.tell(trial, state=TrialState.PRUNED)
                    infeasible += 1
                    if infeasible > self.max_infeasible:
                        raise StudyStop(
                            f"{infeasible} infeasible trials in a row: hydra.sweeper.constraints "
                            f"{self.constraints} exclude (almost) the whole search space"
                        )
                    continue
                trial.set_user_attr("overrides", overrides)
                if trial.user_attrs.get("retry_of") is None:  # a stale summary in a fresh trial's dir is not its own
                    (sweep_dir / trial.user_attrs["subdir"] / "summary.json").unlink(missing_ok=True)
                # a retry keeps it: a job that finished before its trial was recorded (a signal between the two)
                # is reported done by resume=auto and recorded from its summary.json, not trained again
                batch.append((trial, overrides))
            if not batch:
                break
            returns.append(self._launch(study, batch))
            self._check_failures(study)
        return returns

    def _ask(self, study: optuna.Study, space: Mapping[str, BaseDistribution]) -> optuna.Trial:
        """``study.ask`` with the sampler seeded for the trial it creates (see :func:`trial_seed`)."""
        seed = self.sampler_conf.get("seed")
        if self._grid:
            if not isinstance(study.sampler, _AskTellGridSampler):
                study.sampler = make_sampler(self.sampler_conf, space)
        else:
            number = len(study.get_trials(deepcopy=False))  # the number of the trial ask() creates
            study.sampler = make_sampler(self.sampler_conf, space, trial_seed(seed, number))
        return study.ask(dict(space))

    def _exhausted(self, study: optuna.Study, space: Mapping[str, BaseDistribution]) -> bool:
        """Every point of a finite space has been run (or is infeasible), or runs in this batch: nothing new to ask."""
        if self._grid:
            if not isinstance(study.sampler, _AskTellGridSampler):
                study.sampler = make_sampler(self.sampler_conf, space)
            # the grid sampler proposes a running point again once every point has started: with n_jobs > 1 a
            # batch would end in FAIL duplicate_of trials that a one-at-a-time study does not have
            started = {
                t.system_attrs.get("grid_id")
                for t in study.get_trials(deepcopy=False)
                if t.state == TrialState.RUNNING or t.state.is_finished()
            }
            grid = cast(_AskTellGridSampler, study.sampler)
            return bool(grid.is_exhausted(study)) or started >= set(range(grid._n_min_trials))
        if not all(isinstance(d, CategoricalDistribution) for d in space.values()):
            return False
        size = math.prod(len(cast(CategoricalDistribution, d).choices) for d in space.values())
        trials = study.get_trials(deepcopy=False)
        retried = retried_numbers(trials)
        seen = {
            _params_key(t.params)
            for t in trials
            if outcome(t, retried) in (*TAKEN, "infeasible") and set(t.params) == set(space)
        }
        if len(seen) >= size:
            log.info("all %d points of the search space have been run", size)
            return True
        return False

    @staticmethod
    def _duplicate_of(study: optuna.Study, trial: optuna.Trial | optuna.trial.FrozenTrial) -> int | None:
        """The number of an earlier trial with the same parameters that ran or runs, if any."""
        key = _params_key(trial.params)
        trials = study.get_trials(deepcopy=False)
        retried = retried_numbers(trials)
        for t in trials:
            if t.number != trial.number and outcome(t, retried) in TAKEN and _params_key(t.params) == key:
                return t.number
        return None

    # ------------------------------------------------------------------ one trial
    def _job(self, trial: optuna.Trial, fixed: list[str], space: Mapping[str, BaseDistribution]) -> list[str] | None:
        """The overrides of one trial, or ``None`` when it violates a constraint."""
        assert self.config is not None
        overrides = list(fixed)
        values: dict[str, Any] = {}
        for key in space:
            v = trial.params[key]
            if key == CASE_PARAM and self.cases:
                overrides += self.cases[v]
                values.update(case_values(self.cases[v]))
                values[CASE_PARAM] = v
                continue
            overrides.append(f"{key}={_override_value(v)}")
            values[key.lstrip("+~")] = v
        for key, expr in self.derived.items():
            v = evaluate(str(expr), values)
            values[key.lstrip("+~")] = v
            overrides.append(f"{key}={_override_value(v)}")
        for expr in self.constraints:
            if not evaluate(str(expr), values):
                trial.set_user_attr("infeasible", True)
                trial.set_user_attr("violates", str(expr))
                return None
        if self.tag_runs:
            overrides += [f"++tags.optuna_study={self.study_name}", f"++tags.optuna_trial={trial.number}"]
            if CASE_PARAM in values:
                overrides.append(f"++tags.case={values[CASE_PARAM]}")
        subdir = str(trial.user_attrs.get("subdir", trial.number))
        trial.set_user_attr("subdir", subdir)
        overrides += [f"hydra.sweep.dir={_quoted(str(self.config.hydra.sweep.dir))}", f"hydra.sweep.subdir={subdir}"]
        if trial.user_attrs.get("retry_of") is not None and "resume" in self.config:
            overrides.append("resume=auto")  # psbench: a retry continues from its dir's checkpoint, if any
        return overrides

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: JobReturn | None, error: str | None) -> None:
        if ret is not None and ret.status == JobStatus.FAILED:
            error = f"{type(ret._return_value).__name__}: {ret._return_value}"
        if ret is None or error is not None:
            trial.set_user_attr("crashed", (error or "no result")[:1000])
            log.warning("trial %d crashed: %s", trial.number, error)
            study.tell(trial, state=TrialState.FAIL)
            return
        try:
            found = read_objectives(ret, self.objectives, trial.number)
        except StudyStop as stop:
            trial.set_user_attr("crashed", str(stop)[:1000])
            study.tell(trial, state=TrialState.FAIL)
            raise
        values = [found.get(k) for k in self.objectives]
        ok = all(isinstance(v, int | float) and math.isfinite(v) for v in values)
        for k, v in zip(self.objectives, values, strict=True):
            trial.set_user_attr(k, v)
        for k in ("mlflow_run_id", "status", "staleness_mean", "sim_time_s", "run_time_s", "test_error"):
            if k in found and k not in self.objectives:
                trial.set_user_attr(k, found[k])
        if found.get("diverged"):
            trial.set_user_attr("diverged", True)
            if self.on_diverged == "fail" or not ok:
                log.info("trial %d diverged: recorded as FAIL (diverged)", trial.number)
                study.tell(trial, state=TrialState.FAIL)
                return
        if not ok:
            trial.set_user_attr("crashed", f"objectives {self.objectives} not all finite numbers: {values}")
            log.warning("trial %d reported no usable objectives %s", trial.number, values)
            study.tell(trial, state=TrialState.FAIL)
            return
        study.tell(trial, [float(v) for v in values])  # type: ignore[arg-type]

    def _launch(self, study: optuna.Study, batch: list[tuple[optuna.Trial, list[str]]]) -> Sequence[JobReturn]:
        assert self.launcher is not None
        log.info("launching trials %s", [t.number for t, _ in batch])
        sigint = signal.getsignal(signal.SIGINT)  # SIG_IGN already in a background job of a script
        try:
            results = self.launcher.launch([ov for _, ov in batch], initial_job_idx=batch[0][0].number)
        except (KeyboardInterrupt, Killed) as k:  # Killed: SIGINT/SIGTERM under psbench.cli (psbench.lifecycle)
            ended = getattr(k, "job_returns", None)  # a launcher that let each job end (joblib) says how
            for (trial, ov), ret in zip(batch, ended or [None] * len(batch), strict=True):
                if ret is None or isinstance(ret._return_value, JobKilled):
                    self._interrupted(study, [(trial, ov)])
                else:  # it ended before the signal: finished, or failed for its own reason
                    with contextlib.suppress(StudyStop):  # the signal ends the study anyway
                        self._tell(study, trial, ret, None)
            raise
        except SystemExit as exc:  # psbench.cli reports bad input and exits 2 from inside the job
            if sigint is not signal.SIG_IGN and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
                # Lightning turns Ctrl-C into "ignore SIGINT, sys.exit(1)": an interrupt, not a crash
                signal.signal(signal.SIGINT, sigint)
                self._interrupted(study, batch)
                raise KeyboardInterrupt from exc
            for trial, _ in batch:
                self._tell(study, trial, None, f"job exited with status {exc.code}")
            return []
        except Exception as exc:  # a launcher that raises instead of returning a FAILED JobReturn
            # (submitit, joblib, Ray when a job's process died): a job that finished still counts
            for trial, _ in batch:
                done = self._finished_job(trial)
                self._tell(study, trial, done, None if done else f"{type(exc).__name__}: {str(exc)[:500]}")
            return []
        stop: StudyStop | None = None
        for (trial, _), ret in zip(batch, results, strict=True):
            try:
                self._tell(study, trial, ret, None)
            except StudyStop as s:
                stop = stop or s
        if stop is not None:
            raise stop
        return results

    def _finished_job(self, trial: optuna.Trial) -> JobReturn | None:
        """The result of a trial whose job wrote ``summary.json`` as finished (or diverged) — in this launch, or
        for a retry before it (:meth:`_loop` removes a fresh trial's stale one) —, for when the launcher lost its
        batch's return values."""
        assert self.sweep_dir is not None
        job_dir = self.sweep_dir / str(trial.user_attrs["subdir"])
        try:
            status = json.loads((job_dir / "summary.json").read_text()).get("status")
        except (OSError, ValueError):
            return None
        if status not in COMPLETED:
            return None
        return JobReturn(
            hydra_cfg=OmegaConf.create({"hydra": {"runtime": {"output_dir": str(job_dir)}}}), status=JobStatus.COMPLETED
        )

    @staticmethod
    def _interrupted(study: optuna.Study, batch: list[tuple[optuna.Trial, list[str]]]) -> None:
        """Ctrl-C: the batch's trials are FAIL ``interrupted``; the next run of the command reruns them."""
        for trial, _ in batch:
            trial.set_user_attr("interrupted", True)
            study.tell(trial, state=TrialState.FAIL)

    def _check_failures(self, study: optuna.Study) -> None:
        c = counts(study)
        if c["finished"] and c["crashed"] / c["finished"] > self.max_failure_rate:
            raise StudyStop(
                f"{c['crashed']} of {c['finished']} trials crashed, more than hydra.sweeper."
                f"max_failure_rate={self.max_failure_rate}: stopping the sweep (see "
                f"{self.sweep_dir / RESULTS_FILE if self.sweep_dir else 'the sweep dir'})" + _crash_reasons(study),
                code=1,
            )

    def _write_results(self, study: optuna.Study, sweep_dir: Path, fp: str) -> None:
        header = {
            "study_name": self.study_name,
            "storage": self.storage_url,
            "identity_hash": fp,
            "objectives": self.objectives,
            "directions": self.directions,
        }
        write_results(study, sweep_dir / RESULTS_FILE, self.objectives, header)
        c = counts(study)
        complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        if complete and len(self.objectives) == 1:
            log.info("best trial %d: %s = %s", study.best_trial.number, self.objectives[0], study.best_value)
        elif complete:
            log.info("Pareto front (%s): trials %s", ", ".join(self.objectives), [t.number for t in study.best_trials])
        log.info("trials: %s", {k: v for k, v in c.items() if v})
