"""What a job reports (its objectives), what a trial's outcome is, and ``optimization_results.yaml``."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn
from omegaconf import OmegaConf
from optuna.trial import FrozenTrial, TrialState

RESULTS_FILE = "optimization_results.yaml"


class StudyStop(Exception):
    """Stop the sweep: one line for the user and the process's exit status (2 = bad input)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def read_objectives(ret: JobReturn, objectives: Sequence[str], number: int) -> dict[str, Any]:
    """What a finished job reports: its ``summary.json``, then its return value.

    The return value is read as hydra-optuna-sweeper reads it: a number is the single
    objective — only for a job that reports no keys (no ``summary.json``, no mapping), so a mistyped objective
    is never given a value under its wrong name —, a sequence holds one value per objective; a mapping is read
    by key. An objective the job does not report stops the study (:class:`StudyStop`) with the keys it does.
    """
    found: dict[str, Any] = {}
    out_dir = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir") if ret.hydra_cfg is not None else None
    if out_dir and (Path(out_dir) / "summary.json").is_file():
        found.update(json.loads((Path(out_dir) / "summary.json").read_text()))
    value = ret._return_value
    if isinstance(value, Mapping):
        found.update({str(k): v for k, v in value.items()})
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if len(value) != len(objectives):
            raise StudyStop(
                f"hydra.sweeper.objectives: trial {number} returned {len(value)} values for "
                f"{len(objectives)} objectives ({', '.join(objectives)})"
            )
        found.update(zip(objectives, value, strict=True))
    elif _number(value) and len(objectives) == 1 and not found:
        found[objectives[0]] = value
    missing = [k for k in objectives if k not in found]
    if missing:
        keys = sorted(k for k, v in found.items() if _number(v) or v is None)
        reports = ", ".join(keys) if keys else f"no keys (it returned {type(value).__name__})"
        raise StudyStop(
            f"hydra.sweeper.objectives: trial {number} does not report {missing[0]!r}; it reports {reports}"
        )
    return found


def outcome(t: FrozenTrial, retried: set[int]) -> str:
    """``complete | diverged | crashed | retried | interrupted | duplicate | infeasible | running | waiting``.

    ``retried``: a crashed trial that a later trial (``retry_of``) runs again.
    """
    a = t.user_attrs
    if t.state in (TrialState.WAITING, TrialState.RUNNING):
        return t.state.name.lower()
    if a.get("infeasible"):
        return "infeasible"
    if a.get("duplicate_of") is not None:
        return "duplicate"
    if a.get("interrupted"):
        return "interrupted"
    if t.state == TrialState.COMPLETE:
        return "complete"
    if a.get("diverged") and not a.get("crashed"):
        return "diverged"
    return "retried" if t.number in retried else "crashed"


def retried_numbers(trials: Sequence[FrozenTrial]) -> set[int]:
    return {int(t.user_attrs["retry_of"]) for t in trials if t.user_attrs.get("retry_of") is not None}


def counts(study: optuna.Study) -> dict[str, int]:
    """Trials by :func:`outcome`, and ``finished`` = complete + diverged + crashed (what ``n_trials`` counts)."""
    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    c = dict.fromkeys(
        ("complete", "diverged", "crashed", "retried", "interrupted", "duplicate", "infeasible", "running", "waiting"),
        0,
    )
    for t in trials:
        c[outcome(t, retried)] += 1
    c["finished"] = c["complete"] + c["diverged"] + c["crashed"]
    return c


def write_results(study: optuna.Study, path: Path, objectives: Sequence[str], header: Mapping[str, Any]) -> None:
    """``optimization_results.yaml``: counts, crashed trials, best trial (one objective) or Pareto front.

    Also hydra-optuna-sweeper's keys, for scripts written for it: ``name: optuna`` and
    ``best_params``/``best_value`` (one objective) or ``solutions`` (``params``, ``values``).
    """

    def row(t: FrozenTrial) -> dict[str, Any]:
        return {
            "number": t.number,
            "values": dict(zip(objectives, t.values, strict=True)),
            "params": dict(t.params),
            "overrides": t.user_attrs.get("overrides", []),
        }

    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    out: dict[str, Any] = {"name": "optuna", **header, "counts": counts(study)}
    crashed = [t for t in trials if outcome(t, retried) == "crashed"]
    if crashed:
        out["crashed"] = [
            {"number": t.number, "subdir": t.user_attrs.get("subdir"), "reason": t.user_attrs.get("crashed", "")}
            for t in crashed
        ]
    if any(t.state == TrialState.COMPLETE for t in trials):
        front = sorted(study.best_trials, key=lambda t: (list(t.values), t.number))
        if len(objectives) == 1:
            out["best_params"], out["best_value"] = dict(front[0].params), front[0].values[0]
            out["best"] = row(front[0])
        else:
            out["solutions"] = [{"params": dict(t.params), "values": list(t.values)} for t in front]
            out["pareto_front"] = [row(t) for t in front]
    OmegaConf.save(OmegaConf.create(out), path)
