"""Rudra Fig 5: test error vs epoch, α0 vs α0/⟨σ⟩ for 30-softsync and 4-softsync (λ = 30, μ = 128; trains CNNs).

* ``ci`` (566 s measured here, 2 cores shared with 3 other jobs): cifar10_subset (5,085 images),
  4 epochs, α0 = 0.1 instead of 0.001 and no ÷10 steps, seed 0: the paper's α0 barely moves the CNN
  in 4 epochs, so α0 is raised to where α0/30 learns in 4 epochs (single runs here: α0 = 0.1 →
  30-softsync α0 93.6 %, α0/30 79.5 % test error; α0 = 0.3 → α0 diverges, α0/30 = 0.01 ends at
  89.8 %). Substitution labelled (``data_note``).
* ``small`` (estimated 1 h here): cifar10_subset, 30 epochs, α0 = 0.1, ÷10 at epochs 20 and 25.
* ``paper``: full CIFAR-10 (``dataset=cifar10``), 140 epochs, §4.2 hyperparameters (α0 = 0.001):
  a cluster or GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["dataset=cifar10_subset", "epochs=4", "optimizer.lr=0.1", "optimizer.milestones=[]",
           "++tags.data_note=cifar10_subset_4_epochs_lr0.1"],
    "small": ["dataset=cifar10_subset", "epochs=30", "optimizer.lr=0.1", "optimizer.milestones=[20,25]",
              "++tags.data_note=cifar10_subset_30_epochs_lr0.1"],
    "paper": ["dataset=cifar10"],
}

if __name__ == "__main__":
    sys.exit(main("rudra_fig5", "rudra/fig5", SCALES))
