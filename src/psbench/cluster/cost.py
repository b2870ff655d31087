"""Cost model of one learner and its links (Rudra §3.2, §4.1; Zhang §2.3).

Everything the event schedule needs to know about time lives here: how long a
mini-batch of μ takes to compute, how long a message of ``b`` bytes occupies a
link or the parameter server (PS), and the seeded per-learner noise (jitter,
stragglers, heavy tails). Nothing here depends on gradient *values*, which is
why the schedule can be computed before training (README, "How the simulator works").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from psbench.errors import require

#: Named hardware profiles. ``p775`` is the IBM P775 of Rudra §4.1: 30 GB/s links ("a
#: 300 MB model would take more than 10 ms to transfer", §3.3) and compute fitted to the
#: paper's CIFAR-10 CNN timings: 140 epochs at (μ, λ) = (128, 1) take 22,392 s (§5.4) →
#: 0.41 s per batch of 128; at (4, 30) with 1-softsync 1,573 s (Table 2) → 27 ms per batch
#: of 4; hence t(μ) = 14.6 ms + 3.09 ms·μ. The PS costs are fitted to the same table: at
#: (4, 30) 30-softsync takes 2,073 s, i.e. a saturated PS spends 1.18 ms per gradient
#: (push + pull + one update), while 1-softsync stays compute bound (0.9 ms per arriving
#: gradient): 0.14 ms service per message and 0.9 ms to apply an update of the 358 kB
#: model (≈ 0.4 GB/s). ``laptop`` is a 2-core CPU running the small
#: models of this repository.
PROFILES: dict[str, dict] = {
    "laptop": dict(
        overhead_s=2e-4,
        per_sample_s=2e-5,
        bandwidth_Bps=1.0e9,
        intra_node_bandwidth_Bps=5.0e9,
        latency_s=2e-5,
        ps_service_s=1e-5,
        ps_apply_Bps=4.0e9,
        ps_jitter_cv=0.0,
    ),
    "p775": dict(
        overhead_s=1.46e-2,
        per_sample_s=3.09e-3,
        bandwidth_Bps=3.0e10,
        intra_node_bandwidth_Bps=1.2e11,
        latency_s=2e-6,
        ps_service_s=1.4e-4,
        ps_apply_Bps=4.0e8,
        ps_jitter_cv=0.0,
    ),
    # p775 plus the cluster terms, each fitted on ONE published number (psbench.calibration.paper_fit.fit_p775_cluster,
    # conf/hardware/p775_cluster.yaml): contention on Rudra §3.3's 16 × 300 MB to one receiver in 1 s;
    # node_share on Rudra Table 2 (σ, μ, λ) = (1, 128, 10) 2,551 s; compute t(4) on (1, 4, 30) 1,573 s given
    # node_share (t(128) from (128, 1) 22,392 s, §5.4); ps_service_s on (30, 4, 30) 2,073 s; jitter_cv, the
    # barrier's straggler cost of the CIFAR10 CNN, on Table 3 (0, 8, 30) 1,995 s / Table 2 (1, 8, 30) 1,478 s
    # (the 300 MB AlexNet presets set their own, 0.0395, fitted on Table 4's 330 / 270 min/epoch). The
    # CIFAR10 rows run λ on footnote 4's nodes, (λ, η) = (10, 4), (18, 4), (30, 8) (topology.nodes).
    "p775_cluster": dict(
        overhead_s=9.1153e-3,
        per_sample_s=3.1328e-3,
        bandwidth_Bps=3.0e10,
        intra_node_bandwidth_Bps=1.2e11,
        latency_s=2e-6,
        ps_service_s=1.11e-4,
        ps_apply_Bps=4.0e8,
        ps_jitter_cv=0.0,
        jitter_cv=0.1226,
        node_share=0.0767,
        contention=0.7,
    ),
}


@dataclass(frozen=True)
class ComputeModel:
    """Seconds for forward+backward of one mini-batch of μ samples.

    Either affine, ``t(μ) = overhead_s + per_sample_s·μ`` (Rudra §5.2: small μ loses GEMM
    throughput, the overhead term), or piecewise-linear through measured ``points``
    ``((μ, seconds), …)`` from :func:`psbench.calibration.model_time.calibrate`, extrapolated
    linearly beyond the last point.
    """

    overhead_s: float = 2e-4
    per_sample_s: float = 2e-5
    points: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        require(self.overhead_s >= 0, "hardware.compute.overhead_s", self.overhead_s, ">= 0")
        require(self.per_sample_s > 0 or self.points != (), "hardware.compute.per_sample_s", self.per_sample_s, "> 0")

    def seconds(self, mu: int) -> float:
        if not self.points:
            return self.overhead_s + self.per_sample_s * mu
        if len(self.points) == 1:
            m0, t0 = self.points[0]
            return t0 * mu / m0
        (m0, t0), (m1, t1) = self.points[0], self.points[1]
        (ma, ta), (mb, tb) = self.points[-2], self.points[-1]
        if mu < m0:
            return t0 + (mu - m0) * (t1 - t0) / (m1 - m0)
        if mu > mb:
            return tb + (mu - mb) * (tb - ta) / (mb - ma)
        return float(np.interp(mu, [m for m, _ in self.points], [t for _, t in self.points]))


@dataclass(frozen=True)
class CostModel:
    """Compute, links and PS service of a homogeneous cluster plus seeded noise.

    Attributes:
        compute: time per mini-batch (see :class:`ComputeModel`).
        message_bytes: fp32 model size: the push and pull payload without compression, and what the
            PS reads and writes to apply an update; a scalar timestamp of 8 bytes is added to every
            message (Rudra §3.2).
        push_bytes, pull_bytes: a codec's exact payload of one push and one pull
            (:mod:`psbench.compression`); ``None`` means ``message_bytes``.
        pull_delta: pulls carry update deltas (TernGrad parameter localization, §3.1): a learner
            that missed k updates pulls min(k·pull_bytes, message_bytes).
        bandwidth_Bps, latency_s: learner↔PS link (inter-node).
        intra_node_bandwidth_Bps: learner↔leaf-PS link inside a node (Rudra-adv, §3.3).
        ps_service_s: fixed PS handling time per message (the PS handles messages one by one).
        ps_apply_Bps: rate at which the PS applies an update to the weights.
        jitter_cv: coefficient of variation of the log-normal per-mini-batch compute jitter.
        ps_jitter_cv: coefficient of variation of a log-normal, mean-one factor on every PS busy period
            (handling a message, applying an update): a PS that shares its CPU, or whose sends wait on the
            network stack, does not take the same time twice. Seeded, one stream for the PS tier.
        straggler_fraction, straggler_slowdown: a seeded subset of learners k× slower.
        heavy_tail: Pareto shape α > 1 of an extra multiplicative, mean-one delay, or None.
        contention: link contention at the PS root (off at 0): a push (or a leaf's relay) reaching the root
            while q others are queued or in transfer there moves ``1 + contention·q`` times slower. Rudra §3.3:
            "if 16 tasks are sending 300 MB to the same receiver and there is link contention, it would take
            over a second" where one takes 10 ms: 10 ms · Σ_{q<16} (1 + β q) = 1 s gives β = 0.7.
        ps_shards: k server shards (Zhang §4.1 "parameter servers are sharded"; the SSP paper's Petuum server
            runs a shard on every machine): each holds 1/k of the parameters, so a message's bytes and an
            update's apply time are split over k shards working in parallel; the per-message service time
            ``ps_service_s`` is not (every shard handles its piece of every message). 1 = one PS (default).
        ps_colocated: the shards run on the learners' machines, one each (Petuum, the SSP paper §6.1 and §7:
            "allocate a copy of the model parameters to each machine"), so a learner's own shard's slice never
            leaves its machine: with k = 1 (one machine) messages move at the intra-node rate; with k ≥ 2 the
            other slices, 1/k of the bytes each, cross k − 1 links in parallel — k× the link rate as above.
        node_share: compute slowdown of learners that share a node (off at 0): a learner on a node holding k
            learners (``topology.learners_per_node`` per node, or λ spread over ``topology.nodes``) computes
            ``1 + node_share·(k − 1)`` times slower than one alone — the λ = 1 baselines run alone on a node,
            λ ≥ 2 learners share its memory bandwidth (Rudra §4.1 P775 nodes and footnote 4's (λ, nodes); Zhang
            §2.3 "we pack either 4 or 6 learners on each computing node").
    """

    compute: ComputeModel = field(default_factory=ComputeModel)
    message_bytes: int = 4 * 100_000
    push_bytes: int | None = None
    pull_bytes: int | None = None
    pull_delta: bool = False
    bandwidth_Bps: float = 1.0e9
    intra_node_bandwidth_Bps: float = 5.0e9
    latency_s: float = 2e-5
    ps_service_s: float = 1e-5
    ps_apply_Bps: float = 4.0e9
    jitter_cv: float = 0.05
    ps_jitter_cv: float = 0.0
    straggler_fraction: float = 0.0
    straggler_slowdown: float = 1.0
    heavy_tail: float | None = None
    contention: float = 0.0
    ps_shards: int = 1
    ps_colocated: bool = False
    node_share: float = 0.0

    TIMESTAMP_BYTES = 8

    def __post_init__(self) -> None:
        require(self.message_bytes >= 0, "message_bytes", self.message_bytes, ">= 0")
        require(self.push_bytes is None or self.push_bytes >= 0, "push_bytes", self.push_bytes, "null or >= 0")
        require(self.pull_bytes is None or self.pull_bytes >= 0, "pull_bytes", self.pull_bytes, "null or >= 0")
        require(self.bandwidth_Bps > 0, "hardware.bandwidth_Bps", self.bandwidth_Bps, "> 0")
        require(
            self.intra_node_bandwidth_Bps > 0, "hardware.intra_node_bandwidth_Bps", self.intra_node_bandwidth_Bps, "> 0"
        )
        require(self.latency_s >= 0, "hardware.latency_s", self.latency_s, ">= 0")
        require(self.ps_service_s >= 0, "hardware.ps_service_s", self.ps_service_s, ">= 0")
        require(self.ps_apply_Bps > 0, "hardware.ps_apply_Bps", self.ps_apply_Bps, "> 0")
        require(self.jitter_cv >= 0, "hardware.jitter_cv", self.jitter_cv, ">= 0")
        require(self.ps_jitter_cv >= 0, "hardware.ps_jitter_cv", self.ps_jitter_cv, ">= 0")
        require(
            0.0 <= self.straggler_fraction <= 1.0,
            "hardware.stragglers.fraction",
            self.straggler_fraction,
            "a fraction in [0, 1]",
        )
        require(self.straggler_slowdown >= 1.0, "hardware.stragglers.slowdown", self.straggler_slowdown, ">= 1")
        require(
            self.heavy_tail is None or self.heavy_tail > 1.0,
            "hardware.heavy_tail",
            self.heavy_tail,
            "null or a Pareto shape > 1",
        )
        require(self.contention >= 0, "hardware.contention", self.contention, ">= 0")
        require(self.node_share >= 0, "hardware.node_share", self.node_share, ">= 0")
        require(
            isinstance(self.ps_shards, int) and self.ps_shards >= 1,
            "hardware.ps_shards",
            self.ps_shards,
            "an integer >= 1",
        )

    @classmethod
    def from_profile(cls, name: str, message_bytes: int, **overrides) -> CostModel:
        require(name in PROFILES, "hardware.name", name, f"one of {sorted(PROFILES)}")
        p = dict(PROFILES[name])
        p.update({k: v for k, v in overrides.items() if v is not None})
        compute = ComputeModel(p.pop("overhead_s"), p.pop("per_sample_s"), tuple(p.pop("points", ())))
        return cls(compute=compute, message_bytes=message_bytes, **p)

    @property
    def wire_bytes(self) -> int:
        """Bytes of one full push or pull message: payload plus the scalar timestamp."""
        return self.message_bytes + self.TIMESTAMP_BYTES

    @property
    def push_wire_bytes(self) -> int:
        """Bytes of one push: the (compressed) gradient payload plus the timestamp."""
        return (self.message_bytes if self.push_bytes is None else self.push_bytes) + self.TIMESTAMP_BYTES

    def pull_wire_bytes(self, missed: int = 1) -> int:
        """Bytes of one pull by a learner ``missed`` updates behind: weights, or deltas when ``pull_delta``."""
        if self.pull_bytes is None:
            return self.wire_bytes
        b = min(max(1, missed) * self.pull_bytes, self.message_bytes) if self.pull_delta else self.pull_bytes
        return b + self.TIMESTAMP_BYTES

    @property
    def apply_s(self) -> float:
        """PS time to apply one update to the weights (read + write the model once; k shards in parallel)."""
        return self.message_bytes / self.ps_apply_Bps / self.ps_shards

    def node_factors(self, node_sizes: Sequence[int]) -> list[float]:
        """Compute-time multiplier of each learner, nodes in order (:meth:`Topology.node_sizes`), from how many
        learners share its node (``node_share``)."""
        return [1.0 + self.node_share * (k - 1) for k in node_sizes for _ in range(k)]

    def root_rate(self) -> float:
        """Bytes/s of a message at the PS root: the link split over k shards' links (a single co-located
        shard: the intra-node rate)."""
        if self.ps_colocated and self.ps_shards == 1:
            return self.intra_node_bandwidth_Bps
        return self.bandwidth_Bps * self.ps_shards


class JitterStreams:
    """One seeded RNG stream per learner, drawn in blocks for speed.

    ``factor(l)`` returns the next multiplicative compute-time factor of learner ``l``:
    log-normal with mean 1 and CV ``jitter_cv``, times ``straggler_slowdown`` for the
    seeded straggler subset, times a mean-one Pareto(α) factor when ``heavy_tail`` is set.
    Streams are independent of each other, so adding a learner never changes the draws
    of the others (numpy ``SeedSequence.spawn``).
    """

    #: Draws buffered across all learners together; per learner at most 4,096 and at least 16,
    #: so memory stays O(1) in λ for λ ≤ 4,096 (a schedule for λ = 1,000 holds 64 per learner).
    BUDGET = 65_536

    def __init__(self, cost: CostModel, learners: int, seed: int) -> None:
        root = np.random.SeedSequence([seed, 0x5EED])
        children = root.spawn(learners + 1)
        self._rngs = [np.random.Generator(np.random.PCG64(s)) for s in children[:learners]]
        chooser = np.random.Generator(np.random.PCG64(children[-1]))
        k = round(cost.straggler_fraction * learners)
        self.stragglers = frozenset(chooser.choice(learners, size=k, replace=False).tolist()) if k else frozenset()
        self._cost = cost
        self._buf: list[list[float]] = [[] for _ in range(learners)]
        self._block = max(16, min(4096, self.BUDGET // learners))
        var = math.log1p(cost.jitter_cv**2)
        self._sigma, self._mu = math.sqrt(var), -var / 2

    def _refill(self, l: int) -> list[float]:
        rng, c = self._rngs[l], self._cost
        n = self._block
        f = rng.lognormal(self._mu, self._sigma, n) if self._sigma > 0 else np.ones(n)
        if c.heavy_tail is not None:
            a = c.heavy_tail
            f = f * (rng.pareto(a, n) + 1.0) * (a - 1.0) / a
        if l in self.stragglers:
            f = f * c.straggler_slowdown
        buf = f[::-1].tolist()  # pop() from the end yields draws in order
        self._buf[l] = buf
        return buf

    def factor(self, l: int) -> float:
        buf = self._buf[l]
        if not buf:
            buf = self._refill(l)
        return buf.pop()


class PSJitter:
    """Mean-one log-normal factors with CV ``ps_jitter_cv`` for the PS's busy periods, one seeded stream
    independent of the learners' (so turning it on never changes their compute draws)."""

    BLOCK = 4096

    def __init__(self, cv: float, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x5EED, 0x95])))
        var = math.log1p(cv**2)
        self._sigma, self._mu = math.sqrt(var), -var / 2
        self._buf: list[float] = []

    def factor(self) -> float:
        if not self._buf:
            self._buf = self._rng.lognormal(self._mu, self._sigma, self.BLOCK)[::-1].tolist()
        return self._buf.pop()
