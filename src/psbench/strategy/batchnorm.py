"""BatchNorm under a schedule: each learner normalises with its own mini-batch, the PS keeps the running statistics.

The semantics (stated here, tested in ``tests/test_batchnorm.py``):

* **Learners** — learner l's gradient on the snapshot θ_{ts_l} it read is taken in train mode: every BatchNorm layer
  normalises with the statistics of l's own mini-batch of μ samples, as each of Rudra's learners runs its own
  mini-batch through the network (Rudra §3, §4: a learner is a replica that computes a gradient on μ samples). So
  λ learners of μ are *not* one learner of μλ (Rudra Eq 7 holds for BatchNorm-free networks only): hardsync is the
  "ghost batch" step — the mean of λ gradients, each normalised over its own μ samples.
* **PS running statistics** — the PS owns ``running_mean``/``running_var``/``num_batches_tracked`` (the module's own
  buffers), as it owns the weights: at each applied gradient, in the order the PS sums an update's gradients
  (:func:`psbench.ps.aggregate.contribution_order`), they move towards that gradient's mini-batch statistics (the
  batch mean and unbiased variance the learner's forward computed on its snapshot) with the layer's own momentum m:
  ``ps ← (1 − m)·ps + m·batch_stat`` (``momentum=None``: m = 1/num_batches_tracked, the cumulative average), exactly
  the update ``torch.nn.BatchNorm*`` makes in train mode; ``num_batches_tracked`` counts applied gradients. A
  diverged update applies neither its gradients nor their statistics. With λ = 1 this is plain training of the
  module (a test holds async λ = 1 equal to a torch loop, buffers included).
* **A layer in eval mode during training** (``training=False``: the "frozen BatchNorm" of fine-tuning, a user's
  ``bn.eval()`` in ``on_train_epoch_start``) behaves as torch's: a learner's forward normalises with the PS's
  running statistics (the module's own buffers) and records no batch statistics, so the PS leaves that layer's
  ``running_mean``/``running_var``/``num_batches_tracked`` as they are (``BatchStats.fresh(training_only=True)``
  in :class:`~psbench.strategy.user_steps.UserLookahead`; the built-in networks train every layer). The mode is read
  when the gradient is computed, and no gradient of an epoch's updates is computed before that epoch's
  ``on_train_epoch_start`` hooks ran (the look-ahead's ``epochs``), even one that reads a snapshot of the epoch
  before: a layer put in eval mode there is in eval mode for every gradient of the epoch, as in plain Lightning.
* **Evaluation** uses the PS's running statistics (eval mode), as Lightning's validation and
  :func:`psbench.models.evaluate.evaluate` put the module.

How the statistics are captured: the forward runs on *fresh* buffers passed through
``torch.func.functional_call`` (the module's own are never touched by a learner) with every layer's momentum set
to 1 (:meth:`BatchStats.capturing`), so the fresh ``running_mean``/``running_var`` come back holding exactly the
kernel's batch mean and unbiased variance; under ``vmap`` the fresh buffers are stacked, one per learner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch.nn.modules.batchnorm import _BatchNorm

Stats = dict[str, torch.Tensor]  # buffer name -> one learner's batch mean or unbiased variance


def batchnorm_layers(net: torch.nn.Module) -> list[tuple[str, _BatchNorm]]:
    """(name, layer) of every BatchNorm layer of ``net`` (``nn.BatchNorm1d/2d/3d``, ``SyncBatchNorm``, lazy ones)."""
    return [(n, m) for n, m in net.named_modules() if isinstance(m, _BatchNorm)]


def has_batchnorm(net: torch.nn.Module) -> bool:
    """Whether ``net`` has a BatchNorm layer (the look-ahead then computes gradients learner by learner)."""
    return any(isinstance(m, _BatchNorm) for m in net.modules())


class BatchStats:
    """The BatchNorm layers of ``net`` that keep running statistics: fresh buffers to capture a learner's batch
    statistics and the PS's rule to fold them into the module's own buffers (see the module docstring).

    ``prefix``: how a ``functional_call`` on a wrapper names ``net``'s buffers (``"m."`` in
    :class:`~psbench.strategy.user_steps.UserLookahead`).
    """

    def __init__(self, net: torch.nn.Module, prefix: str = "") -> None:
        self.layers = [(f"{prefix}{n}." if n else prefix, m) for n, m in batchnorm_layers(net)]
        self.tracked = [(n, m) for n, m in self.layers if m.track_running_stats and m.running_mean is not None]

    def fresh(self, rows: int | None = None, *, training_only: bool = False) -> dict[str, torch.Tensor]:
        """Zeroed ``running_mean``/``running_var``/``num_batches_tracked`` for one learner (``rows`` None) or
        ``rows`` learners stacked (for ``vmap``, ``in_dims=0``). ``training_only``: for the layers in train mode
        only; a ``functional_call`` given these runs a layer in eval mode on its own running statistics, which
        it reads and does not update, and :meth:`batch_stats` then holds no statistics of that layer."""
        out: dict[str, torch.Tensor] = {}
        for n, m in self.tracked:
            if training_only and not m.training:
                continue
            mean, var, nbt = m.running_mean, m.running_var, m.num_batches_tracked
            assert mean is not None and var is not None and nbt is not None
            lead = () if rows is None else (rows,)
            out[n + "running_mean"] = mean.new_zeros(lead + tuple(mean.shape))
            out[n + "running_var"] = var.new_zeros(lead + tuple(var.shape))
            out[n + "num_batches_tracked"] = nbt.new_zeros(lead + tuple(nbt.shape))
        return out

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Every layer's momentum 1 inside: a forward in train mode leaves the buffers it was given holding the
        batch mean and unbiased variance (momentum·stat + (1 − momentum)·0), bit for bit the kernel's."""
        was = [(m, m.momentum) for _, m in self.tracked]
        for m, _ in was:
            m.momentum = 1.0
        try:
            yield
        finally:
            for m, v in was:
                m.momentum = v

    @staticmethod
    def batch_stats(buffers: dict[str, torch.Tensor], j: int | None = None) -> Stats:
        """One learner's statistics from the fresh buffers a forward filled (``j``: its index when stacked)."""
        return {
            k: (v if j is None else v[j]).detach()
            for k, v in buffers.items()
            if k.endswith(("running_mean", "running_var"))
        }

    @torch.no_grad()
    def apply(self, stats: Sequence[Stats]) -> None:
        """The PS's rule, gradient by gradient in ``stats``' order: num_batches_tracked += 1, then
        ``ps ← (1 − m)·ps + m·stat`` with the layer's momentum m (None: 1/num_batches_tracked); a layer without
        statistics in a gradient's (in eval mode when it was computed) is left as it is."""
        for s in stats:
            for n, m in self.tracked:
                if n + "running_mean" not in s:
                    continue
                mean, var, nbt = m.running_mean, m.running_var, m.num_batches_tracked
                assert mean is not None and var is not None and nbt is not None
                nbt.add_(1)
                f = 1.0 / float(nbt) if m.momentum is None else float(m.momentum)
                mean.mul_(1.0 - f).add_(s[n + "running_mean"], alpha=f)
                var.mul_(1.0 - f).add_(s[n + "running_var"], alpha=f)
