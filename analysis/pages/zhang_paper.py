"""Published numbers and claims of staleness-aware ASGD (Zhang, Gupta, Lian, Liu), copied from the paper.

Figures 1–4 are plots; the paper states these numbers in its text (§2.4, §4.1–4.3), and only these
are shown beside ours. Case labels are those of ``src/psbench/conf/experiment/zhang/fig*.yaml`` (tag ``case``).
"""

from __future__ import annotations

#: Fig 1 (§2.4): λ = 30, μ = 4 (footnote 1); n → what the text says about τ.
FIG1 = {
    "n1": {"n": 1, "mean": "—", "range": "τ ∈ {0, 1, 2}"},
    "n15": {"n": 15, "mean": "close to 15", "range": "τ ≤ 30 (P(τ > 2n) < 0.0001)"},
    "n30": {"n": 30, "mean": "close to 30", "range": "τ ≤ 60 (P(τ > 2n) < 0.0001)"},
}
FIG1_TAIL = 1e-4  # "only with a very low probability (<0.0001) does τ exceed 2n"

#: Fig 2 (§4.2): "22x-28x speedup for different benchmarks and different batch sizes" (up to 30 learners);
#: "On an average, we find that the ASGD runs 50% faster than its SSGD counterpart."
FIG2_SPEEDUP_RANGE = (22.0, 28.0)
FIG2_ASGD_OVER_SSGD = 1.5
#: benchmark → (label, model size in the paper, epoch size in images: §4.1)
FIG2_BENCH = {
    "cifar": ("CIFAR10", "~350 kB", 50_000),
    "imagenet": ("ImageNet", "~300 MB", 1_200_000),
}
FIG2_LAMBDAS = (1, 2, 4, 8, 16, 30)
FIG2_PROTOCOLS = {"hardsync": "hardsync (SSGD)", "s1": "1-softsync", "async": "λ-softsync (async)"}

#: Fig 3 (§4.3.1): λ = 30, μ = 4, α0 = 0.001, 140 epochs. case → (n, lr policy, legend)
FIG3 = {
    "hardsync": (0, "α0", "hardsync (SSGD)"),
    "s1_alpha0": (1, "α0", "1-softsync"),
    "s15_alpha0": (15, "α0", "15-softsync"),
    "s30_alpha0": (30, "α0", "30-softsync = Downpour"),
    "s1_tau": (1, "α0/τ", "1-softsync"),
    "s15_tau": (15, "α0/τ", "15-softsync"),
    "s30_tau": (30, "α0/τ", "30-softsync"),
}
FIG3_SINGLE_LEARNER_ERROR = 18.0  # % "~18% misclassification error rate" (μ = 128, 1 learner, 140 epochs)
FIG3_STUCK_ERROR = 90.0  # % "training fails to converge and the test error stays at 90%" (15-, 30-softsync, α0)
FIG3_TAU_ERROR = 18.0  # % with α0/τ "the trained model achieves a test error of ~18%"

#: Fig 4 (§4.3.2): ImageNet, λ = 18, μ = 16; single learner (μ = 256, 35 epochs) top-1 42.56 %, top-5 19.18 %.
FIG4_SINGLE_LEARNER = {"top1": 42.56, "top5": 19.18}
