"""Stop training at a PS update boundary when SIGINT/SIGTERM arrived (:mod:`psbench.lifecycle`)."""

from __future__ import annotations

import pytorch_lightning as pl

from psbench import lifecycle


class StopOnSignal(pl.Callback):
    """Raise :class:`~psbench.lifecycle.Killed` after the update (or evaluation batch) during which a signal came.

    ``Trainer.fit`` installs Lightning's own SIGTERM handler (which would end the fit with exit 0);
    at train start the psbench handler (if the CLI installed it) is put back, so the signal is held until
    the update ends.
    Run the fit inside :func:`psbench.lifecycle.deferred`.
    """

    def on_train_start(self, trainer, pl_module) -> None:
        lifecycle.reclaim()
        lifecycle.check()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        lifecycle.check()

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        lifecycle.check()
