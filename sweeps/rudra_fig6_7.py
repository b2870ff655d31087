"""Rudra Figs 6–7: (σ, μ, λ) tradeoff curves (test error vs training time per μ) for hardsync,
λ-softsync and 1-softsync (trains CNNs).

The preset ``src/psbench/conf/experiment/rudra/fig6_7.yaml`` holds the paper's whole grid (96 cases); ``ci`` and
``small`` keep a sub-grid with a sweeper constraint (the other cases are pruned unrun) and say so
in ``data_note``:

* ``ci`` (226 s measured here, 2 cores shared with 3 other jobs): λ ∈ {1, 4, 30} × μ ∈ {4, 32} (14 cases; μλ ≤ 960 so
  that every case has at least one update in 1,280 samples), cifar10_subset cut to 640
  images, 2 epochs, the paper's α0 = 0.001 (as Table 2's ci): exercises the pipeline and the simulated-time
  axis; the CNN barely learns, so its errors say little about the paper's.
* ``small`` (hours here): all λ × μ ∈ {4, 16, 128} (48 cases), all 5,085 cifar10_subset images,
  10 epochs, α0 = 0.001 (the former α0 = 0.01 compensated for [0, 1] inputs; the presets now run
  the cifar10_full recipe's 0–255 inputs).
* ``paper``: the 96 cases on full CIFAR-10 (``dataset=cifar10``), 140 epochs, §4.2
  hyperparameters: a cluster or GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["dataset=cifar10_subset", "dataset.subset=640", "epochs=2",
           "hydra.sweeper.constraints=['learners in [1,4,30] and batch_size in [4,32]']",
           "++tags.data_note=cifar10_subset_640_images_2_epochs_subgrid"],
    "small": ["dataset=cifar10_subset", "epochs=10", "optimizer.milestones=[]",
              "hydra.sweeper.constraints=['batch_size in [4,16,128]']",
              "++tags.data_note=cifar10_subset_10_epochs_subgrid"],
    "paper": ["dataset=cifar10"],
}

if __name__ == "__main__":
    sys.exit(main("rudra_fig6_7", "rudra/fig6_7", SCALES))
