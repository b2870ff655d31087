"""hydra/sweeper=psbench_optuna on a generic Hydra app (tests/sweep_app): resume, identity, objectives, failures.

Every test runs the app's real multirun in a subprocess with real sqlite Optuna storage; the same on psbench
itself is in ``test_sweeper.py``. ``SWEEP_APP_KILL_AT=k``
SIGKILLs the sweep when its k-th job starts: trials 0…k-2 are COMPLETE and trial k-1 RUNNING.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

APP = Path(__file__).resolve().parent / "sweep_app" / "app.py"


def run_app(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("SWEEP_APP_", "HYDRA_FULL_ERROR"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, str(APP), "-m", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def sweep_dirs(cwd: Path, name: str = "psbench") -> list[Path]:
    return sorted((cwd / "multirun" / "optuna").glob(f"{name}-*"))


def load(sweep: Path, name: str = "psbench") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{sweep}/optuna.db")


def attempts(sweep: Path, t: optuna.trial.FrozenTrial) -> int:
    return len((sweep / t.user_attrs["subdir"] / "attempts").read_text().split())


def param_sets(trials) -> list[tuple]:
    return [tuple(sorted(t.params.items())) for t in trials if t.state == TrialState.COMPLETE]


SAMPLER_ARGS = {
    "tpe": ("hydra.sweeper.sampler.name=tpe", "hydra.sweeper.sampler.n_startup_trials=2"),
    "random": ("hydra.sweeper.sampler.name=random",),
    "nsgaii": ("hydra.sweeper.sampler.name=nsgaii", "hydra.sweeper.sampler.population_size=2"),
    "grid": ("hydra.sweeper.sampler.name=grid",),
}


@pytest.mark.parametrize("sampler", ["tpe", "random", "nsgaii", "grid"])
def test_a_killed_sweep_rerun_with_the_same_command_continues_its_study(tmp_path, sampler):
    """Kill -9 with 2 trials COMPLETE and the 3rd RUNNING; the same command resumes: the 2 are kept,
    the 3rd runs again in its job dir, the sampler continues (no replayed parameter set)."""
    if sampler == "grid":
        args = ("x=choice(0,1,2,3)", "y=choice(0.0,0.5)", "hydra.sweeper.n_trials=null", *SAMPLER_ARGS[sampler])
    else:  # y is continuous: a repeated (x, y) can only be a replay
        args = ("x=choice(0,1,2,3,4,5)", "y=interval(0,1)", "hydra.sweeper.n_trials=6", *SAMPLER_ARGS[sampler])
    first = run_app(tmp_path, *args, env={"SWEEP_APP_KILL_AT": "3"})
    assert first.returncode == -9, first.stderr[-2000:]
    [sweep] = sweep_dirs(tmp_path)  # multirun/optuna/psbench-<hash>, not a timestamped dir
    before = load(sweep).get_trials()
    done = [t for t in before if t.state == TrialState.COMPLETE]
    [killed] = [t for t in before if t.state == TrialState.RUNNING]
    assert len(done) == 2 and killed.number == 2

    second = run_app(tmp_path, *args)
    assert second.returncode == 0, second.stderr[-3000:]
    assert sweep_dirs(tmp_path) == [sweep]
    trials = load(sweep).get_trials()
    sets = param_sets(trials)
    assert len(sets) == len(set(sets)) == (8 if sampler == "grid" else 6)
    if sampler == "grid":  # each point once
        assert set(sets) == {(("x", x), ("y", y)) for x, y in itertools.product([0, 1, 2, 3], [0.0, 0.5])}
    else:  # the sampler itself proposed nothing already run (a fixed seed per launch would replay trial 0 first)
        assert not [t.number for t in trials if t.user_attrs.get("duplicate_of") is not None]
    for t in done:  # kept, not run again
        assert trials[t.number].state == TrialState.COMPLETE and trials[t.number].values == t.values
        assert attempts(sweep, t) == 1
    assert trials[killed.number].state == TrialState.FAIL and trials[killed.number].user_attrs["interrupted"]
    [retry] = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert retry.state == TrialState.COMPLETE and retry.params == killed.params
    assert retry.user_attrs["subdir"] == killed.user_attrs["subdir"] == "2" and attempts(sweep, retry) == 2

    third = run_app(tmp_path, *args)  # nothing left to do
    assert third.returncode == 0 and len(load(sweep).get_trials()) == len(trials)


@pytest.mark.slow
def test_kills_at_any_point_never_lose_or_repeat_a_point(tmp_path):
    """SIGKILL from outside at staggered times (ask, job, tell, bookkeeping), then run to the end:
    the 8 points of the space are each COMPLETE once and nothing is left RUNNING or unretried."""
    args = (
        "x=choice(0,1,2,3)",
        "y=choice(0,1)",
        "sleep=0.15",
        "hydra.sweeper.sampler.name=random",
        "hydra.sweeper.n_trials=8",
    )
    for delay in (2.0, 2.4, 2.8, 3.2, 3.6):
        proc = subprocess.Popen(
            [sys.executable, str(APP), "-m", *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(delay)
        proc.kill()
        proc.wait()
    res = run_app(tmp_path, *args)
    assert res.returncode == 0, res.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path)
    trials = load(sweep).get_trials()
    sets = param_sets(trials)
    assert sorted(sets) == sorted({(("x", x), ("y", y)) for x, y in itertools.product(range(4), range(2))})
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    retried = {t.user_attrs.get("retry_of") for t in trials}  # killed mid-trial: run again (or its point ran)
    assert all(
        t.number in retried or tuple(sorted(t.params.items())) in sets
        for t in trials
        if t.user_attrs.get("interrupted")
    )
    assert [t for t in trials if t.user_attrs.get("interrupted")]  # the kills did land mid-trial


def test_a_grid_asked_in_batches_runs_the_trials_of_a_one_at_a_time_study(tmp_path):
    """n_jobs = 2 over a grid of 3 points: the same 3 trials (number, point) as n_jobs = 1, no FAIL duplicate_of
    (a last batch of one point used to ask again and get the running point back)."""
    studies = {}
    for n_jobs in (1, 2):
        cwd = tmp_path / f"n{n_jobs}"
        cwd.mkdir()
        res = run_app(
            cwd,
            "x=choice(0,1,2)",
            "hydra.sweeper.sampler.name=grid",
            "hydra.sweeper.n_trials=null",
            f"hydra.sweeper.n_jobs={n_jobs}",
        )
        assert res.returncode == 0, res.stderr[-3000:]
        [sweep] = sweep_dirs(cwd)
        studies[n_jobs] = [(t.number, t.state, t.params) for t in load(sweep).get_trials()]
    assert studies[2] == studies[1] and len(studies[1]) == 3
    assert {s for _, s, _ in studies[2]} == {TrialState.COMPLETE}


def test_a_finite_space_runs_each_point_once_then_stops(tmp_path):
    """Random proposals that repeat a point already run are FAIL duplicate_of and asked again;
    n_trials beyond the 9 points stops at 9, exit 0."""
    res = run_app(
        tmp_path,
        "x=choice(0,1,2)",
        "y=choice(0.0,0.5,1.0)",
        "hydra.sweeper.sampler.name=random",
        "hydra.sweeper.n_trials=12",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path)
    trials = load(sweep).get_trials()
    sets = param_sets(trials)
    assert len(sets) == len(set(sets)) == 9
    dups = [t for t in trials if t.user_attrs.get("duplicate_of") is not None]
    assert dups and all(t.state == TrialState.FAIL for t in dups)
    assert len(list(sweep.glob("*/attempts"))) == 9  # a duplicate proposal never runs


def test_a_study_is_what_its_command_says(tmp_path):
    """Another fixed override is another study (default sweep dir); into the same dir it is refused
    before any trial runs, one line naming the key; continue_study=true opts in."""
    base = ("x=choice(0,1,2,3)", "hydra.sweeper.sampler.name=random", "hydra.sweeper.n_trials=2")
    assert run_app(tmp_path, *base, "epochs=1").returncode == 0
    assert run_app(tmp_path, *base, "epochs=5").returncode == 0
    a, b = sweep_dirs(tmp_path)
    assert {load(a).user_attrs["identity"]["fixed"]["epochs"], load(b).user_attrs["identity"]["fixed"]["epochs"]} == {
        "1",
        "5",
    }

    fixed = (*base, "hydra.sweep.dir=fixed")
    assert run_app(tmp_path, *fixed, "epochs=1").returncode == 0
    study = load(tmp_path / "fixed")
    assert study.user_attrs["identity"]["space"] == {"x": "choice(0, 1, 2, 3)"}
    n = len(study.get_trials())
    res = run_app(tmp_path, *fixed, "epochs=5", "y=0.5", "hydra.sweeper.n_trials=4")
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("app: error: study 'psbench'") and "epochs: 1 -> 5; y: (unset) -> 0.5" in line
    assert "hydra.sweeper.study_name=psbench_" in line and "hydra.sweeper.continue_study=true" in line
    assert len(load(tmp_path / "fixed").get_trials()) == n and len(list((tmp_path / "fixed").glob("*/attempts"))) == n

    res = run_app(tmp_path, *fixed, "epochs=5", "hydra.sweeper.n_trials=4", "hydra.sweeper.continue_study=true")
    assert res.returncode == 0, res.stderr[-2000:]
    assert len([t for t in load(tmp_path / "fixed").get_trials() if t.state == TrialState.COMPLETE]) == 4


def test_continuing_a_study_with_other_choices_of_a_parameter_is_refused_in_one_line(tmp_path):
    """Optuna keeps one set of choices per parameter in a study, so widening ``x`` from choice(0, 1) to
    choice(0, 1, 2) with continue_study=true cannot add trials to it: one line, exit 2, no trial and no traceback
    (Optuna's ValueError used to end the sweep with one)."""
    fixed = ("hydra.sweeper.sampler.name=grid", "hydra.sweeper.n_trials=null", "hydra.sweep.dir=fixed", "epochs=1")
    assert run_app(tmp_path, *fixed, "x=choice(0,1)").returncode == 0
    n = len(load(tmp_path / "fixed").get_trials())
    res = run_app(tmp_path, *fixed, "x=choice(0,1,2)", "hydra.sweeper.continue_study=true")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "continue_study=true cannot change" in line and "x: (0, 1) -> (0, 1, 2)" in line
    assert "hydra.sweeper.study_name=psbench_" in line
    assert len(load(tmp_path / "fixed").get_trials()) == n


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("hydra.sweeper.n_trials=-1", "n_trials=-1"),
        ("hydra.sweeper.n_trials=0", "n_trials=0"),
        ("hydra.sweeper.sampler.name=bayes", "sampler.name=bayes"),
        (
            "hydra.sweeper.direction=[minimize,maximize] hydra.sweeper.objectives=[loss]",
            "direction=[minimize,maximize]",
        ),
        ("hydra.sweeper.n_jobs=0", "n_jobs=0"),
        ("hydra.sweeper.max_failure_rate=2", "max_failure_rate=2.0"),
    ],
)
def test_bad_sweeper_keys_are_refused_up_front(tmp_path, override, key):
    res = run_app(tmp_path, "x=choice(0,1)", *override.split())
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith(f"app: error: hydra.sweeper.{key} is invalid: allowed ")
    assert not (tmp_path / "multirun").exists() or not list((tmp_path / "multirun").rglob("optuna.db"))


def test_unknown_objective_stops_the_study_naming_what_the_job_reports(tmp_path):
    res = run_app(
        tmp_path, "x=choice(0,1,2,3)", "returns=mapping", "hydra.sweeper.objectives=[los]", "hydra.sweeper.n_trials=4"
    )
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line == "app: error: hydra.sweeper.objectives: trial 0 does not report 'los'; it reports loss, size"
    [sweep] = sweep_dirs(tmp_path)
    assert len(load(sweep).get_trials()) == 1


def test_a_task_returning_a_tuple_runs_a_two_objective_nsga2_study(tmp_path):
    """As with hydra-optuna-sweeper: directions only, one value per objective; `solutions` is the Pareto front."""
    res = run_app(
        tmp_path,
        "x=interval(0,6)",
        "y=interval(0,1)",
        "returns=tuple",
        "hydra.sweeper.direction=[minimize,minimize]",
        "hydra.sweeper.sampler.name=nsgaii",
        "hydra.sweeper.sampler.population_size=4",
        "hydra.sweeper.n_trials=10",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path)
    out = OmegaConf.to_container(OmegaConf.load(sweep / "optimization_results.yaml"))
    assert out["name"] == "optuna" and out["objectives"] == ["objective_0", "objective_1"]
    sols = out["solutions"]
    assert len(sols) >= 2 and all(set(s["params"]) == {"x", "y"} and len(s["values"]) == 2 for s in sols)

    def dominates(a, b):
        return all(p <= q for p, q in zip(a, b, strict=True)) and a != b

    assert not any(dominates(a["values"], b["values"]) for a in sols for b in sols)
    study = load(sweep)
    assert len([t for t in study.get_trials() if t.state == TrialState.COMPLETE]) == 10
    assert sorted(map(tuple, (s["values"] for s in sols))) == sorted(tuple(t.values) for t in study.best_trials)


def test_a_task_returning_a_mapping_is_read_by_key_with_upstream_result_keys(tmp_path):
    res = run_app(
        tmp_path,
        "x=choice(0,2,3,5)",
        "returns=mapping",
        "hydra.sweeper.objectives=[loss]",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path)
    out = OmegaConf.load(sweep / "optimization_results.yaml")
    assert out.name == "optuna" and out.best_params == {"x": 3} and out.best_value == 0.0
    assert load(sweep).best_value == 0.0


def test_crashed_trials_fail_the_sweep_and_are_retried_by_the_next_run(tmp_path):
    args = (
        "x=choice(0,1,2,3)",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.max_failure_rate=1",
    )
    first = run_app(tmp_path, *args, env={"SWEEP_APP_CRASH_X": "2"})
    assert first.returncode == 1
    [sweep] = sweep_dirs(tmp_path)
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith("app: 1 of 4 trials crashed (see ") and (sweep / "optimization_results.yaml").is_file()
    # the line says why it crashed too (the reason used to be only in optimization_results.yaml)
    assert f"{sweep.name}/optimization_results.yaml; re-run the same command to retry them): trial " in last
    assert last.endswith("RuntimeError: x=2 crashes"), last
    [crashed] = [t for t in load(sweep).get_trials() if t.state == TrialState.FAIL]
    assert crashed.params == {"x": 2} and "RuntimeError: x=2 crashes" in crashed.user_attrs["crashed"]

    again = run_app(tmp_path, *args, "hydra.sweeper.retry_failed=false")  # not retried: same count, exit 1
    assert again.returncode == 1 and "1 of 4 trials crashed" in again.stderr
    assert len(load(sweep).get_trials()) == 4

    fixed = run_app(tmp_path, *args)  # the cause is gone: the crashed trial runs again, in its job dir
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    trials = load(sweep).get_trials()
    [retry] = [t for t in trials if t.user_attrs.get("retry_of") == crashed.number]
    assert retry.state == TrialState.COMPLETE and retry.params == {"x": 2} and attempts(sweep, retry) == 2
    assert sorted(param_sets(trials)) == [(("x", x),) for x in range(4)]
    assert OmegaConf.load(sweep / "optimization_results.yaml").counts.crashed == 0
