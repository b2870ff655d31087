"""The one device rule of a simulated run, for both front doors (``trainer.accelerator`` of the CLI, the
Trainer's accelerator of the Lightning API), and how host-made tensors reach that device.

The device comes back with its index (``cuda:0``, not ``cuda``): Lightning's ``CUDAAccelerator.setup_device``
hands it to ``torch.cuda.set_device``, which refuses a CUDA device without one.
"""

from __future__ import annotations

import torch

from psbench.errors import require

#: the accelerator names a simulated run takes; ``auto`` picks cuda, then mps, then cpu
DEVICES = ("cpu", "cuda", "mps")


def available() -> dict[str, bool]:
    return {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}


def run_device(
    name: str | None, key: str = "trainer.accelerator", cpu_only: str | None = None, index: int | None = None
) -> torch.device:
    """The device ``name`` (None: cpu; auto: cuda, else mps, else cpu) names, as Lightning's accelerators take it:
    CUDA device ``index`` (None: the current one).

    ``cpu_only``: why this run must stay on the CPU (a codec, local-step learners), or None. A device this machine
    lacks, or any but the CPU when ``cpu_only`` says why, is a ConfigError on ``key``.
    """
    have = available()
    name = str(name or "cpu")
    if name == "auto":
        name = next(d for d in ("cuda", "mps", "cpu") if have[d])
    here = ", ".join(["auto", *(d for d in DEVICES if have[d])])
    require(name in have and have[name], key, name, f"one of {here} (no {name} device on this machine)")
    require(name == "cpu" or cpu_only is None, key, name, f"cpu {cpu_only}")
    if name == "cuda":
        return torch.device("cuda", torch.cuda.current_device() if index is None else index)
    return torch.device(name, 0) if name == "mps" else torch.device("cpu")


def upload(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host tensor ``t`` on ``device`` without making the host wait: a plain ``.to(cuda)`` copies and then
    synchronises the stream (every queued kernel), so a look-ahead's index and weight tensors go through pinned
    memory, non-blocking (torch keeps the pinned block until its copy has run). ``t`` itself where it already is;
    a plain copy elsewhere (MPS: Lightning too copies blocking there, pytorch/pytorch#83015)."""
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
