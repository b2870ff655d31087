"""TernGrad Fig 3: LeNet/MNIST accuracy vs worker number N, fp32 vs TernGrad (momentum and vanilla SGD).

Total mini-batch 64 split over N workers (μ = 64/N), hardsync, polynomial LR decay (power 0.5) to
zero over the run, weight decay 5e-4 (``src/psbench/conf/experiment/terngrad/fig3.yaml``). ``ci`` and ``small`` run
seeds 0, 1, 2 of every case (the report decides a learning claim only on ≥ 3 seeds per configuration); ``paper`` one
seed, as the paper shows one run per point. Cases outside a scale's sub-grid are pruned unrun (sweeper constraint).

* ``ci`` (one seed: 53 s here, 2026-11-24, parallel on 2 cores): panel (a) only, N ∈ {2, 8}, fp32 and TernGrad,
  plus TernGrad-noclip at N = 2 (5 cases × 3 seeds); 300 iterations (0.32 epochs of MNIST) instead of 10K, the
  LR decaying to zero over those 300.
* ``small`` (about an hour here): both panels, N ∈ {2, 8, 32}, 2,000 iterations (noclip in panel a).
* ``paper``: both panels, N ∈ {2, 4, 8, 16, 32, 64}, 10K iterations (10.67 epochs): 30 LeNet runs.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, main

SCALES = {
    "ci": [
        SEEDS,
        "epochs=0.32",  # 300 iterations × 64 / 60,000
        "hydra.sweeper.constraints=['learners in [2,8] and optimizer.momentum > 0 and case != \"momentum_noclip_n8\"']",
        "++tags.data_note=mnist_300_iterations_instead_of_10K_panel_a_N2_N8",
    ],
    "small": [
        SEEDS,
        "epochs=2.1334",  # 2,000 iterations × 64 / 60,000 (rounded down to 2,000 updates)
        "hydra.sweeper.constraints=['learners in [2,8,32]']",
        "++tags.data_note=mnist_2000_iterations_instead_of_10K_N2_N8_N32",
    ],
    "paper": [],
}

if __name__ == "__main__":
    sys.exit(main("terngrad_fig3", "terngrad/fig3", SCALES))
