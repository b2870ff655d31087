"""Published numbers of Rudra (Gupta, Zhang, Milthorpe), copied from the paper (Tables 1–4, Figs 4–8).

Rows are ``(σ, μ, λ, test error %, training time s)``; σ = 0 is hardsync, σ = n is n-softsync
(the paper writes a configuration as (σ, μ, λ) with ⟨σ⟩ = n, §5.1). ``case_label`` gives the
row's name in ``src/psbench/conf/experiment/rudra/table2.yaml`` (the ``case`` tag of its MLflow runs).
"""

from __future__ import annotations

import re

# Table 1: communication overlap (%), μ = 4, 300 MB model, about 60 learners
TABLE1 = {"rudra_base": 11.52, "rudra_adv": 56.75, "rudra_adv_star": 99.56}

# Table 2: test error at 140 epochs and training time, μλ = const (CIFAR10, Rudra-base)
TABLE2: dict[int, list[tuple[int, int, int, float, float]]] = {
    128: [
        (1, 4, 30, 18.09, 1573),
        (30, 4, 30, 18.41, 2073),
        (18, 8, 18, 18.92, 2488),
        (10, 16, 10, 18.79, 3396),
        (4, 32, 4, 18.82, 7776),
        (2, 64, 2, 17.96, 13449),
    ],
    256: [
        (1, 8, 30, 20.04, 1478),
        (30, 8, 30, 19.65, 1509),
        (18, 16, 18, 20.33, 2938),
        (10, 32, 10, 20.82, 3518),
        (4, 64, 4, 20.70, 6631),
        (2, 128, 2, 19.52, 11797),
        (1, 128, 2, 19.59, 11924),
    ],
    512: [
        (1, 16, 30, 23.25, 1469),
        (30, 16, 30, 22.14, 1502),
        (18, 32, 18, 23.63, 2255),
        (10, 64, 10, 24.08, 2683),
        (4, 128, 4, 23.01, 7089),
    ],
    1024: [
        (1, 32, 30, 27.16, 1299),
        (30, 32, 30, 27.27, 1420),
        (18, 64, 18, 28.31, 1713),
        (1, 128, 10, 29.83, 2551),
        (10, 128, 10, 29.90, 2626),
    ],
}

# Table 3: top-5 (σ, μ, λ) by low error and small time
TABLE3 = [
    (1, 4, 30, "1-softsync", 18.09, 1573),
    (0, 8, 30, "Hardsync", 18.56, 1995),
    (30, 4, 30, "30-softsync", 18.41, 2073),
    (0, 4, 30, "Hardsync", 18.15, 2235),
    (18, 8, 18, "18-softsync", 18.92, 2488),
]

# Fig 4 (§5.1): λ = 30; ⟨σ⟩ ≈ n, σ ≤ 2n, P(σ > 2n) < 0.0001 for n = λ
FIG4 = {
    "n1": {"n": 1, "mean": 1.0, "support": (0, 2)},
    "n2": {"n": 2, "mean": 2.0, "support": (0, 4)},
    "n30": {"n": 30, "mean": 30.0, "support": (0, 60)},
}
#: §5.1's general statement ("⟨σ⟩ = n for our implementation of the n-softsync protocol", σ ≤ 2n) at the other λ of
#: §5.2, 1-softsync and λ-softsync (``experiment=rudra/fig4_lambda``): case -> (λ, n)
FIG4_LAMBDA = {
    "lam2_n1": (2, 1),
    "lam2_n2": (2, 2),
    "lam4_n1": (4, 1),
    "lam4_n4": (4, 4),
    "lam10_n1": (10, 1),
    "lam10_n10": (10, 10),
}

# Fig 5 (§5.1): λ = 30, μ = 128; no numbers but the α0 curve of 30-softsync: "a constant high
# error rate of 90%" (= chance on 10 classes). Case -> (n, learning-rate rule)
FIG5 = {
    "s30_alpha0": (30, "α0"),
    "s30_alpha0_over_sigma": (30, "α0/⟨σ⟩"),
    "s4_alpha0": (4, "α0"),
    "s4_alpha0_over_sigma": (4, "α0/⟨σ⟩"),
}
FIG5_CHANCE_ERROR = 90.0

# Figs 6–8 (§5.2): the grid; the figures are plots (no numbers besides the baseline below)
LAMBDAS = (1, 2, 4, 10, 18, 30)
MUS = (4, 8, 16, 32, 64, 128)

BASELINE = {"sigma": 0, "mu": 128, "lambda": 1, "test_error": 17.9, "time_s": 22392}
#: §4.2: the baseline's learning rate α0 (÷10 after epochs 120 and 130); Eq 6 divides it by ⟨σ⟩ for n-softsync
ALPHA0 = 0.001

# Table 4 (§5.5): ImageNet, AlexNet-style network (~72 M parameters, 289 MB), 30 epochs.
# (configuration, architecture, μ, λ, protocol, top-1 %, top-5 %, minutes/epoch)
TABLE4 = [
    ("base-hardsync", "rudra_base", 16, 18, "Hardsync", 44.35, 20.85, 330),
    ("base-softsync", "rudra_base", 16, 18, "1-softsync", 45.63, 22.08, 270),
    ("adv-softsync", "rudra_adv", 4, 54, "1-softsync", 46.09, 22.44, 212),
    ("adv*-softsync", "rudra_adv_star", 4, 54, "1-softsync", 46.53, 23.38, 125),
]
# §4.2/§5.5: 1.2 million training images, 289 MB model; baseline (μ, λ) = (256, 1) takes 54 hours/epoch
# and reaches 43.95 % top-1, 20.55 % top-5
IMAGENET = {
    "train_images": 1_200_000,
    "model_mb": 289,
    "params_m": 72,
    "baseline_mu": 256,
    "baseline_hours_per_epoch": 54,
    "baseline_top1": 43.95,
    "baseline_top5": 20.55,
}


def case_label(sigma: int, mu: int, lam: int) -> str:
    return f"s{sigma}_mu{mu}_lam{lam}"


def parse_case(label: str) -> tuple[int, int, int] | None:
    """(σ, μ, λ) of a ``case_label``; None for any other label."""
    m = re.fullmatch(r"s(\d+)_mu(\d+)_lam(\d+)", label or "")
    return None if m is None else (int(m[1]), int(m[2]), int(m[3]))
