"""hydra/sweeper=psbench_optuna: search-space syntax, expressions, study identity, and whole psbench sweeps.

The end-to-end tests run the real ``psbench -m`` in a subprocess on the embedded digits data:
a multi-objective (n, μ, λ) study in sqlite that is killed (SIGKILL) while its 4th trial runs
and is then re-run (it must finish only the remaining trials, none of them a repeat), a study
whose trials crash (bad input) and diverge (huge α) and still completes (exit 1: one crashed),
a changed fixed override refused, an objective no job reports, ``n_trials=-1`` (issues 7, 12).
The same on a generic Hydra app, for every sampler, is in ``test_sweeper_resume.py``.
"""

from __future__ import annotations

import math

import optuna
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from hydra_plugins.psbench_optuna_sweeper._identity import default_sweep_dir, differences, fixed_values
from hydra_plugins.psbench_optuna_sweeper._search_space import case_overrides, distribution, evaluate, parse


def _dist(text: str):
    return distribution(OverridesParser.create().parse_override(text))


def test_hydra_sweep_syntax_maps_to_optuna_distributions():
    assert _dist("learners=choice(1,2,4)") == CategoricalDistribution([1, 2, 4])
    assert _dist("protocol=hardsync,async") == CategoricalDistribution(["hardsync", "async"])
    assert _dist("batch_size=range(4,20,4)") == CategoricalDistribution([4, 8, 12, 16])  # stop excluded
    assert _dist("optimizer.lr=interval(0.001,0.1)") == FloatDistribution(0.001, 0.1)
    assert _dist("optimizer.lr=tag(log, interval(0.001,0.1))") == FloatDistribution(0.001, 0.1, log=True)
    assert _dist("learners=int(interval(1,30))") == IntDistribution(1, 30)
    assert _dist("batch_size=tag(log, int(interval(4,128)))") == IntDistribution(4, 128, log=True)


def test_command_line_sweeps_join_params_and_fixed_overrides_pass_through():
    space, fixed = parse({"learners": "choice(1,2)", "seed": "choice(0,1)"}, ["learners=4,8", "seed=3", "epochs=1"])
    assert space == {"learners": CategoricalDistribution([4, 8])}
    assert fixed == ["seed=3", "epochs=1"]


def test_expressions_express_mu_lambda_constant_and_refuse_code():
    values = {"learners": 30, "protocol.n": 4}
    assert evaluate("128 // learners", values) == 4
    assert evaluate("protocol.n <= learners and learners % protocol.n == 2", values) is True
    assert evaluate("[4, 8][0] if learners > 2 else max(1, 2)", values) == 4
    for bad in ("__import__('os')", "learners.__class__", "open('x')", "lambda: 1"):
        with pytest.raises(ValueError):
            evaluate(bad, values)
    with pytest.raises(ValueError, match="unknown name 'mu'"):
        evaluate("mu * learners", values)


def test_cases_accept_mappings_lists_and_strings():
    out = case_overrides({"a": {"learners": 30, "protocol.n": 1}, "b": ["learners=2"], "c": "learners=4 seed=1"})
    assert out == {"a": ["learners=30", "protocol.n=1"], "b": ["learners=2"], "c": ["learners=4", "seed=1"]}


def test_only_a_timestamped_sweep_dir_is_replaced_by_the_studys_own():
    psbench = "${paths.root_dir}/multirun/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}"
    assert default_sweep_dir(psbench, "rp", "1a2b3c4d") == "${paths.root_dir}/multirun/optuna/rp-1a2b3c4d"
    assert default_sweep_dir("multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}", "s", "00") == "multirun/optuna/s-00"
    assert default_sweep_dir("${paths.root_dir}/sweeps/${hydra.sweeper.study_name}", "s", "00") is None


def test_identity_differences_name_each_key_old_to_new():
    assert fixed_values(["epochs=1", "++tags.scale=ci", "~seed"]) == {
        "epochs": "1",
        "tags.scale": "ci",
        "seed": "(deleted)",
    }
    old = {"fixed": {"epochs": "1", "seed": "0"}, "space": {"learners": "choice(1, 2)"}, "objectives": ["test_error"]}
    new = {"fixed": {"epochs": "5"}, "space": {"learners": "choice(1, 2, 4)"}, "objectives": ["sim_time_s"]}
    assert differences(old, new) == [
        "epochs: 1 -> 5",
        "seed: 0 -> (unset)",
        "space.learners: choice(1, 2) -> choice(1, 2, 4)",
        "objectives: [test_error] -> [sim_time_s]",
    ]
    assert differences(new, new) == []


# --------------------------------------------------------------------------- whole sweeps
KILL_DRIVER = """
import os, signal, sys
import psbench.cli as cli
orig, calls = cli.execute, [0]
def execute(cfg):
    calls[0] += 1
    if calls[0] == int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)  # no clean-up at all, as with `kill -9` or an OOM kill
    return orig(cfg)
cli.execute = execute
sys.argv = ["psbench", *sys.argv[1:]]
cli.main()
"""

PARETO = (
    "-m",
    "hparams_search=rudra_pareto",
    "hydra.sweeper.n_trials=5",
    "hydra.sweeper.sampler.population_size=4",
    "epochs=1",
    "trainer.progress=none",
)
# fast: the schedule's objectives (⟨σ⟩, simulated time), no MLflow; slow: trained digits MLPs, MLflow runs
FAST = ("hydra.sweeper.objectives=[staleness_mean,sim_time_s]", "schedule_only=true", "logger=none")


def _sweep_dir(root, name="rudra_pareto"):
    """The study's default sweep dir, ``multirun/optuna/<name>-<hash of the command>`` (one per test)."""
    [sweep] = (root / "multirun" / "optuna").glob(f"{name}-*")
    return sweep


def _study(root, name="rudra_pareto"):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{_sweep_dir(root, name)}/optuna.db")


def _kill_and_resume(root, run_psbench, *args):
    """Run the sweep, SIGKILL it while its 4th trial starts, re-run it; check the study and return it."""
    first = run_psbench(*PARETO, *args, root=root, driver=KILL_DRIVER, env={"KILL_AT": "4"})
    assert first.returncode == -9, first.stderr[-2000:]
    trials = _study(root).get_trials()
    done_first = {t.number for t in trials if t.state == TrialState.COMPLETE}
    assert len(done_first) == 3
    [killed] = [t for t in trials if t.state == TrialState.RUNNING]
    sweep = _sweep_dir(root)
    stamps = {n: (sweep / str(n) / "summary.json").stat().st_mtime_ns for n in done_first}

    second = run_psbench(*PARETO, *args, root=root)
    assert second.returncode == 0, second.stderr[-3000:]
    study = _study(root)
    trials = study.get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 5  # n_trials, counting the 3 of the first run
    sets = [tuple(sorted(t.params.items())) for t in complete]
    assert len(set(sets)) == 5  # the resumed sampler continues, it does not replay the first run's proposals
    assert {n: (sweep / str(n) / "summary.json").stat().st_mtime_ns for n in done_first} == stamps  # not re-run
    interrupted = [t for t in trials if t.user_attrs.get("interrupted")]
    assert [t.number for t in interrupted] == [killed.number] and interrupted[0].state == TrialState.FAIL
    [retry] = [t for t in trials if t.user_attrs.get("retry_of") == killed.number]
    assert retry.params == killed.params and retry.state == TrialState.COMPLETE
    assert retry.user_attrs["subdir"] == str(killed.number)  # same job dir (resume=auto can pick it up)
    assert (sweep / str(killed.number) / "summary.json").is_file()
    assert all(t.params["protocol.n"] <= t.params["learners"] for t in complete)  # the constraint
    assert all(t.user_attrs.get("infeasible") for t in trials if t.state == TrialState.PRUNED)
    # the Pareto front is reported in the sweep dir
    assert "pareto_front:" in (sweep / "optimization_results.yaml").read_text()
    assert {t.number for t in study.best_trials} <= {t.number for t in complete}
    return study, complete


def test_multi_objective_study_killed_halfway_resumes_only_the_remaining_trials(psbench_root, run_psbench):
    study, _ = _kill_and_resume(psbench_root, run_psbench, *FAST)
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
    assert study.metric_names == ["staleness_mean", "sim_time_s"]


@pytest.mark.slow
def test_test_error_vs_time_study_resumes_and_tags_mlflow_runs(psbench_root, run_psbench, mlflow_runs):
    """The same on trained digits MLPs, objectives (test error, simulated time) as in Rudra §5.2."""
    study, complete = _kill_and_resume(psbench_root, run_psbench)
    assert study.metric_names == ["test_error", "sim_time_s"]
    runs = mlflow_runs(psbench_root)
    assert len(runs) == 5 and {r["status"] for r in runs} == {"FINISHED"}  # the killed job had not started one
    assert sorted(int(r["tags"]["optuna_trial"]) for r in runs) == sorted(t.number for t in complete)
    assert {r["tags"]["optuna_study"] for r in runs} == {"rudra_pareto"}
    n = len(study.get_trials())
    third = run_psbench(*PARETO, root=psbench_root)  # nothing left to do
    assert third.returncode == 0 and len(_study(psbench_root).get_trials()) == n


def test_crashed_and_diverged_trials_are_recorded_and_the_study_continues(psbench_root, run_psbench):
    cases = (
        "{ok: {learners: 2}, bad_input: {learners: 2, protocol.n: 5}, "
        "diverges: {learners: 2, optimizer.lr: 1.0e+6}, ok4: {learners: 4}}"
    )
    res = run_psbench(
        "-m",
        "hydra/sweeper=psbench_optuna",
        "hydra.sweep.dir=sweep",
        "protocol=softsync",
        "hydra.sweeper.study_name=faults",
        "hydra.sweeper.sampler.name=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.max_failure_rate=0.5",
        f"hydra.sweeper.cases={cases}",
        "epochs=1",
        "logger=none",
        "trainer.progress=none",
        root=psbench_root,
    )
    assert res.returncode == 1, res.stderr[-3000:]  # one crashed trial: counted, non-zero exit
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("psbench: 1 of 4 trials crashed (see ")
    study = optuna.load_study(study_name="faults", storage=f"sqlite:///{psbench_root}/sweep/optuna.db")
    crashed = next(t for t in study.get_trials() if t.params["case"] == "bad_input")
    why = " ".join(str(crashed.user_attrs["crashed"]).split())[:200]
    assert f": trial {crashed.number}: {why}" in last  # why it crashed, not only in optimization_results.yaml
    by_case = {t.params["case"]: t for t in study.get_trials()}
    assert set(by_case) == {"ok", "bad_input", "diverges", "ok4"}
    assert by_case["ok"].state == by_case["ok4"].state == TrialState.COMPLETE
    assert (
        by_case["bad_input"].state == TrialState.FAIL
        and "exited with status 2" in by_case["bad_input"].user_attrs["crashed"]
    )
    assert by_case["diverges"].state == TrialState.FAIL and by_case["diverges"].user_attrs["diverged"] is True
    assert math.isfinite(by_case["ok"].values[0])


def test_max_failure_rate_stops_a_sweep_whose_trials_all_crash(psbench_root, run_psbench):
    res = run_psbench(
        "-m",
        "hydra/sweeper=psbench_optuna",
        "hydra.sweep.dir=sweep",
        "protocol=softsync",
        "hydra.sweeper.study_name=broken",
        "hydra.sweeper.n_trials=5",
        "hydra.sweeper.sampler.name=random",
        "hydra.sweeper.params={learners: 'choice(1,2)'}",
        "protocol.n=3",
        "epochs=1",
        "logger=none",
        root=psbench_root,
    )
    assert res.returncode == 1
    assert "max_failure_rate=0.5: stopping the sweep" in res.stderr.strip().splitlines()[-1]
    study = optuna.load_study(study_name="broken", storage=f"sqlite:///{psbench_root}/sweep/optuna.db")
    assert len(study.get_trials()) == 1  # stopped after the first crash (rate 1 > 0.5)


def test_a_changed_fixed_override_into_the_same_study_is_refused_before_any_trial(psbench_root, run_psbench):
    """hparams_search=rudra_pareto with epochs=1, then epochs=2 into the same sweep dir: refused, so the
    Pareto front never mixes 1- and 2-epoch trials (without a fixed dir epochs=2 is another study,
    see test_sweeper_resume.py::test_a_study_is_what_its_command_says)."""
    fixed = (*PARETO[:2], "hydra.sweeper.n_trials=1", *FAST, "hydra.sweep.dir=sweeps/pareto")
    assert run_psbench(*fixed, "epochs=1", root=psbench_root).returncode == 0
    res = run_psbench(*fixed, "epochs=2", root=psbench_root)
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("psbench: error: study 'rudra_pareto' in sqlite:///") and "(epochs: 1 -> 2)" in line
    assert "hydra.sweeper.study_name=rudra_pareto_" in line and "hydra.sweeper.continue_study=true" in line
    storage = f"sqlite:///{psbench_root}/sweeps/pareto/optuna.db"
    assert len(optuna.load_study(study_name="rudra_pareto", storage=storage).get_trials()) == 1
    assert not (psbench_root / "sweeps" / "pareto" / "1").exists()


def test_an_objective_no_job_reports_stops_the_study_with_one_line(psbench_root, run_psbench):
    """A psbench job reports summary.json's numbers: an objective that is not one is refused before any trial
    (another app's jobs are asked at the first trial: tests/test_sweeper_resume.py)."""
    res = run_psbench(
        "-m",
        "hparams_search=rudra_pareto",
        "hydra.sweeper.objectives=[staleness_mean,sim_time]",
        "schedule_only=true",
        "logger=none",
        root=psbench_root,
    )
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("psbench: error: hydra.sweeper.objectives=[staleness_mean,sim_time] is invalid: allowed ")
    assert "sim_time_s" in line.split(": ")[-1].split(", ")
    assert not list(psbench_root.rglob("optuna.db"))  # refused before the study


def test_n_trials_below_one_is_refused_before_any_study_exists(psbench_root, run_psbench):
    res = run_psbench("-m", "hparams_search=rudra_pareto", "hydra.sweeper.n_trials=-1", root=psbench_root)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "psbench: error: hydra.sweeper.n_trials=-1 is invalid: allowed an integer >= 1 "
        "(null: the whole grid, with sampler.name=grid)"
    ]
    assert not list(psbench_root.rglob("optuna.db"))


# --------------------------------------------------------------------------- every exit leaves a true record
def test_the_readme_pareto_sweep_and_refused_sweeper_keys_leave_no_running_run(
    psbench_root, run_psbench, mlflow_runs, running_runs
):
    """The parent run is made once, in the study's dir: the README's search leaves it FINISHED (it used to leave
    a soft-deleted RUNNING parent for the timestamped dir), and a refused sweeper key leaves none at all."""
    res = run_psbench(
        "-m",
        "hparams_search=rudra_pareto",
        "hydra.sweeper.n_trials=2",
        "epochs=1",
        "trainer.progress=none",
        root=psbench_root,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = mlflow_runs(psbench_root, parents=True)
    [parent] = [r for r in runs if r["tags"].get("psbench.sweep_parent") == "true"]
    assert parent["status"] == "FINISHED" and parent["tags"]["sweep_dir"] == str(_sweep_dir(psbench_root))
    assert sorted(r["status"] for r in runs) == ["FINISHED"] * 3
    for bad in ("hydra.sweeper.n_trials=0", "hydra.sweeper.sampler.name=bogus"):
        res = run_psbench("-m", "hparams_search=rudra_pareto", bad, "epochs=1", root=psbench_root)
        assert res.returncode == 2 and res.stderr.strip().splitlines()[-1].startswith(
            f"psbench: error: {bad.split('=')[0]}="
        ), res.stderr[-2000:]
    assert len(mlflow_runs(psbench_root, parents=True)) == 3
    assert running_runs(psbench_root) == []


def test_a_mistyped_objective_is_refused_before_any_trial_whatever_their_number(psbench_root, run_psbench):
    """One objective named wrong used to get the job's return value (its test error) under that name."""
    for objectives in ("[sim_time]", "[test_error,sim_time]"):
        res = run_psbench(
            "-m",
            "hydra/sweeper=psbench_optuna",
            f"hydra.sweeper.objectives={objectives}",
            "hydra.sweeper.n_trials=1",
            "hydra.sweeper.params={learners: 'choice(1,2)'}",
            "schedule_only=true",
            "logger=none",
            root=psbench_root,
        )
        assert res.returncode == 2, res.stderr[-2000:]
        [line] = res.stderr.strip().splitlines()
        assert line.startswith(f"psbench: error: hydra.sweeper.objectives={objectives} is invalid: ")
        assert "(did you mean sim_time_s?)" in line and "test_error" in line
    assert not list(psbench_root.rglob("summary.json"))  # no trial ran


def test_a_storage_that_is_not_an_optuna_database_is_refused_in_one_line(psbench_root, run_psbench):
    import sqlite3

    other = psbench_root / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("create table notes (x int)")
    for storage, words in (
        (f"sqlite:///{psbench_root}/mlflow.db", "not an MLflow tracking store"),
        (f"sqlite:///{other}", "it holds other tables: notes"),
    ):
        res = run_psbench(
            "-m",
            "hydra/sweeper=psbench_optuna",
            f"hydra.sweeper.storage={storage}",
            "hydra.sweeper.n_trials=1",
            "hydra.sweeper.params={learners: 'choice(1,2)'}",
            "hydra.sweeper.objectives=[staleness_mean]",
            "schedule_only=true",
            "logger=none",
            root=psbench_root,
        )
        assert res.returncode == 2, res.stderr[-2000:]
        [line] = res.stderr.strip().splitlines()
        assert line.startswith(f"psbench: error: hydra.sweeper.storage={storage} is invalid: ") and words in line
    with sqlite3.connect(psbench_root / "mlflow.db") as con:  # the store was not touched by Optuna
        assert "studies" not in {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


KILL_AFTER_DRIVER = """
import os, signal, sys
import psbench.cli as cli
orig, calls = cli.execute, [0]
def execute(cfg):
    calls[0] += 1
    out = orig(cfg)
    if calls[0] == int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)  # the job finished (summary.json, MLflow FINISHED); its trial is not told
    return out
cli.execute = execute
sys.argv = ["psbench", *sys.argv[1:]]
cli.main()
"""


def test_a_trial_that_finished_before_it_was_recorded_is_recorded_not_trained_again(
    psbench_root, run_psbench, mlflow_runs
):
    args = ("-m", "hparams_search=rudra_pareto", "hydra.sweeper.n_trials=2", "epochs=1", "trainer.progress=none")
    first = run_psbench(*args, root=psbench_root, driver=KILL_AFTER_DRIVER, env={"KILL_AT": "2"})
    assert first.returncode == -9, first.stderr[-2000:]
    [running] = [t for t in _study(psbench_root).get_trials() if t.state == TrialState.RUNNING]
    summary = _sweep_dir(psbench_root) / str(running.number) / "summary.json"
    stamp = summary.stat().st_mtime_ns
    second = run_psbench(*args, root=psbench_root)
    assert second.returncode == 0, second.stderr[-3000:]
    assert summary.stat().st_mtime_ns == stamp  # not trained again
    complete = [t for t in _study(psbench_root).get_trials() if t.state == TrialState.COMPLETE]
    assert len(complete) == 2 and any(t.user_attrs.get("retry_of") == running.number for t in complete)
    assert sorted(r["status"] for r in mlflow_runs(psbench_root)) == ["FINISHED", "FINISHED"]  # one run per trial


def test_overwrite_and_resources_are_not_part_of_a_studys_identity():
    """Whether a trial may replace an earlier run's files in its dir changes nothing it computes: re-running a study
    with overwrite=true is the same study."""
    from hydra_plugins.psbench_optuna_sweeper._identity import identity

    def ident(*fixed: str) -> dict:
        return identity({}, list(fixed), {}, {}, [], {"name": "tpe"}, ["test_error"], ["minimize"])

    assert ident("epochs=1") == ident("epochs=1", "overwrite=true", "resources=paper")
    assert ident("epochs=1") != ident("epochs=2")
