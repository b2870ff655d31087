"""Plain progress lines for non-TTY output (logs, CI); a TTY gets Lightning's RichProgressBar."""

from __future__ import annotations

import time

import pytorch_lightning as pl


class EpochThroughput(pl.Callback):
    """Logs wall time and samples/s of the simulated training at every evaluation (per epoch)."""

    def on_train_start(self, trainer, pl_module) -> None:
        self._t0 = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.logger is None or not hasattr(self, "_t0"):
            return
        wall = time.perf_counter() - self._t0
        samples = getattr(trainer.strategy, "samples_done", 0)
        trainer.logger.log_metrics(
            {"wall_time_s": wall, "samples_per_s": samples / wall if wall > 0 else 0.0, "samples": samples},
            step=trainer.global_step,
        )


class PlainProgress(pl.Callback):
    """One line per evaluation: update, epoch, test error, simulated and wall time."""

    def on_train_start(self, trainer, pl_module) -> None:
        self._t0 = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        m = trainer.callback_metrics
        err = m.get("test_error")
        schedule = getattr(trainer.strategy, "schedule", None)  # Trainer steps may carry several updates
        total = schedule.num_updates if schedule is not None else trainer.num_training_batches
        print(
            f"update {trainer.global_step}/{total}  test_error {float(err) if err is not None else float('nan'):.4f}"
            f"  wall {time.perf_counter() - self._t0:.1f}s",
            flush=True,
        )
