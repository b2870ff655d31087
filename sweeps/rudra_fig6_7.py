"""Rudra Figs 6–7: (σ, μ, λ) tradeoff curves (test error vs training time per μ) for hardsync,
λ-softsync and 1-softsync (trains CNNs).

The preset ``src/psbench/conf/experiment/rudra/fig6_7.yaml`` holds the paper's whole grid (96 cases); ``ci`` and
``small`` and ``full`` keep a sub-grid with a sweeper constraint (the other cases are pruned unrun) and say so
in ``data_note``:

* ``ci``: λ ∈ {1, 4, 30} × μ ∈ {4, 32} (14 cases × seeds 0, 1, 2), the whole cifar10_subset (5,085
  images), 1 epoch, the paper's α0 = 0.001: Table 2's ci budget and reason (640 images × 2 epochs left the CNN at
  chance; one epoch of the subset is where the μλ ≈ 120 hardsync (0,4,30) the claims compare has learned:
  79–84 % after Zhang Fig 3's first epoch). Measured here (21 min, one thread a run, load 12–14): (0,4,30)
  80.5 %, (0,32,30) 86.9 % mean test error, so Fig 6's "μ = 4 restores the error" is decided.
* ``small`` (many hours here): all λ × μ ∈ {4, 16, 128} (48 cases × 3 seeds), all 5,085 cifar10_subset
  images, 10 epochs, α0 = 0.001.
* ``full`` (~1 h here): λ ∈ {1, 4, 30} × μ ∈ {4, 128} (14 cases × seeds 0, 1, 2): μ = 128 is the
  paper's own contour ("μ = 4 restores the error lost at μ = 128") and (0,128,1) its §4.2 baseline of Fig 7a;
  all of CIFAR-10 as JPEG q75 (``dataset=cifar10_jpeg``), 3 epochs, α0 = 0.001, no ÷10 steps. Measured here (one
  thread, the job's CPU seconds, load 3–6, 2026-11-26): μ = 4 cases 38–83 s/epoch ((0,4,1) and (4,4,4) 70 s/epoch,
  one small gradient per update; (30,4,30) 83 s/epoch; (0,4,30) 39 s/epoch), μ = 128 cases 30–42 s/epoch, plus
  5 s per evaluation of the 10,000 test images and 9 s to start: ~730 s per seed and epoch for the 14 cases, so
  42 runs × 3 epochs on 2 parallel jobs ≈ 3,300 s + 3 min ≈ 58 min. Three epochs give (0,128,1) 1,170 updates
  and (0,128,30) only 39, so Fig 6's comparison needs only (0,4,30) learned; Fig 7a's "≤ baseline + 1 pp" can hold
  only where the μ = 4 row ends more than 2 SE − 1 pp (~0.5–1 pp) below the baseline.
* ``paper``: the 96 cases on full CIFAR-10 (``dataset=cifar10``), 140 epochs, §4.2
  hyperparameters: a cluster or GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, main

SCALES = {
    "ci": [
        "dataset=cifar10_subset",
        "epochs=1",
        "optimizer.milestones=[]",
        SEEDS,
        "hydra.sweeper.constraints=['learners in [1,4,30] and batch_size in [4,32]']",
        "++tags.data_note=cifar10_subset_1_epoch_subgrid",
    ],
    "small": [
        "dataset=cifar10_subset",
        "epochs=10",
        "optimizer.milestones=[]",
        SEEDS,
        "hydra.sweeper.constraints=['batch_size in [4,16,128]']",
        "++tags.data_note=cifar10_subset_10_epochs_subgrid",
    ],
    "full": [
        "dataset=cifar10_jpeg",
        "epochs=3",
        "optimizer.milestones=[]",
        SEEDS,
        "hydra.sweeper.constraints=['learners in [1,4,30] and batch_size in [4,128]']",
        "++tags.data_note=cifar10_jpeg_q75_3_epochs_subgrid",
    ],
    "paper": ["dataset=cifar10", SEEDS],
}

if __name__ == "__main__":
    sys.exit(main("rudra_fig6_7", "rudra/fig6_7", SCALES))
