"""Point-to-point messages between the PS (rank 0) and a learner (rank l + 1).

Every message is a fixed-size float64 header (exact for integers below 2⁵³), optionally
followed by one flat float32 tensor of all parameters (in ``net.parameters()`` order):

* learner → PS ``HELLO`` (ready for a first gradient) and ``PUSH`` (+ gradient): ts of the
  weights used, the learner's clock, the sample-stream start, compute start/end times
  (``time.time()``, seconds), the sum and count of the per-sample losses, and the replay row;
* PS → learner ``COMPUTE`` (+ weights unless the learner already holds timestamp ``ts``): the
  weight timestamp, sample-stream start, the float32 scale w of the gradient (1 in free-run,
  w_l/c of the learning-rate policy in replay), the replay row, and the PS's current learning rate η
  (local-step protocols take their H local steps at it); ``STOP`` ends the learner.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

HEADER = 10
HELLO, PUSH, COMPUTE, STOP = 0, 1, 2, 3
#: PS-internal: a learner's pull request, queued behind every message that arrived before it
PULL = 4
#: TCPStore key a learner sets just before joining the process group
READY_KEY = "psbench/ready/{rank}"


class Push(NamedTuple):
    kind: int
    ts: int
    clock: int
    sample_start: int
    t_start: float
    t_end: float
    loss_sum: float
    samples: int
    row: int


class Reply(NamedTuple):
    kind: int
    ts: int
    sample_start: int
    weight: float
    has_weights: bool
    row: int
    lr: float


def encode(*values: float) -> torch.Tensor:
    h = torch.zeros(HEADER, dtype=torch.float64)
    h[: len(values)] = torch.tensor([float(v) for v in values], dtype=torch.float64)
    return h


def empty_header() -> torch.Tensor:
    return torch.zeros(HEADER, dtype=torch.float64)


def decode_push(h: torch.Tensor) -> Push:
    v = h.tolist()
    return Push(int(v[0]), int(v[1]), int(v[2]), int(v[3]), v[4], v[5], v[6], int(v[7]), int(v[8]))


def decode_reply(h: torch.Tensor) -> Reply:
    v = h.tolist()
    return Reply(int(v[0]), int(v[1]), int(v[2]), v[3], bool(v[4]), int(v[5]), v[6])
