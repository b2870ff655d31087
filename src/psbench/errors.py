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


class DataError(RuntimeError):
    """A data file is missing, unreadable or fails its checksum; the message names the file."""


def require(cond: bool, key: str, value: object, allowed: str) -> None:
    """Raise :class:`ConfigError` unless ``cond`` holds."""
    if not cond:
        raise ConfigError(key, value, allowed)
