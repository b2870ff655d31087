"""The ask → launch → tell loop of ``hydra/sweeper=psbench_optuna`` (Optuna ≥ 4).

One sweep = one Optuna study in ``storage`` (sqlite under the sweep dir by default):

1. **resume**: ``create_study(load_if_exists=True)``; a trial left RUNNING by a sweep process
   that no longer exists (killed) is marked FAIL with ``interrupted`` and its parameters are
   enqueued again; ``n_trials`` counts the trials already *finished* (complete, crashed or
   diverged), so re-running the same command only runs the remaining ones;
2. **ask** up to ``n_jobs`` trials; ``cases`` (zipped axes), ``derived`` values and
   ``constraints`` turn the sampled values into job overrides; a trial that violates a
   constraint is recorded PRUNED (``infeasible``) without running;
3. **launch** the batch through Hydra's launcher; job ``i`` runs in ``<sweep dir>/<trial number>``;
4. **tell** the objectives read from the job's ``summary.json`` (see the package docstring);
   a job that raised or exited is FAIL (``crashed``), a diverged run FAIL (``diverged``, or
   COMPLETE with ``on_diverged: complete``); more than ``max_failure_rate`` crashed aborts;
5. write ``optimization_results.yaml`` (best trial or Pareto front) in the sweep dir. For
   (test error, simulated time) the Pareto front is Rudra's set of "virtuous" configurations
   (§5.2, Figs 6–7; Table 3 lists its top five on CIFAR10).
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from hydra_plugins.psbench_optuna_sweeper._search_space import (
    CASE_PARAM,
    _override_value,
    case_overrides,
    case_values,
    evaluate,
    parse,
)

log = logging.getLogger(__name__)

SAMPLERS = ("tpe", "random", "grid", "nsgaii")
RESULTS_FILE = "optimization_results.yaml"


class _AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler, minus its ``study.stop()`` after the last grid point.

    ``Study.stop`` only works inside ``study.optimize``; this loop is ask/tell and stops by
    itself when :meth:`is_exhausted` says so.
    """

    def after_trial(self, study, trial, state, values) -> None:  # type: ignore[no-untyped-def]
        return None


def make_sampler(conf: Mapping[str, Any], space: Mapping[str, BaseDistribution]) -> optuna.samplers.BaseSampler:
    """The Optuna sampler named by ``conf["name"]`` (one of :data:`SAMPLERS`)."""
    name, seed = str(conf.get("name", "tpe")).lower(), conf.get("seed")
    if name == "tpe":
        kw: dict[str, Any] = {"seed": seed, "multivariate": bool(conf.get("multivariate", False))}
        if conf.get("n_startup_trials") is not None:
            kw["n_startup_trials"] = int(conf["n_startup_trials"])
        return optuna.samplers.TPESampler(**kw)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        grid = {}
        for key, dist in space.items():
            if not isinstance(dist, CategoricalDistribution):
                raise HydraException(f"hydra.sweeper.sampler.name=grid: {key} must be a choice or range, not {dist}")
            grid[key] = list(dist.choices)
        return _AskTellGridSampler(grid, seed=seed)
    if name == "nsgaii":
        kw = {"seed": seed}
        if conf.get("population_size") is not None:
            kw["population_size"] = int(conf["population_size"])
        return optuna.samplers.NSGAIISampler(**kw)
    raise HydraException(f"hydra.sweeper.sampler.name={name!r} is invalid: allowed one of {', '.join(SAMPLERS)}")


def make_storage(url: str | None) -> optuna.storages.BaseStorage | None:
    """RDB storage; for sqlite the parent dir is created and writers wait for the lock (30 s)."""
    if not url:
        return None
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    return optuna.storages.RDBStorage(url)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_objectives(ret: JobReturn, objectives: Sequence[str]) -> dict[str, Any]:
    """What a finished job reports: its ``summary.json``, then a mapping/number return value."""
    found: dict[str, Any] = {}
    out_dir = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir") if ret.hydra_cfg is not None else None
    if out_dir and (Path(out_dir) / "summary.json").is_file():
        found.update(json.loads((Path(out_dir) / "summary.json").read_text()))
    value = ret._return_value
    if isinstance(value, Mapping):
        found.update(value)
    elif isinstance(value, int | float) and len(objectives) == 1 and found.get(objectives[0]) is None:
        found[objectives[0]] = value
    return found


class OptunaSweeperImpl:
    """State and loop of one sweep (see the module docstring); keys as in ``config.py``."""

    def __init__(self, sampler: Mapping[str, Any], study_name: str, storage: str | None, objectives: Sequence[str],
                 direction: Any, n_trials: int | None, n_jobs: int, max_failure_rate: float, on_diverged: str,
                 params: Mapping[str, str] | None, cases: Mapping[str, Any] | None,
                 derived: Mapping[str, str] | None, constraints: Sequence[str] | None, max_infeasible: int,
                 tag_runs: bool) -> None:
        self.sampler_conf = dict(sampler or {})
        self.study_name = str(study_name)
        self.storage_url = storage
        self.objectives = [str(o) for o in (objectives or ["test_error"])]
        dirs = [direction] * len(self.objectives) if isinstance(direction, str) else list(direction)
        if len(dirs) != len(self.objectives):
            raise HydraException(f"hydra.sweeper.direction: {len(dirs)} directions for objectives {self.objectives}")
        for d in dirs:
            if d not in ("minimize", "maximize"):
                raise HydraException(f"hydra.sweeper.direction={d!r} is invalid: allowed one of minimize, maximize")
        self.directions = [str(d) for d in dirs]
        self.n_trials = n_trials
        self.n_jobs = max(1, int(n_jobs))
        self.max_failure_rate = float(max_failure_rate)
        if on_diverged not in ("fail", "complete"):
            raise HydraException(f"hydra.sweeper.on_diverged={on_diverged!r} is invalid: allowed one of fail, complete")
        self.on_diverged = on_diverged
        self.params = dict(params or {})
        self.cases = case_overrides(cases or {})
        self.derived = dict(derived or {})
        self.constraints = list(constraints or [])
        self.max_infeasible = int(max_infeasible)
        self.tag_runs = bool(tag_runs)
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # ------------------------------------------------------------------ study
    def _study(self, space: Mapping[str, BaseDistribution]) -> optuna.Study:
        sampler = make_sampler(self.sampler_conf, space)
        study = optuna.create_study(study_name=self.study_name, storage=make_storage(self.storage_url),
                                    sampler=sampler, directions=self.directions, load_if_exists=True)
        have = [d.name.lower() for d in study.directions]
        if have != self.directions:
            raise HydraException(f"study {self.study_name!r} in {self.storage_url} has directions {have}, "
                                 f"not {self.directions}: use another hydra.sweeper.study_name")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(self.objectives)
        study.set_user_attr("objectives", self.objectives)
        return study

    def _recover(self, study: optuna.Study) -> None:
        """Trials left RUNNING by a dead sweep process: FAIL ``interrupted`` and enqueue again."""
        host = socket.gethostname()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            pid = t.user_attrs.get("pid")
            if t.user_attrs.get("host") != host or pid is None or (pid != os.getpid() and _pid_alive(int(pid))):
                continue  # another live worker (or another machine) owns it
            log.warning("trial %d was interrupted (sweep pid %s is gone): running it again", t.number, pid)
            optuna.trial.Trial(study, t._trial_id).set_user_attr("interrupted", True)
            study.tell(t.number, state=TrialState.FAIL)
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.user_attrs.get("retry_of", t.number)},
                                skip_if_exists=False)

    @staticmethod
    def counts(study: optuna.Study) -> dict[str, int]:
        """Trials by outcome: complete, diverged, crashed, infeasible, interrupted, finished (the first three)."""
        c = dict.fromkeys(("complete", "diverged", "crashed", "infeasible", "interrupted", "waiting"), 0)
        for t in study.get_trials(deepcopy=False):
            if t.state == TrialState.WAITING:
                c["waiting"] += 1
            elif t.user_attrs.get("interrupted"):
                c["interrupted"] += 1
            elif t.user_attrs.get("infeasible"):
                c["infeasible"] += 1
            elif t.user_attrs.get("crashed") or (t.state == TrialState.FAIL and not t.user_attrs.get("diverged")):
                c["crashed"] += t.state.is_finished()
            elif t.user_attrs.get("diverged") and t.state == TrialState.FAIL:
                c["diverged"] += 1
            elif t.state == TrialState.COMPLETE:
                c["complete"] += 1
        c["finished"] = c["complete"] + c["diverged"] + c["crashed"]
        return c

    # ------------------------------------------------------------------ one trial
    def _job(self, trial: optuna.Trial, fixed: list[str], space: Mapping[str, BaseDistribution]) -> list[str] | None:
        """The overrides of one trial, or ``None`` when it violates a constraint."""
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
        retry = trial.user_attrs.get("retry_of")  # a killed trial's retry resumes in its dir from its checkpoint
        overrides += [f"hydra.sweep.subdir={trial.user_attrs.get('retry_of', trial.number)}"]
        overrides += ["resume=auto"] if retry is not None else []
        return overrides

    def _tell(self, study: optuna.Study, trial: optuna.Trial, ret: JobReturn | None, error: str | None) -> None:
        if ret is not None and ret.status == JobStatus.FAILED:
            error = f"{type(ret._return_value).__name__}: {ret._return_value}"
        if ret is None or error is not None:
            trial.set_user_attr("crashed", (error or "no result")[:1000])
            log.warning("trial %d crashed: %s", trial.number, error)
            study.tell(trial, state=TrialState.FAIL)
            return
        found = read_objectives(ret, self.objectives)
        values = [found.get(k) for k in self.objectives]
        ok = all(isinstance(v, int | float) and math.isfinite(v) for v in values)
        for k, v in zip(self.objectives, values, strict=True):
            trial.set_user_attr(k, v)
        for k in ("mlflow_run_id", "status", "staleness_mean", "sim_time_s", "test_error"):
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

    # ------------------------------------------------------------------ the loop
    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        space, fixed = parse(self.params, arguments)
        if self.cases:
            space[CASE_PARAM] = CategoricalDistribution(list(self.cases))
        if not space:
            raise HydraException("hydra/sweeper=psbench_optuna: empty search space "
                                 "(set hydra.sweeper.params, hydra.sweeper.cases or sweep overrides)")
        grid = str(self.sampler_conf.get("name", "tpe")).lower() == "grid"
        if self.n_trials is None and not grid:
            raise HydraException("hydra.sweeper.n_trials must be set unless sampler.name=grid")
        study = self._study(space)
        self._recover(study)
        c = self.counts(study)
        log.info("study %r (%s): %d trials finished before, target %s; space %s", self.study_name,
                 self.storage_url, c["finished"], self.n_trials or "whole grid", dict(space))
        returns: list[Sequence[JobReturn]] = []
        while True:
            c = self.counts(study)
            left = (self.n_trials - c["finished"]) if self.n_trials is not None else self.n_jobs
            if left <= 0:
                break
            batch: list[tuple[optuna.Trial, list[str]]] = []
            infeasible = 0
            while len(batch) < min(self.n_jobs, left):
                if grid and not c["waiting"] and study.sampler.is_exhausted(study):  # type: ignore[attr-defined]
                    break
                trial = study.ask(dict(space))
                c["waiting"] = max(0, c["waiting"] - 1)
                overrides = self._job(trial, fixed, space)
                if overrides is None:
                    study.tell(trial, state=TrialState.PRUNED)
                    infeasible += 1
                    if infeasible > self.max_infeasible:
                        raise HydraException(f"{infeasible} infeasible trials in a row: hydra.sweeper.constraints "
                                             f"{self.constraints} exclude (almost) the whole search space")
                    continue
                trial.set_user_attr("host", socket.gethostname())
                trial.set_user_attr("pid", os.getpid())
                trial.set_user_attr("overrides", overrides)
                subdir = str(trial.user_attrs.get("retry_of", trial.number))
                (sweep_dir / subdir / "summary.json").unlink(missing_ok=True)
                batch.append((trial, overrides))
            if not batch:
                break
            returns.append(self._launch(study, batch))
            self._check_failures(study)
        self._write_results(study, sweep_dir)
        return returns

    def _launch(self, study: optuna.Study, batch: list[tuple[optuna.Trial, list[str]]]) -> Sequence[JobReturn]:
        assert self.launcher is not None
        log.info("launching trials %s", [t.number for t, _ in batch])
        sigint = signal.getsignal(signal.SIGINT)  # SIG_IGN already in a background job of a script
        try:
            results = self.launcher.launch([ov for _, ov in batch], initial_job_idx=batch[0][0].number)
        except KeyboardInterrupt:
            self._interrupted(study, batch)
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
            for trial, _ in batch:
                self._tell(study, trial, None, f"{type(exc).__name__}: {exc}")
            return []
        for (trial, _), ret in zip(batch, results, strict=True):
            self._tell(study, trial, ret, None)
        return results

    @staticmethod
    def _interrupted(study: optuna.Study, batch: list[tuple[optuna.Trial, list[str]]]) -> None:
        """Ctrl-C: the batch's trials are FAIL ``interrupted`` and enqueued to run again on resume."""
        for trial, _ in batch:
            trial.set_user_attr("interrupted", True)
            study.tell(trial, state=TrialState.FAIL)
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})

    def _check_failures(self, study: optuna.Study) -> None:
        c = self.counts(study)
        if c["finished"] and c["crashed"] / c["finished"] > self.max_failure_rate:
            raise HydraException(f"{c['crashed']} of {c['finished']} trials crashed, more than "
                                 f"hydra.sweeper.max_failure_rate={self.max_failure_rate}: stopping the sweep")

    def _write_results(self, study: optuna.Study, sweep_dir: Path) -> None:
        """``optimization_results.yaml``: counts, best trial (one objective) or Pareto front."""
        def row(t: FrozenTrial) -> dict[str, Any]:
            return {"number": t.number, "values": dict(zip(self.objectives, t.values, strict=True)),
                    "params": dict(t.params), "overrides": t.user_attrs.get("overrides", [])}

        out: dict[str, Any] = {"study_name": self.study_name, "storage": self.storage_url,
                               "objectives": self.objectives, "directions": self.directions,
                               "counts": self.counts(study)}
        complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        if complete:
            front = sorted(study.best_trials, key=lambda t: (list(t.values), t.number))
            if len(self.objectives) == 1:
                out["best"] = row(front[0])
                log.info("best trial %d: %s = %s", front[0].number, self.objectives[0], front[0].values[0])
            else:
                out["pareto_front"] = [row(t) for t in front]
                log.info("Pareto front (%s): trials %s", ", ".join(self.objectives), [t.number for t in front])
        OmegaConf.save(OmegaConf.create(out), sweep_dir / RESULTS_FILE)
