"""A Lightning logger that keeps what the Trainer logs (the block several Lightning tests share)."""

from __future__ import annotations

from pytorch_lightning.loggers.logger import Logger


class LoggedMetrics(Logger):
    """Every ``log_metrics`` call, in order: ``(step, metrics)``."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int | None, dict]] = []

    @property
    def name(self) -> str:
        return "logged"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.logged.append((step, dict(metrics)))
