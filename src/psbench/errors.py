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


class JobCrashed(RunFailure):
    """A job ended by an error nobody handled — in the user's model, loss or data code during training, or a bug:
    ``str(err)`` is its one line (where it was raised, the log file that holds the traceback); the original error
    is its ``__cause__`` (shown with ``HYDRA_FULL_ERROR=1``)."""


def _own_folders() -> tuple[str, ...]:
    """The folders whose code is not the user's: psbench's, the standard library's, installed packages'."""
    import sysconfig
    from pathlib import Path

    here = Path(__file__).resolve().parent
    paths = sysconfig.get_paths()
    folders = {str(here), str(here.parent / "hydra_plugins")}
    folders.update(str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    return tuple(sorted(folders))


def user_frame(err: BaseException) -> str | None:
    """Where in the user's own code ``err`` was raised — ``Net.forward (/home/me/proj/my_net.py:12)``, the
    innermost frame outside psbench, the standard library and installed packages, searched from the error's root
    cause outwards — or None when it was raised elsewhere."""
    import os

    own = _own_folders()
    seen: set[int] = set()
    chain: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in reversed(chain):  # the root cause first
        frames = []
        tb = e.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code, tb.tb_lineno))
            tb = tb.tb_next
        for code, line in reversed(frames):
            f = code.co_filename
            if f.startswith("<") or "site-packages" in f or "dist-packages" in f:
                continue
            path = os.path.realpath(f)
            if any(path == d or path.startswith(d + os.sep) for d in own):
                continue
            return f"{getattr(code, 'co_qualname', code.co_name)} ({f}:{line})"
    return None


def crash_line(err: BaseException) -> str:
    """The one line of an unhandled error: ``RuntimeError: boom (raised in your code: Net.forward (my_net.py:12))``."""
    where = user_frame(err)
    return failure_reason(err) + (f" (raised in your code: {where})" if where else "")
