"""What a run's weights are worth and what they are: test error/loss, their hash, the saved ``state_dict``; the end
of a run both engines share (:func:`finish`)."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from psbench.summary import RunSummary


def weights_sha256(net: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(net.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def save_final_weights(save: bool, net: torch.nn.Module, run_dir: Path, artifacts: list[str]) -> None:
    """``weights.pt`` (the final ``state_dict``) into ``artifacts`` if ``save`` (``trainer.save_weights``)."""
    if save:
        from psbench.files import torch_save

        path = torch_save(net.state_dict(), run_dir / "weights.pt")  # whole or not at all (a full disk)
        artifacts.append(str(path))


@torch.no_grad()
def evaluate(
    net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 128, loss=None
) -> tuple[float | None, float]:
    """(test error, test loss) over a whole data set: a tensor, or streamed images (at most their
    ``eval_batch_size`` per batch, :class:`psbench.data.imagenet.StreamedImages`). ``batch`` 128: conv nets'
    activations stay in cache (on the CPU the CIFAR CNN evaluates 1.85x and LeNet 1.4x faster than at 1,000).
    ``loss``: the run's :class:`~psbench.models.loss.SampleLoss` (None: cross-entropy); the test error is None
    where the task has no classes (regression)."""
    from psbench.models.loss import CROSS_ENTROPY

    loss = CROSS_ENTROPY if loss is None else loss
    net.eval()
    wrong, total = 0, 0.0
    batch = min(batch, getattr(x, "eval_batch_size", batch))
    for i in range(0, len(x), batch):
        out = net(x[i : i + batch])
        if loss.classes:
            wrong += int((out.argmax(1) != y[i : i + batch]).sum())
        total += float(loss.total(out, y[i : i + batch]))
    net.train()
    return (wrong / len(x) if loss.classes else None), total / len(x)


def quick_evaluate(
    net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, budget_s: float = 2.0, loss=None
) -> dict[str, float | None]:
    """``test_error``/``test_loss`` of the current weights for a killed run's summary, or None for both
    when a first small batch says the whole test set would take more than ``budget_s``."""
    probe = min(len(x), 64)
    t0 = time.perf_counter()
    evaluate(net, x[:probe], y[:probe], loss=loss)
    if probe == 0 or (time.perf_counter() - t0) * len(x) / probe > budget_s:
        return {"test_error": None, "test_loss": None}
    err, total = evaluate(net, x, y, loss=loss)
    return {"test_error": err, "test_loss": total if math.isfinite(total) else None}


def finish(
    summary: RunSummary,
    net: torch.nn.Module,
    evaluation: Callable[[], tuple[float | None, float]],
    run_dir: Path,
    save: bool,
    logger=None,
    step: int = 0,
    metrics: tuple[str, ...] = (),
) -> RunSummary:
    """The end of a run, one for both engines: the PS weights, on the CPU, evaluated (``evaluation``: the engine's
    :func:`evaluate` call, or the same two numbers already computed), saved (``trainer.save_weights``) and hashed
    (:func:`weights_sha256`); ``summary`` with them — diverged where the test loss is not finite — and its final
    points (test error, loss and ``metrics`` of the summary's) logged at ``step``."""
    net.cpu()
    test_error, test_loss = evaluation()
    diverged = summary.diverged or not math.isfinite(test_loss)
    artifacts = list(summary.artifacts)
    save_final_weights(save, net, run_dir, artifacts)
    out = replace(
        summary,
        status="diverged" if diverged else "finished",
        diverged=diverged,
        divergence=summary.divergence or ("a non-finite test loss" if diverged else None),
        test_error=test_error,
        test_loss=test_loss,
        weights_sha256=weights_sha256(net),
        artifacts=artifacts,
    )
    if logger is not None:  # the series' final points; the run's totals are its summary/… metrics (cli)
        final = {"test_error": test_error, "test_loss": test_loss, **{k: getattr(out, k) for k in metrics}}
        logger.log_metrics({k: v for k, v in final.items() if v is not None}, step=max(0, step))
    return out
