"""Stop training at a PS update boundary when SIGINT/SIGTERM/SIGHUP arrived (:mod:`psbench.lifecycle`)."""

from __future__ import annotations

import signal

import pytorch_lightning as pl

from psbench import checkpoint, lifecycle


class StopOnSignal(pl.Callback):
    """End the fit at the first update boundary after a signal: with a checkpoint when the run has a
    :class:`~psbench.checkpoint.Checkpointer` (it writes one before the next update and raises
    :class:`~psbench.checkpoint.RunStopped`), else by raising :class:`~psbench.lifecycle.Killed` at once.

    ``Trainer.fit`` installs Lightning's own SIGTERM handler (which would end the fit with exit 0);
    at train start the psbench handler (if the CLI installed it) is put back, so the signal is held until
    the update ends.
    Run the fit inside :func:`psbench.lifecycle.deferred`.
    """

    def on_train_start(self, trainer, pl_module) -> None:
        lifecycle.reclaim()
        lifecycle.check()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._stop()

    def on_ps_update_start(self, trainer, update: int) -> None:
        """An update boundary inside a Trainer step of several updates (:mod:`psbench.strategy.chunks`)."""
        self._stop()

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._stop()

    @staticmethod
    def _stop() -> None:
        s = lifecycle.pending()
        if s is not None and not checkpoint.request_stop(signal.Signals(s).name):
            lifecycle.check()
