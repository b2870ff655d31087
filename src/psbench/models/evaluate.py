"""What a run's weights are worth and what they are: test error/loss, their hash, the saved ``state_dict``."""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path

import torch


def weights_sha256(net: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(net.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def save_final_weights(save: bool, net: torch.nn.Module, run_dir: Path, artifacts: list[str]) -> None:
    """``weights.pt`` (the final ``state_dict``) into ``artifacts`` if ``save`` (``trainer.save_weights``)."""
    if save:
        path = run_dir / "weights.pt"
        torch.save(net.state_dict(), path)
        artifacts.append(str(path))


@torch.no_grad()
def evaluate(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 128) -> tuple[float, float]:
    """(test error, test loss) over a whole data set: a tensor, or streamed images (at most their
    ``eval_batch_size`` per batch, :class:`psbench.data.imagenet.StreamedImages`). ``batch`` 128: conv nets'
    activations stay in cache (on the CPU the CIFAR CNN evaluates 1.85x and LeNet 1.4x faster than at 1,000)."""
    net.eval()
    wrong, loss = 0, 0.0
    batch = min(batch, getattr(x, "eval_batch_size", batch))
    for i in range(0, len(x), batch):
        logits = net(x[i:i + batch])
        wrong += int((logits.argmax(1) != y[i:i + batch]).sum())
        loss += float(torch.nn.functional.cross_entropy(logits, y[i:i + batch], reduction="sum"))
    net.train()
    return wrong / len(x), loss / len(x)


def quick_evaluate(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                   budget_s: float = 2.0) -> dict[str, float | None]:
    """``test_error``/``test_loss`` of the current weights for a killed run's summary, or None for both
    when a first small batch says the whole test set would take more than ``budget_s``."""
    probe = min(len(x), 64)
    t0 = time.perf_counter()
    evaluate(net, x[:probe], y[:probe])
    if probe == 0 or (time.perf_counter() - t0) * len(x) / probe > budget_s:
        return {"test_error": None, "test_loss": None}
    err, loss = evaluate(net, x, y)
    return {"test_error": err, "test_loss": loss if math.isfinite(loss) else None}
