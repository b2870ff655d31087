"""The PS side of the point-to-point transport: one receiving thread per learner, one inbox.

gloo's ``irecv(...).is_completed()`` never reports completion on CPU (torch 2.13), so each
learner gets a daemon thread blocked in ``dist.recv(src=rank)`` that puts decoded messages on a
queue; the PS event loop reads the queue with a timeout and, between messages, checks that
every learner process is alive. A peer that dies closes its TCP pair: the blocked ``recv``
raises at once and the thread reports the error. Sends happen on the PS's own thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.distributed as dist

from psbench.distributed import messages as m
from psbench.errors import RunFailure


class Inbound(NamedTuple):
    learner: int
    push: m.Push | None
    grad: torch.Tensor | None
    error: str | None


class LearnerFailure(RunFailure):
    """A learner process died or went silent; ``learner`` is its index (rank − 1)."""

    def __init__(self, learner: int, message: str) -> None:
        self.learner = learner
        super().__init__(message)


class GlooTransport:
    """Messages to and from ``learners`` learner ranks 1..λ of the default process group.

    ``alive(l)`` (optional) returns None while learner ``l``'s process runs, else a reason
    (e.g. ``"exited with code -9"``); :meth:`check` raises :class:`LearnerFailure` for it.
    """

    def __init__(
        self, learners: int, numel: int, alive: Callable[[int], str | None] | None = None, push_bytes: int | None = None
    ) -> None:
        self.learners, self.numel, self._alive = learners, numel, alive
        self.push_bytes = push_bytes  # a compressed push: this many uint8 (compression/wire.py); else numel float32
        self.inbox: queue.Queue[Inbound] = queue.Queue()
        self.closed: set[int] = set()  # learners told to STOP (their disconnect is expected)
        self.bytes_sent = self.bytes_received = 0
        self._threads = [
            threading.Thread(target=self._receive, args=(l,), daemon=True, name=f"psbench-rx-{l}")
            for l in range(learners)
        ]
        for t in self._threads:
            t.start()

    def _receive(self, l: int) -> None:
        try:
            while True:
                h = m.empty_header()
                dist.recv(h, src=l + 1)
                push = m.decode_push(h)
                grad = None
                if push.kind == m.PUSH:
                    grad = (
                        torch.empty(self.numel)
                        if self.push_bytes is None
                        else torch.empty(self.push_bytes, dtype=torch.uint8)
                    )
                    dist.recv(grad, src=l + 1)
                self.inbox.put(Inbound(l, push, grad, None))
        except Exception as e:  # reported to the PS loop, which decides
            self.inbox.put(Inbound(l, None, None, " ".join(str(e).split())[:300]))

    def send(self, l: int, header: torch.Tensor, payload: torch.Tensor | None = None) -> None:
        dist.send(header, l + 1)
        self.bytes_sent += header.numel() * 8
        if payload is not None:
            dist.send(payload, l + 1)
            self.bytes_sent += payload.numel() * payload.element_size()

    def defer_pull(self, l: int) -> None:
        """Queue learner ``l``'s pull behind every message received so far (the simulator's FIFO PS)."""
        self.inbox.put(Inbound(l, m.Push(m.PULL, 0, 0, 0, 0.0, 0.0, 0.0, 0, -1), None, None))

    def get(self, timeout: float) -> Inbound | None:
        try:
            msg = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if msg.grad is not None:
            self.bytes_received += msg.grad.numel() * msg.grad.element_size()
        return msg

    def check(self, learners) -> None:
        """Raise :class:`LearnerFailure` for the first of ``learners`` whose process has ended."""
        if self._alive is None:
            return
        for l in learners:
            why = self._alive(l)
            if why is not None:
                raise LearnerFailure(l, f"learner rank {l + 1} {why}")
