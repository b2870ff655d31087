"""Gradients through the user's own ``training_step``: the look-ahead for any LightningModule.

:class:`UserLookahead` is :class:`~psbench.strategy.lookahead.Lookahead` (which rows to compute when, snapshots,
the memory budget, the per-update sums) with one difference: learner l's gradient is ∇ of what the module's
``training_step`` returns for l's mini-batch, evaluated at the weights θ_{ts_l} the schedule says l read
(``torch.func.functional_call`` over the module's trainable parameters; its buffers are its own). An update's
aggregate is Σ_l (w_l/c)·∇L_l(θ_{ts_l}) (Zhang Eq 2, Rudra Eqs 3–5), as in the built-in path. The mini-batches are
the user's map-style train dataset's items at the global sample stream's positions (:class:`UserUpdates`),
collated by the DataLoader's ``collate_fn`` and passed through the module's batch-transfer hooks.

A parameter that no learner's loss of an update uses (autograd gives None for it in every one of the update's
``training_step`` calls: an auxiliary head used only in validation, a branch not taken) has ``p.grad = None`` at that
update's optimizer step, as in plain training, so that torch's optimizers skip it (no weight decay, no Adam moments):
:meth:`UserLookahead.gradless`. A parameter that some of the update's learners use gets the aggregate, 0 standing
for the learners that did not (their loss does not depend on it). One module's loss graph is usually the same for
every mini-batch, so it is all or none in practice. A weight the user's code freezes during the fit
(``requires_grad_(False)``, e.g. in ``on_train_epoch_start``) is such a weight from then on: no gradient, no ``.grad``
at the step; the weights are those trainable at setup (one frozen then is not among them, even if unfrozen later).

Two speed-ups, each checked on the first gradients it would apply to, never assumed:

* concatenation — the rows of one (update, snapshot) unit share their weight w (the lr policy's w depends on σ
  only), so when the loss is a mean over samples Σ_l w·∇L_l = w·k·∇L(the k mini-batches concatenated): one call
  instead of k. On the first unit of k ≥ 2 rows both are computed; they must agree parameter by parameter to
  :data:`CHECK_RTOL` (of that parameter's gradient norm), else every unit is computed row by row (a loss summed
  over samples, BatchNorm's batch statistics or dropout fail the check);
* channels_last — a conv module without normalisation layers on the CPU (the built-in path's rule,
  :func:`~psbench.strategy.module.prefers_channels_last`): the mini-batch's 4-d float tensors and the snapshots' 4-d
  weights in channels_last, where the CPU's convolutions and pooling run 1.1–2× faster.
  Checked on the first row, on the live weights and on a channels_last snapshot: the same gradient to
  :data:`CHECK_RTOL`, and no error (a ``view`` of a channels_last activation raises), else NCHW.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from lightning_utilities.core.apply_func import apply_to_collection
from torch.func import functional_call

from psbench import lightning_seams as seams
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.ps import Schedule
from psbench.strategy.batches import UpdateBatches
from psbench.strategy.batchnorm import BatchStats
from psbench.strategy.lookahead import Lookahead
from psbench.strategy.module import channels_last_pays

#: concatenated and per-learner gradients (or NCHW and channels_last ones) agree when, for every parameter,
#: ‖a − b‖ ≤ CHECK_RTOL·‖b‖ + CHECK_RTOL·1e-3·‖b_all‖: float32 sums in another order differ by ~1e-6 of the norm;
#: a summed loss differs by a factor k, BatchNorm or dropout by ~1e-1
CHECK_RTOL = 1e-4
LOSS_ALLOWED = (
    "a loss: a scalar floating tensor that depends on the weights, or a dict with 'loss' "
    "(the mean loss of the batch, which the PS differentiates)"
)


def step_loss(out: Any) -> torch.Tensor:
    """The loss a ``training_step`` returned (a tensor, or a mapping's ``"loss"``); else :class:`ConfigError`."""
    loss = out.get("loss") if isinstance(out, Mapping) else out
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.is_floating_point() and loss.requires_grad):
        found = (
            f"{type(out).__name__}"
            if not isinstance(loss, torch.Tensor)
            else f"a tensor of shape {tuple(loss.shape)}, dtype {loss.dtype}, requires_grad={loss.requires_grad}"
        )
        raise ConfigError("training_step", f"returned {found}", LOSS_ALLOWED)
    return loss.reshape(())


@contextlib.contextmanager
def muted(module: Any) -> Iterator[None]:
    """``module.log``/``log_dict`` do nothing inside (calls that check, not train, log nothing)."""
    module.log = module.log_dict = lambda *a, **k: None
    try:
        yield
    finally:
        del module.log, module.log_dict


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 and x.is_floating_point() else x


def _agree(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    """Whether gradients ``a`` and ``b`` agree to ``CHECK_RTOL``; the norms in float64 on the CPU (MPS has none)."""

    def f64(t: torch.Tensor) -> torch.Tensor:
        return t.detach().cpu().double()

    scale = float(torch.stack([(f64(v) ** 2).sum() for v in b.values()]).sum().sqrt())
    return all(float(f64(a[k] - b[k]).norm()) <= CHECK_RTOL * (float(f64(b[k]).norm()) + 1e-3 * scale) for k in b)


class _TrainingStep(torch.nn.Module):
    """``forward`` is the module's ``training_step``, so ``functional_call`` runs it on other weights."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.m: Any = module  # a LightningModule

    def forward(self, batch: Any, batch_idx: int) -> Any:
        return self.m.training_step(batch, batch_idx)


class UserUpdates(UpdateBatches):
    """The updates of a schedule over a user's map-style dataset (metadata and weights as
    :class:`~psbench.strategy.batches.UpdateBatches`, without samples); :meth:`batch` collates the samples of
    schedule rows. ``x`` is an (N, 0) tensor: the weights' dtype and device, no data."""

    def __init__(
        self,
        schedule: Schedule,
        dataset,
        collate: Callable,
        batch_size: int,
        policy: LRPolicy,
        learners: int,
        seed: int,
        dtype: torch.dtype,
        device: torch.device,
        transfer: Callable[[Any], Any] = lambda b: b,
    ) -> None:
        super().__init__(
            schedule,
            torch.empty((len(dataset), 0), dtype=dtype, device=device),
            torch.empty(0),
            batch_size,
            policy,
            batch_size,
            learners,
            seed,
            with_samples=False,
        )
        self.dataset, self.collate, self.transfer = dataset, collate, transfer
        self._getitems = getattr(dataset, "__getitems__", None)

    def batch(self, rows, layout: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Any:
        """The rows' samples, row-major, collated as the user's DataLoader would, through the batch-transfer hooks
        (to the device); ``layout`` is applied to every tensor of the result."""
        idx = self.stream.rows(self.s.sample_start[rows], self.spg).tolist()
        items = self._getitems(idx) if self._getitems is not None else [self.dataset[i] for i in idx]
        out = self.transfer(self.collate(items))
        return out if layout is None else apply_to_collection(out, torch.Tensor, layout)


class UserLookahead(Lookahead):
    """:class:`Lookahead` whose rows are the user's ``training_step`` (see the module docstring).

    ``batching``: ``auto`` (both checks), ``loop`` (one call per row, NCHW: the reference). ``epochs``: the Trainer's
    epochs (:class:`Lookahead`: no row computed before its epoch's start hooks). ``check``: the (update, snapshot)
    unit whose concatenation was checked and the outcome, and the channels_last outcome (None: not checked yet).
    """

    def __init__(
        self,
        schedule: Schedule,
        data: UserUpdates,
        module,
        names: list[str],
        batching: str = "auto",
        per_learner: bool = False,
        budget_bytes: int | None = None,
        ahead: int | None = None,
        epochs: Sequence[int] | None = None,
    ) -> None:
        super().__init__(
            schedule,
            data,
            module,
            None,  # type: ignore[arg-type]  # no loss: training_step's
            "grouped",
            per_learner=per_learner,
            budget_bytes=budget_bytes,
            ahead=ahead,
            max_samples=None,
            epochs=epochs,
        )
        self.data: UserUpdates = data
        self.module, self.step = module, _TrainingStep(module)
        named = dict(module.named_parameters())
        self.params = {k: named[k] for k in names}  # the weights the PS updates: the module's trainable parameters
        self.keys = [f"m.{k}" for k in names]  # the wrapper's names of the trainable parameters
        pays = channels_last_pays(module) and data.x.device.type == "cpu"  # the built-in path's rule
        self.layout: bool | None = None if batching == "auto" and pays else False
        self.concat: bool | None = None if batching == "auto" else False
        if self.bn is not None:  # BatchNorm: the wrapper's names; each learner normalised alone, never concatenated
            self.bn, self.concat = BatchStats(module, "m."), False
        self.check: dict[str, Any] = {"concat": None, "channels_last": self.layout}
        self.reached: dict[int, set[str]] = {}  # update -> the weights a gradient of its computed rows reached

    def gradless(self, i: int) -> frozenset[str]:
        """The weights that none of update i's gradients reached (autograd's None in each of its rows' calls; see
        the module docstring); popped. An update none of whose rows was recorded (not computed here): none."""
        reached = self.reached.pop(i, None)
        return frozenset() if reached is None else frozenset(k for k in self.params if k not in reached)

    def state_dict(self) -> dict[str, Any]:
        """:meth:`Lookahead.state_dict`, which weights the gradients computed ahead reached, and the checks' outcomes
        (a resumed fit computes its gradients as the uninterrupted one: the same calls, the same floats)."""
        return {
            **super().state_dict(),
            "reached": {u: sorted(ks) for u, ks in self.reached.items()},
            "checks": {"layout": self.layout, "concat": self.concat, "check": self.check},
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        checks = sd.get("checks", {})
        self.layout, self.concat = checks.get("layout", self.layout), checks.get("concat", self.concat)
        self.check = checks.get("check", self.check)
        if self.layout and not self.by_row and not self.snapshots.channels_last:  # (as _check_layout chose it)
            from psbench.ps.snapshots import SnapshotStore

            self.snapshots = SnapshotStore(self.s, channels_last=True)
        super().load_state_dict(sd)
        self.reached = {int(u): set(ks) for u, ks in sd.get("reached", {}).items()}

    def weights(self) -> dict[str, torch.Tensor]:
        """The weights whose gradients this source computes: the module's trainable parameters, by name."""
        return self.params

    # -- one call of the user's training_step ---------------------------------------------------------
    def _call(
        self, rows, u: int, params: Mapping[str, torch.Tensor], scale: torch.Tensor, layout: bool, record: bool = True
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor, int]:
        """(scale·∇L of the rows' samples concatenated at ``params``, L·samples, samples); a BatchNorm module's row
        runs its layers in train mode on fresh buffers and, if ``record``, keeps their batch statistics; its layers
        in eval mode read the module's running statistics (:mod:`psbench.strategy.batchnorm`)."""
        batch = self.data.batch(rows, _channels_last if layout else None)
        # a weight the user's code froze since setup (requires_grad_(False)) gets no gradient, as in plain training
        leaves = [v.detach().requires_grad_(self.params[k].requires_grad) for k, v in params.items()]
        trainer = seams.attached_trainer(self.module)
        if trainer is not None:  # self.log infers its batch size from this batch
            seams.log_batch(trainer, batch)
        weights = dict(zip(self.keys, leaves, strict=True))
        if self.bn is None:
            loss = step_loss(functional_call(self.step, weights, (batch, u), tie_weights=self.tied))
        else:
            buffers = self.bn.fresh(training_only=True)
            with self.bn.capturing():
                loss = step_loss(functional_call(self.step, (weights, buffers), (batch, u), tie_weights=self.tied))
            if record:
                assert len(rows) == 1, "a BatchNorm module's rows are never concatenated"
                self.row_stats[int(rows[0])] = self.bn.batch_stats(buffers)
        wanted = [v for v in leaves if v.requires_grad]
        found = iter(torch.autograd.grad(loss * scale, wanted, allow_unused=True))
        grads = [next(found) if v.requires_grad else None for v in leaves]
        self.reached.setdefault(u, set()).update(k for k, g in zip(params, grads, strict=True) if g is not None)
        n = len(rows) * self.data.spg
        out = {
            # an unused weight's 0 keeps the sums' shapes; gradless() says it had none
            k: (torch.zeros_like(p) if g is None else g.contiguous())  # NHWC-strided weight gradients made flat
            for k, p, g in zip(params, leaves, grads, strict=True)
        }
        return out, loss.detach() * n, n

    @staticmethod
    def _snapshot_layout(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The weights as a channels_last :class:`~psbench.ps.snapshots.SnapshotStore` copies them."""
        return {
            k: v.detach().clone(memory_format=torch.channels_last) if v.dim() == 4 else v.detach()
            for k, v in params.items()
        }

    def _check_layout(self, row: int, u: int, params, scale) -> tuple[dict, torch.Tensor, int]:
        """Decide channels_last on the first row (module docstring); its gradient, computed NCHW."""
        ref = self._call([row], u, params, scale, False)
        try:  # the samples in channels_last, on the live weights (NCHW) and on a snapshot's (channels_last)
            with muted(self.module):
                others = [
                    self._call([row], u, p, scale, True, record=False) for p in (params, self._snapshot_layout(params))
                ]
            self.layout = all(
                _agree(g, ref[0]) and bool(torch.isclose(s, ref[1], rtol=CHECK_RTOL)) for g, s, _ in others
            )
        except RuntimeError:
            self.layout = False
        self.check["channels_last"] = self.layout
        if self.layout and not self.by_row:  # no snapshot is held yet: the first update's rows read the live weights
            from psbench.ps.snapshots import SnapshotStore

            assert len(self.snapshots) == 0
            self.snapshots = SnapshotStore(self.s, channels_last=True)
        return ref

    def _check_concat(self, rows, u: int, t: int, params, w: torch.Tensor) -> tuple[dict, torch.Tensor, int]:
        """Decide concatenation on the first unit of k ≥ 2 rows (module docstring); its gradient, row by row."""
        ref = self._rows(rows, u, params, w)
        with muted(self.module):
            one = self._call(rows, u, params, w.sum(), bool(self.layout), record=False)
        self.concat = _agree(one[0], ref[0]) and bool(torch.isclose(one[1], ref[1], rtol=CHECK_RTOL))
        self.check["concat"] = {"update": u, "snapshot": t, "rows": len(rows), "agree": self.concat}
        return ref

    def _rows(self, rows, u: int, params, w: torch.Tensor) -> tuple[dict, torch.Tensor, int]:
        """Σ_r w_r·∇L_r, one call per row."""
        total: tuple[dict, torch.Tensor, int] | None = None
        for j, r in enumerate(rows):
            g, s, n = self._call([r], u, params, w[j], bool(self.layout))
            total = (
                (g, s, n) if total is None else ({k: total[0][k] + v for k, v in g.items()}, total[1] + s, total[2] + n)
            )
        assert total is not None
        return total

    # -- the look-ahead's rows ------------------------------------------------------------------------
    def _compute(self, rows: np.ndarray, at: Callable[[int], dict[str, torch.Tensor]]) -> None:
        rows = rows[np.lexsort((self.ts[rows], self.upd[rows]))]  # by (update, snapshot); a unit's rows ascending
        if self.layout is None:
            r = int(rows[0])
            g = self._check_layout(r, int(self.upd[r]), at(int(self.ts[r])), self._weights_of([r])[0])
            self._add(r if self.by_row else int(self.upd[r]), *g)
            self._track(self.p_bytes)
            rows = rows[1:]
        if self.by_row:  # codecs: each learner's own gradient
            for r in rows.tolist():
                self._add(
                    r,
                    *self._call(
                        [r], int(self.upd[r]), at(int(self.ts[r])), self._weights_of([r])[0], bool(self.layout)
                    ),
                )
                self._track(self.p_bytes)
            return
        upd, ts = self.upd[rows], self.ts[rows]
        cuts = np.flatnonzero((np.diff(upd) != 0) | (np.diff(ts) != 0)) + 1
        w = self._weights_of(rows)
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(rows)].tolist(), strict=True):
            u, t, unit = int(upd[a]), int(ts[a]), rows[a:b].tolist()
            params = at(t)
            if len(unit) > 1 and self.concat is None:
                g = self._check_concat(unit, u, t, params, w[a:b])
            elif len(unit) > 1 and self.concat:
                g = self._call(unit, u, params, w[a:b].sum(), bool(self.layout))
            else:
                g = self._rows(unit, u, params, w[a:b])
            self._add(u, *g)
            self._track(self.p_bytes)

    def _weights_of(self, rows) -> torch.Tensor:
        """w_l/c of each row (1 with codecs, which weight the decoded gradients themselves)."""
        if self.per_learner:
            return torch.ones(len(rows), dtype=self.data.x.dtype, device=self.data.x.device)
        return self._row_weights(np.asarray(rows))
