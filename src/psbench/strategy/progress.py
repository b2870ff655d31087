"""Plain progress lines for non-TTY output (logs, CI); a TTY gets Lightning's RichProgressBar."""

from __future__ import annotations

import time

import pytorch_lightning as pl


class PlainProgress(pl.Callback):
    """One line per evaluation: update, epoch, test error, simulated and wall time."""

    def on_train_start(self, trainer, pl_module) -> None:
        self._t0 = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        m = trainer.callback_metrics
        err = m.get("test_error")
        total = trainer.num_training_batches
        print(f"update {trainer.global_step}/{total}  test_error {float(err) if err is not None else float('nan'):.4f}"
              f"  wall {time.perf_counter() - self._t0:.1f}s", flush=True)
