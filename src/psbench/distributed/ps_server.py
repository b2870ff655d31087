"""The parameter server's event loop (rank 0): aggregation, optimizer step, event log.

The PS is single-threaded: it takes one message at a time from the transport's inbox. In
free-run every protocol rule is the :class:`~psbench.ps.gate.Gate`'s, the same object the
simulator drives from its events (Rudra §3.1, Kumar et al. §3.1); one handler per message kind:

* ``HELLO``: the learner starts on the current weights (the gate hands out its samples, or STOP);
* ``PUSH``: the gradient joins the gate's accumulator; the c-th applies the update — the c
  gradients summed newest-weights-first with the learning-rate policy's weights w_l/c
  (:mod:`psbench.ps.aggregate`), set as ``p.grad`` and stepped with the same torch optimizer
  (and lr schedule) the Lightning path builds. The learner's next step is then queued behind
  every message already received, as the simulator's FIFO root serves it;
* ``PULL`` (PS-internal, queued): the learner's next step — first *ready* (STOP once all
  gradients are handed out, PARK while the SSP bound holds), then, queued once more as the
  simulator's timestamp inquiry, the *read* (PARK at the hardsync barrier, else the current
  weights, the next samples and a compute slot). After every update the parked learners the
  gate releases are queued for their read.

In ``replay`` the order comes from a :class:`~psbench.ps.Schedule` instead: learner l's k-th
gradient is the schedule row with (learner l, clock k) — its weight timestamp, samples and
w_l/c are sent with the weights (snapshots of older timestamps are kept while a row still
needs them); pushes that arrive early are buffered, and update i is applied when all its rows
are in, in the schedule's row order.

Every SSP read is checked against the invariant (all pushes with clock ≤ k−s−1 of every live
learner, and all of the reader's own, are in the weights it reads); violations are counted.
A learner whose process ends, or whose connection drops, fails the run with a
:class:`~psbench.distributed.transport.LearnerFailure` naming its rank — or, with
``tolerate_failures`` (free-run, protocols without a barrier), is dropped and its in-flight
gradient written off. No message for ``timeout_s`` while gradients are outstanding fails the
run too (never a hang).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from statistics import fmean

import numpy as np
import torch

from psbench import lifecycle
from psbench.distributed import messages as m
from psbench.distributed.transport import LearnerFailure
from psbench.lr import LRPolicy
from psbench.lr.steps import relative, scales_step
from psbench.ps import Contribution, Protocol, Schedule, StalenessStats, Update, divergence
from psbench.ps.aggregate import contribution_order, sum_in_order, update_weights
from psbench.ps.apply import apply_update
from psbench.ps.gate import PARK, STOP, Gate
from psbench.ps.local import commit_scale, uses_local_steps


@dataclass
class PSStats:
    """What the PS counted and measured (all exact counts; times in seconds from the PS start)."""

    pushes_received: int = 0
    pushes_applied: int = 0
    updates: int = 0
    updates_stepped: int = 0
    reads: int = 0
    pulls_skipped: int = 0
    parks: int = 0
    ssp_reads: int = 0
    ssp_violations: int = 0
    ssp_max_lag: int = 0
    compute_s: float = 0.0
    run_time_s: float = 0.0
    lost_gradients: int = 0
    failed_learners: list[int] = field(default_factory=list)
    staleness: StalenessStats = field(default_factory=StalenessStats)


@dataclass
class _Pending:
    contrib: Contribution
    grad: torch.Tensor
    loss_sum: float
    samples: int


_READY, _READ = 0, 1  # what a learner's queued PULL stands for (free-run)


class ParameterServer:
    """Rank 0 of ``engine=dist``.

    Args:
        net, optimizer, scheduler: the master model and the optimizer (+ optional per-update lr
            scheduler) built exactly as the Lightning path builds them.
        protocol, policy, batch_size: the simulator's protocol, lr policy and μ.
        samples_per_gradient: μ·H, the stream positions one gradient consumes.
        total_gradients: gradients to hand out in free-run (rounded down to a multiple of c).
        transport: a :class:`~psbench.distributed.transport.GlooTransport` (or a test double).
        replay: a schedule to re-execute, or None for free-run.
    """

    def __init__(
        self,
        net: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler,
        protocol: Protocol,
        policy: LRPolicy,
        batch_size: int,
        samples_per_gradient: int,
        total_gradients: int,
        transport,
        replay: Schedule | None = None,
        timeout_s: float = 60.0,
        tolerate_failures: bool = False,
        gradient_clip_val: float | None = None,
        divergence_factor: float | None = None,
        logger=None,
        log_every: int = 10,
        poll_s: float = 0.2,
        wire=None,
        num_train: int | None = None,
    ) -> None:
        self.net, self.opt, self.sched = net, optimizer, scheduler
        self.params = list(net.parameters())
        self.protocol, self.policy, self.mu, self.spg = protocol, policy, batch_size, samples_per_gradient
        self.by_step = scales_step(optimizer, policy.name)  # an adaptive optimizer: the policy scales its lr
        self.lam, self.c = protocol.learners, protocol.gradients_per_update
        self.barrier, self.bound = protocol.barrier, protocol.bound
        self.transport, self.replay = transport, replay
        self.timeout_s, self.tolerate, self.clip = timeout_s, tolerate_failures, gradient_clip_val
        self.logger, self.log_every, self.poll_s = logger, max(1, log_every), poll_s
        self.num_train = num_train  # N: the logged ``epoch`` is samples applied / N
        self.wire = wire  # compressed pushes (compression/wire.py): decoded here, weighted after decoding
        self.stats = PSStats()
        self.gate = Gate(protocol, total_gradients, samples_per_gradient, self.stats.staleness)
        self.local = uses_local_steps(protocol.name)  # pushes are commits of H local steps (ps.local)
        lam = self.lam
        self.included = [0] * lam  # each learner's gradients in the weights (the SSP read check)
        self.held_ts = [-1] * lam
        self.next_step = [_READY] * lam
        self.done: set[int] = set()
        self.acc: list[_Pending] = []  # the gradients of the gate's accumulator
        self.updates_log: list[Update] = []
        self.diverged_at: int | None = None
        self.divergence: str | None = None  # why (psbench.ps.divergence)
        self.divergence_factor = divergence_factor
        self.loss_rule = divergence.LossRule(divergence_factor)
        self.recent: deque[float] = deque(maxlen=100)
        self._flat: torch.Tensor | None = None
        self.t0 = time.time()
        self.was_parked = [False] * lam
        #: per push (learner, clock) -> (compute seconds, end of compute, its grant waited parked)
        self.row_timing: dict[tuple[int, int], tuple[float, float, bool]] = {}
        self.push_s: list[float] = []  # PS time handling each push (excluding the update)
        self.grant_s: list[tuple[float, bool]] = []  # PS time of each grant, and whether weights were sent
        self.apply_s: list[float] = []  # PS time of each update
        if replay is not None:
            self._init_replay(replay)

    # ------------------------------------------------------------------ replay tables
    def _init_replay(self, s: Schedule) -> None:
        require_learners = int(s.learner.max()) + 1 if s.num_gradients else 0
        if require_learners > self.lam:
            raise ValueError(f"the schedule has {require_learners} learners, the run {self.lam}")
        order = np.lexsort((s.clock, s.learner))
        self.rows_of = [order[s.learner[order] == l].tolist() for l in range(self.lam)]
        self.next_k = [0] * self.lam
        self.row_weight = np.zeros(s.num_gradients, dtype=np.float64)
        for i in range(s.num_updates):
            rows = s.rows(i)
            sigma = [i - t for t in s.ts[rows].tolist()]
            self.row_weight[rows] = update_weights(self._scales(sigma)).double().numpy()
        self.remaining_reads = np.bincount(s.ts, minlength=s.num_updates + 1)
        self.snapshots: dict[int, torch.Tensor] = {}
        self.buffer: dict[int, _Pending] = {}
        self.next_update = 0
        self.waiting: list[int] = []  # learners whose next row reads weights not applied yet

    @property
    def root_ts(self) -> int:
        """Updates applied (the weight timestamp)."""
        return self.gate.root_ts

    def _live(self) -> list[int]:
        return [l for l in range(self.lam) if self.gate.live[l]]

    # ------------------------------------------------------------------ the loop
    def run(self) -> PSStats:
        self.t0 = time.time()
        last_msg = last_check = time.monotonic()
        tr = self.transport
        while not self._finished():
            lifecycle.check()  # a signal ends the run here, between messages (psbench.lifecycle)
            msg = tr.get(self.poll_s)
            now = time.monotonic()
            if now - last_check >= self.poll_s:
                last_check = now
                try:
                    tr.check([l for l in self._live() if l not in self.done])
                except LearnerFailure as f:
                    self._failure(f)
            if msg is None:
                if now - last_msg > self.timeout_s:
                    waiting = [l for l in self._live() if self.gate.computing[l] or l not in self.done]
                    self._failure(
                        LearnerFailure(
                            waiting[0] if waiting else -1,
                            f"no message from learner ranks {[l + 1 for l in waiting]} for {self.timeout_s:g} s",
                        )
                    )
                continue
            last_msg = now
            l = msg.learner
            if not self.gate.live[l]:
                continue  # one already written off
            if msg.error is not None:
                if l not in self.done:  # else a stopped learner disconnecting
                    self._failure(self._explain(l, msg.error))
                continue
            kind = msg.push.kind
            if kind == m.PUSH:
                self._on_push(l, msg.push, msg.grad)
                self.transport.defer_pull(l)  # its next step waits behind what is already queued
            elif self.replay is not None:  # HELLO or the deferred PULL
                self._ready_replay(l)
            elif kind == m.HELLO:
                self._start(l)
            else:
                self._on_pull(l)
        if self.gate.finish() is not None:  # tolerated failures can leave fewer than c (as the simulator's trees)
            group, self.acc = self.acc, []
            self._apply(group, self.gate.root_ts - 1, prescaled=False)
        self.stats.run_time_s = time.time() - self.t0
        return self.stats

    def _finished(self) -> bool:
        if any(l not in self.done for l in self._live()):
            return False
        return self.replay is None or self.next_update >= self.replay.num_updates or self.diverged_at is not None

    def _explain(self, l: int, error: str) -> LearnerFailure:
        """A learner's connection dropped: name its exit code (and its log) when its process is known to have ended
        (a learner that raised takes a few seconds to print its traceback and exit)."""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                self.transport.check([l])
            except LearnerFailure as f:
                return f
            time.sleep(0.05)
        return LearnerFailure(l, f"learner rank {l + 1} lost its connection: {error}")

    def _failure(self, f: LearnerFailure) -> None:
        l = f.learner
        if not (self.tolerate and self.replay is None and not self.barrier and 0 <= l < self.lam):
            raise f
        self.stats.failed_learners.append(l + 1)
        # its samples are skipped; a last partial update applies what the others leave
        self.stats.lost_gradients += self.gate.drop(l)
        if not any(self.gate.live):
            raise LearnerFailure(l, f"{f} (no learner left)")
        self._release()

    # ------------------------------------------------------------------ free-run: the gate decides
    def _on_pull(self, l: int) -> None:
        """Learner ``l``'s queued step: *ready* (the simulator's READY), then *read* (its PULL_ROOT)."""
        gate = self.gate
        if self.next_step[l] == _READY:
            d = gate.ready(l)
            if d == STOP:
                self._stop_all(l)
            elif d == PARK:
                self._park(l)
            else:
                self.next_step[l] = _READ
                self.transport.defer_pull(l)
        elif gate.read(l) == PARK:
            self._park(l)
        else:
            self._start(l)

    def _start(self, l: int) -> None:
        """Grant the current weights and the next samples, or STOP once all gradients are handed out."""
        ts = self.gate.root_ts
        s0 = self.gate.start(l, ts)
        if s0 < 0:
            self._stop_all(l)
        else:
            self._grant(l, ts, self._weights(), s0, 1.0, -1)

    def _stop_all(self, l: int) -> None:
        """All gradients are handed out: stop ``l`` and every learner parked for good."""
        for r in [l, *self.gate.stranded()]:
            self._stop(r)

    def _park(self, l: int) -> None:
        self.was_parked[l] = True
        self.stats.parks += 1

    def _release(self) -> None:
        """After an update (or a drop): queue the read of every learner the gate releases."""
        if self.replay is not None:
            waiting, self.waiting = self.waiting, []
            for l in waiting:
                self._ready_replay(l)
            return
        for l in self.gate.release():
            self.next_step[l] = _READ
            self.transport.defer_pull(l)

    # ------------------------------------------------------------------ replay: the schedule decides

    def _ready_replay(self, l: int) -> None:
        rows = self.rows_of[l]
        k = self.next_k[l]
        if k >= len(rows) or self.diverged_at is not None:
            self._stop(l)
            return
        r = rows[k]
        s = self.replay
        need = int(s.ts[r])  # type: ignore[union-attr]
        if need > self.root_ts:
            self.waiting.append(l)
            self._park(l)
            return
        flat = self._weights() if need == self.root_ts else self.snapshots[need]
        weight = 1.0 if self.wire is not None else float(self.row_weight[r])  # a codec sees the raw gradient
        if not self._grant(l, need, flat, int(s.sample_start[r]), weight, r):  # type: ignore[union-attr]
            return
        self.next_k[l] += 1
        self.remaining_reads[need] -= 1
        if need < self.root_ts and self.remaining_reads[need] == 0:
            del self.snapshots[need]

    def _send(self, l: int, header: torch.Tensor, payload: torch.Tensor | None = None) -> bool:
        """Send to learner ``l``; a dead peer is a learner failure (False when it is tolerated)."""
        try:
            self.transport.send(l, header, payload)
        except RuntimeError as e:
            self._failure(self._explain(l, str(e)))
            return False
        return True

    def _stop(self, l: int) -> None:
        if self._send(l, m.encode(m.STOP)):
            self.done.add(l)

    def _grant(self, l: int, ts: int, flat: torch.Tensor, sample_start: int, weight: float, row: int) -> bool:
        t_in = time.perf_counter()
        st = self.stats
        if self.bound is not None:  # SSP invariant on every read, from what the weights include
            k = self.gate.pushed[l]
            lag = k - min(self.included[j] for j in self._live())
            st.ssp_reads += 1
            st.ssp_max_lag = max(st.ssp_max_lag, lag)
            if self.included[l] != k or lag > self.bound or ts != self.root_ts:
                st.ssp_violations += 1
        has = self.held_ts[l] != ts
        lr = self.opt.param_groups[0]["lr"]
        if not self._send(l, m.encode(m.COMPUTE, ts, sample_start, weight, has, row, lr), flat if has else None):
            return False
        self.held_ts[l] = ts
        st.reads += 1
        st.pulls_skipped += not has
        self.grant_s.append((time.perf_counter() - t_in, has))
        return True

    def _weights(self) -> torch.Tensor:
        if self._flat is None:
            self._flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        return self._flat

    # ------------------------------------------------------------------ pushes and updates
    def _on_push(self, l: int, p: m.Push, grad: torch.Tensor) -> None:
        st = self.stats
        if p.clock != self.gate.pushed[l]:
            raise RuntimeError(f"learner rank {l + 1} pushed clock {p.clock}, the PS expected {self.gate.pushed[l]}")
        st.pushes_received += 1
        if self.wire is not None:
            grad = self.wire.decode(grad)
            if self.replay is not None:  # as the simulator's pipeline: Σ_l (w_l/c)·decode(compress_l(g_l))
                grad = grad * float(self.row_weight[p.row])
        st.compute_s += p.t_end - p.t_start
        t_in = time.perf_counter()
        self.row_timing[(l, p.clock)] = (p.t_end - p.t_start, p.t_end - self.t0, self.was_parked[l])
        self.was_parked[l] = False
        contrib = Contribution(l, p.ts, p.clock, p.sample_start, p.t_start - self.t0, time.time() - self.t0)
        pending = _Pending(contrib, grad, p.loss_sum, p.samples)
        if self.replay is None:
            self.acc.append(pending)
            applied = self.gate.push(contrib) is not None
            self.push_s.append(time.perf_counter() - t_in)
            if applied:
                group, self.acc = self.acc, []
                self._apply(group, self.gate.root_ts - 1, prescaled=False)
            self.next_step[l] = _READY
            return
        s = self.replay
        if int(s.learner[p.row]) != l or int(s.clock[p.row]) != p.clock or int(s.ts[p.row]) != p.ts:
            raise RuntimeError(f"learner rank {l + 1} pushed a gradient that is not schedule row {p.row}")
        self.buffer[p.row] = pending
        self.gate.clock(l)
        self.push_s.append(time.perf_counter() - t_in)
        while self.next_update < s.num_updates:
            rows = range(int(s.offsets[self.next_update]), int(s.offsets[self.next_update + 1]))
            if any(r not in self.buffer for r in rows):
                break
            self.next_update += 1
            group = [self.buffer.pop(r) for r in rows]
            i = self.gate.root_ts
            self.gate.apply([e.contrib for e in group])
            self._apply(group, i, prescaled=True)

    def _apply(self, group: list[_Pending], i: int, prescaled: bool) -> None:
        """Step the weights with update ``i`` (the gate has recorded it and advanced its timestamp)."""
        t_in = time.perf_counter()
        st = self.stats
        ts = [e.contrib.ts for e in group]
        order = contribution_order(ts)
        grads = [e.grad for e in group]
        if not prescaled:
            w = update_weights(self._scales([i - t for t in ts]))
            grads = [g * w[j] for j, g in enumerate(grads)]
        if self.local:  # the commit scale s: agn 1/H, dynsgd 1/(σ+1), downpour and aeasgd 1 (ps.local)
            s = [commit_scale(self.protocol.name, self.protocol.local_steps, i - t) for t in ts]
            grads = [g if sj == 1.0 else g * sj for g, sj in zip(grads, s, strict=True)]
        if self.replay is not None and self.remaining_reads[i] > 0:
            self.snapshots[i] = self._weights().clone()  # a pending read still needs timestamp i
        samples = sum(e.samples for e in group)
        loss = sum(e.loss_sum for e in group) / max(1, samples)
        lr_scale = fmean(self.policy.scales([i - t for t in ts], self.mu, self.lam))
        sigma_mean = sum(i - t for t in ts) / len(ts)  # ⟨σ⟩ of this update (Rudra Eq 2)
        self._step(sum_in_order(grads, order), loss, samples, sigma_mean, i, lr_scale)
        for e in group:
            self.included[e.contrib.learner] += 1
        st.pushes_applied += len(group)
        st.updates += 1
        t = time.time() - self.t0
        self.updates_log.append(Update(i, t, [e.contrib for e in group]))
        self._flat = None
        self.apply_s.append(time.perf_counter() - t_in)
        if self.logger is not None and i % self.log_every == 0 and math.isfinite(loss):
            metrics = {"train_loss": loss, "staleness_mean_update": sigma_mean, "run_time_s": t}
            if self.num_train:
                metrics["epoch"] = st.pushes_applied * self.spg / self.num_train
            self.logger.log_metrics(metrics, step=i)
        self._release()

    def _scales(self, sigma: list[int]) -> list[float]:
        """The policy's weights on the gradients of one update (their relative weights when it scales the lr)."""
        scales = self.policy.scales(sigma, self.mu, self.lam)
        return relative(scales) if self.by_step else scales

    def _step(self, g: torch.Tensor, loss: float, samples: int, sigma_mean: float, i: int, lr_scale: float) -> None:
        """Update ``i`` with the flat aggregate ``g`` (its ``loss`` over ``samples`` samples, its gradients' mean
        staleness ``sigma_mean``): the PS update step the simulator applies too
        (:func:`psbench.ps.apply.apply_update`)."""
        if self.diverged_at is not None:
            return
        views, o = [], 0
        for p in self.params:
            views.append(g[o : o + p.numel()].view_as(p))
            o += p.numel()
        if not apply_update(
            self.params,
            views,
            loss,
            self.opt,
            lr_scale=lr_scale,
            step_scale=lr_scale if self.by_step else None,
            clip=self.clip,
            schedulers=[self.sched] if self.sched is not None else [],
        ):
            self.diverged_at, self.divergence = i, "a non-finite loss or update"
            self.gate.halt()  # no more gradients are handed out
            return
        self.stats.updates_stepped += 1
        self.recent.append(loss)
        why = self.loss_rule.add(i, loss, samples, sigma_mean)  # the loss rule, as the sim's
        if why is not None:
            self.diverged_at, self.divergence = i, why
            self.gate.halt()

    # ------------------------------------------------------------------ results
    def event_log(self, meta: dict | None = None) -> Schedule:
        """Every applied update in the simulator's schedule format (times: seconds from the PS start)."""
        return Schedule.collect(self.updates_log, meta)

    def timing(self, log: Schedule) -> dict[str, np.ndarray]:
        """Measured times for calibration (``dist_timing.npz``); row arrays follow ``log``'s rows."""
        rows = [self.row_timing[(l, k)] for l, k in zip(log.learner.tolist(), log.clock.tolist(), strict=True)]
        compute, t_end, parked = (np.asarray(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
        return {
            "compute_s": np.asarray(compute, dtype=np.float64),
            "t_end": np.asarray(t_end, dtype=np.float64),
            "parked": np.asarray(parked, dtype=bool),
            "push_s": np.asarray(self.push_s),
            "grant_s": np.asarray([g for g, _ in self.grant_s]),
            "grant_full": np.asarray([h for _, h in self.grant_s], dtype=bool),
            "apply_s": np.asarray(self.apply_s),
        }

    @property
    def recent_loss(self) -> float | None:
        return sum(self.recent) / len(self.recent) if self.recent else None
