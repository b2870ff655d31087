"""One epoch of a schedule's update batches through a quiet CPU ``pl.Trainer`` with psbench's strategy (the block
several strategy tests share)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch


def fit_updates(
    strategy: pl.strategies.Strategy,
    module: pl.LightningModule,
    batches: torch.utils.data.Dataset,
    callbacks: list[pl.Callback] | None = None,
) -> None:
    """Fit ``module`` on ``batches`` (one item per PS update, already batched) for one epoch under ``strategy``:
    CPU, deterministic, no logger, checkpoint, progress bar, model summary or validation; ``callbacks``, if any."""
    trainer = pl.Trainer(
        strategy=strategy,
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        deterministic=True,
        callbacks=callbacks,
    )
    trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(batches, batch_size=None))
