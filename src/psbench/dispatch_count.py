"""Count what a piece of torch code dispatches and where it waits for the device: the figures that bound a GPU's speed.

On a GPU, each dispatched op is a kernel launch (a few µs of the host's time, whatever the op's size) and each
*host synchronisation* stops the host until every queued kernel has run; an executor of small PS updates is
limited by these, not by the GPU's arithmetic. Both can be counted anywhere, on the CPU too, because they are
properties of the code, not of the device::

    with DispatchCounter() as c:
        train()
    c.counts.ops, c.counts.syncs, c.counts.sync_sites.most_common(5)

:class:`DispatchCounter` is a :class:`~torch.utils._python_dispatch.TorchDispatchMode` (it sees every aten op,
forward and backward, inside ``vmap`` too) that also wraps, while it is active, the Python-level reads
``Tensor.tolist``/``Tensor.numpy`` and ``torch.cuda.synchronize``. What it counts as a **host synchronisation**
(an op that makes the host wait for the device's queue when its input lives on a GPU):

* ``aten._local_scalar_dense``: ``.item()``, ``float(t)``, ``int(t)``, ``bool(t)``, ``math.isfinite(t)``, an
  f-string of a tensor, a Python ``if`` on a tensor;
* ops whose output size depends on the values (``nonzero``, ``masked_select``, ``unique``, indexing by a boolean
  mask) and ``equal``;
* a device-to-host copy (``.cpu()``, ``.to("cpu")`` of a device tensor): counted where the source is not on the CPU
  — on a CPU run these are no-ops and are not counted;
* a host-to-device copy (``.to(device)``, ``torch.tensor(…, device=…)`` of host data) that is blocking or comes
  from unpinned memory: torch copies with ``cudaMemcpyAsync`` and then waits for the stream (from pageable memory
  the driver may wait too), so the host waits for every queued kernel — counted where the target is not the CPU;
* ``Tensor.tolist``/``Tensor.numpy`` of a device tensor; ``torch.cuda.synchronize``.

On the CPU ``tolist``/``numpy`` of a tensor cannot tell a read of the device's data from a read of host-side
bookkeeping, so they are counted apart, as ``host_reads`` (a sync on a GPU only if that tensor lives there);
``syncs`` are the would-be synchronisations that do not depend on where the tensor lives. Likewise a run on the CPU
dispatches nothing for ``.to(device)`` of a host tensor, yet on a GPU the same line is a blocking upload: the calls
``Tensor.to(<device>)``, ``torch.tensor(…, device=…)`` and ``torch.as_tensor(<host data>, device=…)`` whose target
is the CPU and that are not ``non_blocking`` are counted as ``uploads`` (a synchronisation on a GPU; on the CPU
nothing tells an upload from a deliberate ``.to("cpu")``, so ``upload_sites`` says which line made each).

Every count is kept per *phase* (``with counter.phase("update"):``, or :meth:`DispatchCounter.wrap` around a
method), the innermost phase taking it, and every synchronisation records its call site (the first frame outside
torch and this module): ``sync_sites`` says which lines to change. Counting costs Python time per op: count in a
run of its own, never in a timed one.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that read a device value back to the host (an output size or a Python scalar depends on it)
SYNC_OPS = frozenset(
    {
        "_local_scalar_dense",
        "equal",
        "nonzero",
        "masked_select",
        "_unique",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "unique_dim_consecutive",
    }
)
#: ops that take a data-dependent output size when one of their indices is a boolean mask
_MASK_INDEX_OPS = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
_COPY_OPS = frozenset({"_to_copy", "copy_", "_copy_from", "_copy_from_and_resize"})
_SKIP = (str(Path(torch.__file__).parent), str(Path(__file__)), "contextlib.py", "<frozen")
#: no phase set: the ops outside every ``phase``
OTHER = "other"


@dataclass
class Counts:
    """What a :class:`DispatchCounter` saw, per phase (``OTHER``: outside every phase)."""

    ops: Counter[str] = field(default_factory=Counter)  #: dispatched aten ops (kernel launches on a GPU)
    syncs: Counter[str] = field(default_factory=Counter)  #: host synchronisations (see the module docstring)
    host_reads: Counter[str] = field(default_factory=Counter)  #: ``tolist``/``numpy`` of CPU tensors
    by_op: Counter[str] = field(default_factory=Counter)  #: ops by aten name
    phase_ops: Counter[tuple[str, str]] = field(default_factory=Counter)  #: ops by (phase, aten name)
    sync_sites: Counter[str] = field(default_factory=Counter)  #: "file:line (function) op" of every sync
    read_sites: Counter[str] = field(default_factory=Counter)  #: "file:line (function) method" of every host read
    uploads: Counter[str] = field(default_factory=Counter)  #: would-be host-to-device copies (a CPU run's ``.to``)
    upload_sites: Counter[str] = field(default_factory=Counter)  #: "file:line (function) call" of every upload
    calls: Counter[str] = field(default_factory=Counter)  #: entries into each phase

    def total(self, what: str) -> int:
        """Sum of ``ops``, ``syncs``, ``host_reads`` or ``uploads`` over every phase."""
        return sum(getattr(self, what).values())


def _name(func: Any) -> str:
    return func._schema.name.split("::")[-1]


def _is_mask(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)


def _copy_kind(name: str, args: tuple, kwargs: dict) -> str | None:
    """``"device-to-host copy"`` or ``"host-to-device copy"`` where copy op ``name`` makes the host wait (a
    non-blocking upload from pinned memory does not), else None."""
    if name == "_to_copy":  # _to_copy(src, *, device=None: the same, non_blocking=False)
        src, dst, non_blocking = args[0], kwargs.get("device"), kwargs.get("non_blocking", False)
    else:  # copy_(dst, src, non_blocking=False), _copy_from(src, dst, non_blocking=False)
        src, to = (args[1], args[0]) if name == "copy_" else (args[0], args[1])
        dst, non_blocking = to.device, args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    if not isinstance(src, torch.Tensor) or dst is None:
        return None
    here, there = src.device.type, torch.device(dst).type
    if here == there:
        return None
    if there == "cpu":
        return "device-to-host copy"
    return "host-to-device copy" if here == "cpu" and (not non_blocking or not src.is_pinned()) else None


def _target(args: tuple, kwargs: dict) -> torch.device | None:
    """The device a ``Tensor.to``/``torch.tensor`` call names (positional or ``device=``), else None."""
    for a in (kwargs.get("device"), *args):
        if isinstance(a, torch.device | str):
            try:
                return torch.device(a)
            except RuntimeError:
                return None
    return None


def _site() -> str:
    """The first caller frame outside torch, contextlib and this module, as ``file:line (function)``."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_SKIP):
        f = f.f_back  # type: ignore[assignment]
    if f is None:
        return "?"
    path = f.f_code.co_filename
    for marker in ("/site-packages/", "/src/", os.getcwd() + os.sep):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{f.f_lineno} ({f.f_code.co_name})"


class DispatchCounter(TorchDispatchMode):
    """Counts dispatched ops and host synchronisations while active (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = Counts()
        self._phases: list[str] = [OTHER]
        self._in_read = 0  # inside a wrapped tolist/numpy: its own copy is that read's sync
        self._undo: list[Callable[[], None]] = []

    # -- phases --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count what runs inside under ``name`` (nested phases: the innermost counts)."""
        self._phases.append(name)
        self.counts.calls[name] += 1
        try:
            yield
        finally:
            self._phases.pop()

    def wrap(self, owner: Any, attr: str, name: str) -> bool:
        """Count calls of ``owner.attr`` (a class's method, or an object's) under phase ``name`` while this
        counter is active; False (nothing wrapped) if ``owner`` has no such attribute."""
        original = owner.__dict__.get(attr) if isinstance(owner, type) else None
        fn = getattr(owner, attr, None)
        if fn is None:
            return False
        counter = self

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with counter.phase(name):
                return fn(*args, **kwargs)

        setattr(owner, attr, wrapped)
        if original is not None:
            self._undo.append(lambda: setattr(owner, attr, original))
        else:
            self._undo.append(lambda: delattr(owner, attr))
        return True

    # -- counting ------------------------------------------------------------------------------
    def _sync(self, what: str) -> None:
        self.counts.syncs[self._phases[-1]] += 1
        self.counts.sync_sites[f"{_site()} {what}"] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        phase = self._phases[-1]
        self.counts.ops[phase] += 1
        self.counts.by_op[name] += 1
        self.counts.phase_ops[phase, name] += 1
        if not self._in_read:
            if name in SYNC_OPS:
                self._sync(name)
            elif name in _MASK_INDEX_OPS and len(args) > 1 and any(_is_mask(i) for i in (args[1] or ())):
                self._sync(f"{name}[mask]")
            elif name in _COPY_OPS and (kind := _copy_kind(name, args, kwargs)):
                self._sync(kind)
        return func(*args, **kwargs)

    def _read(self, method: str) -> Callable[..., Any]:
        base = getattr(torch._C.TensorBase, method)
        counter = self

        def read(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if t.device.type in ("cpu", "meta"):
                counter.counts.host_reads[counter._phases[-1]] += 1
                counter.counts.read_sites[f"{_site()} {method}"] += 1
            else:
                counter._sync(method)
            counter._in_read += 1
            try:
                return base(t, *args, **kwargs)
            finally:
                counter._in_read -= 1

        return read

    def _upload(self, what: str) -> None:
        self.counts.uploads[self._phases[-1]] += 1
        self.counts.upload_sites[f"{_site()} {what}"] += 1

    def _uploading(self, owner: Any, attr: str, host: Callable[[tuple], bool]) -> None:
        """Count calls of ``owner.attr`` whose data is on the host (``host(args)``): an upload where the target is the
        CPU and the call is blocking; a synchronisation where the target is a device and the data are Python's (torch
        copies those with its dispatcher's hooks off, so :meth:`__torch_dispatch__` does not see that copy)."""
        base = getattr(owner, attr)
        counter = self

        def call(*args: Any, **kwargs: Any) -> Any:
            target = _target(args[1:], kwargs)
            if target is not None and host(args):
                non_blocking = kwargs.get("non_blocking", next((a for a in args[1:] if isinstance(a, bool)), False))
                if target.type == "cpu":
                    if not non_blocking:
                        counter._upload(attr)
                elif not isinstance(args[0], torch.Tensor | np.ndarray):
                    counter._sync("host-to-device copy")
            return base(*args, **kwargs)

        setattr(owner, attr, call)
        if owner is torch.Tensor:
            self._undo.append(functools.partial(delattr, torch.Tensor, attr))
        else:
            self._undo.append(functools.partial(setattr, owner, attr, base))

    def __enter__(self) -> DispatchCounter:
        for method in ("tolist", "numpy"):
            setattr(torch.Tensor, method, self._read(method))
            self._undo.append(functools.partial(delattr, torch.Tensor, method))
        self._uploading(torch.Tensor, "to", lambda a: a[0].device.type == "cpu")
        for fn in ("tensor", "as_tensor"):
            self._uploading(torch, fn, lambda a: bool(a) and not isinstance(a[0], torch.Tensor))
        if torch.cuda.is_available():
            base_sync = torch.cuda.synchronize

            def synchronize(*args: Any, **kwargs: Any) -> None:
                self._sync("torch.cuda.synchronize")
                base_sync(*args, **kwargs)

            torch.cuda.synchronize = synchronize
            self._undo.append(functools.partial(setattr, torch.cuda, "synchronize", base_sync))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            while self._undo:
                self._undo.pop()()


def count(fn: Callable[[], Any]) -> tuple[Any, Counts]:
    """(``fn()``, what it dispatched and where it would wait for a device)."""
    with DispatchCounter() as c:
        out = fn()
    return out, c.counts


#: the phases :func:`count_run` counts in (the rest of the run is ``OTHER``: setup, the final evaluation, hashing)
FIT, UPDATE, GRADIENTS, EVALUATION = "fit", "update", "gradients", "evaluation"


@dataclass
class RunCounts:
    """What one psbench run dispatched (:func:`count_run`): ``updates`` PS updates, ``flushes`` look-ahead flushes."""

    updates: int
    flushes: int
    counts: Counts
    protocol: str = ""  #: the run's protocol label (RunSummary.protocol)
    staleness_mean: float | None = None  #: its ⟨σ⟩

    def top_ops(self, phase: str, k: int = 8) -> list[tuple[str, float]]:
        """The ``k`` aten ops dispatched most in ``phase``, with their count per PS update."""
        n = max(1, self.updates)
        ops = Counter({name: v for (p, name), v in self.counts.phase_ops.items() if p == phase})
        return [(name, v / n) for name, v in ops.most_common(k)]

    def per_update(self, what: str) -> dict[str, float]:
        """``ops``, ``syncs``, ``host_reads`` or ``uploads`` per PS update while training: ``gradients`` (the
        look-ahead's flushes), ``update`` (the rest of the strategy's updates: aggregation, divergence check,
        optimizer step, snapshots, logging), ``loop`` (Lightning's training loop around them), ``all`` (their sum);
        evaluations and what runs before and after the Trainer's fit are left out."""
        c, n = getattr(self.counts, what), max(1, self.updates)
        part = {"gradients": c[GRADIENTS] / n, "update": c[UPDATE] / n, "loop": c[FIT] / n}
        return {"all": sum(part.values()), **part}

    @property
    def training_syncs(self) -> int:
        """Host synchronisations while training (the strategy's updates, the look-ahead, Lightning's loop)."""
        s = self.counts.syncs
        return s[GRADIENTS] + s[UPDATE] + s[FIT]

    @property
    def syncs_per_flush(self) -> float:
        return self.training_syncs / max(1, self.flushes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "staleness_mean": self.staleness_mean,
            "updates": self.updates,
            "flushes": self.flushes,
            "ops_per_update": self.per_update("ops"),
            "syncs_per_update": self.per_update("syncs"),
            "host_reads_per_update": self.per_update("host_reads"),
            "uploads_per_update": self.per_update("uploads"),
            "syncs_per_flush": self.syncs_per_flush,
            "sync_sites": dict(self.counts.sync_sites.most_common(20)),
            "read_sites": dict(self.counts.read_sites.most_common(10)),
            "upload_sites": dict(self.counts.upload_sites.most_common(10)),
            "update_ops_per_update": dict(self.top_ops(UPDATE, 12)),
            "gradient_ops_per_update": dict(self.top_ops(GRADIENTS, 12)),
        }


def count_run(setup: Any, run_dir: Path) -> RunCounts:
    """Run ``setup`` (a :class:`psbench.assemble.RunSetup` of ``engine=sim``) with :func:`psbench.train.run` under a
    :class:`DispatchCounter`, its phases split at the Trainer's fit, the strategy's ``training_step``, the
    look-ahead's ``_flush`` and Lightning's evaluation loop."""
    import pytorch_lightning as pl
    from pytorch_lightning.loops.evaluation_loop import _EvaluationLoop

    from psbench.strategy.lookahead import Lookahead
    from psbench.strategy.ps_strategy import ParameterServerStrategy
    from psbench.train import run

    with DispatchCounter() as c:
        c.wrap(pl.Trainer, "fit", FIT)
        c.wrap(ParameterServerStrategy, "training_step", UPDATE)
        found = c.wrap(Lookahead, "_flush", GRADIENTS)
        c.wrap(_EvaluationLoop, "run", EVALUATION)
        summary = run(setup, Path(run_dir))
    assert found, "psbench.strategy.lookahead.Lookahead._flush: the look-ahead's flush to count (renamed?)"
    return RunCounts(
        int(summary.updates_done or 0),
        c.counts.calls[GRADIENTS],
        c.counts,
        str(summary.protocol or ""),
        summary.staleness_mean,
    )
