"""Structured config of ``hydra/sweeper=psbench_optuna`` (every key under ``hydra.sweeper``)."""

# no ``from __future__ import annotations``: Hydra execs this module outside sys.modules while
# scanning for plugins, and dataclasses then cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class SamplerConf:
    """Optuna sampler: ``tpe`` | ``random`` | ``grid`` | ``nsgaii`` (multi-objective GA)."""

    name: str = "tpe"
    # the sampler's seed; a resumed study's sampler is seeded from it and the trial number
    seed: int | None = 0
    # tpe: random trials before the model kicks in (Optuna's default when null)
    n_startup_trials: int | None = None
    # tpe: model the parameters jointly (Optuna's multivariate TPE)
    multivariate: bool = False
    # nsgaii: population size (Optuna's default 50 when null)
    population_size: int | None = None


@dataclass
class PsbenchOptunaSweeperConf:
    _target_: str = "hydra_plugins.psbench_optuna_sweeper.sweeper.PsbenchOptunaSweeper"
    sampler: SamplerConf = field(default_factory=SamplerConf)
    # study name and storage: re-running the same command resumes the study. Without a
    # hydra.sweep.dir of yours the sweep dir is <...>/multirun/optuna/<study_name>-<hash of the study's identity>
    study_name: str = "psbench"
    storage: str | None = "sqlite:///${hydra.sweep.dir}/optuna.db"
    # a study whose stored identity (search space, fixed overrides, sampler, objectives) differs
    # from this command's is refused; true adds this command's trials to it anyway
    continue_study: bool = False
    # what the study minimizes/maximizes: keys of each job's summary.json or of a mapping it
    # returns; a returned number/sequence gives them in order. null: [test_error], or
    # objective_0, objective_1, ... when direction lists several (hydra-optuna-sweeper's configs)
    objectives: list[str] | None = None
    # one direction, or one per objective
    direction: Any = "minimize"
    # trials to finish (resume counts those already finished); null with grid: the whole grid
    n_trials: int | None = 20
    # trials asked and handed to the launcher at once (parallel when the launcher allows)
    n_jobs: int = 1
    # abort when more than this fraction of the finished trials crashed (diverged do not count)
    max_failure_rate: float = 0.5
    # re-running the command runs its crashed trials again (in their job dirs)
    retry_failed: bool = True
    # a diverged run (summary diverged=true): "fail" keeps it off the Pareto front, "complete" keeps it
    on_diverged: str = "fail"
    # search space: key -> Hydra sweep syntax, e.g. learners: choice(1,2,4),
    # optimizer.lr: tag(log, interval(1e-4, 1e-1))
    params: Any = None  # key -> sweep string (Any: see cases)
    # zipped axes: label -> overrides applied together, e.g. r1: [protocol=softsync, protocol.n=1, learners=30]
    cases: Any = None  # Any, not dict | None: OmegaConf cannot update a None Dict[str, Any] node with nested dicts
    # values computed from the sampled ones, e.g. batch_size: 128 // learners (μλ = const)
    derived: Any = None  # key -> expression (Any: see cases)
    # boolean expressions every trial must satisfy, e.g. "protocol.n <= learners"; others are pruned unrun
    constraints: list[str] | None = None
    # stop after this many infeasible (or already run) proposals in a row
    max_infeasible: int = 200
    # tag every job's MLflow run with the study and trial (tags.optuna_study, tags.optuna_trial)
    tag_runs: bool = True


ConfigStore.instance().store(
    group="hydra/sweeper", name="psbench_optuna", node=PsbenchOptunaSweeperConf, provider="psbench"
)
