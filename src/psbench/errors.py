"""One exception type for bad input, so every entry point can print one clear line."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is outside its allowed range.

    ``key`` is the dotted config key (``protocol.n``), ``allowed`` says what is allowed.
    ``str(err)`` is the one line the CLI prints.
    """

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is invalid: allowed {allowed}")

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # a launcher's worker (joblib, submitit, Ray) pickles the job's error back to the sweep
        return type(self), (self.key, self.value, self.allowed)


class DataError(RuntimeError):
    """A data file is missing, unreadable or fails its checksum; the message names the file."""


def require(cond: bool, key: str, value: object, allowed: str) -> None:
    """Raise :class:`ConfigError` unless ``cond`` holds."""
    if not cond:
        raise ConfigError(key, value, allowed)


class RunFailure(RuntimeError):
    """A run failed for a reason the program understands (a learner died, learners did not join in time).

    The CLI prints ``str(err)`` as one line ``psbench: error: …``, marks the MLflow run FAILED with
    that line as ``failure_reason`` and exits 1.
    """


def failure_reason(err: BaseException) -> str:
    """The MLflow ``failure_reason`` of ``err``: a handled error's own first line (what the CLI printed),
    any other ``Type: first line`` (``KeyboardInterrupt`` for a bare Ctrl-C)."""
    lines = str(err).strip().splitlines()
    if isinstance(err, RunFailure | ConfigError | DataError) and lines:
        return lines[0]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
