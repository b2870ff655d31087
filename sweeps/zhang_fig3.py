"""Zhang et al. Fig 3: CIFAR10 training loss / test error vs epoch, λ = 30, μ = 4, α0 vs α0/τ (Eq 3); trains CNNs.

7 runs: hardsync (SSGD), 1-/15-/30-softsync with α0 (30-softsync with α0 = Downpour) and with α0/τ.

* ``ci`` (about 6–8 min here): cifar10_subset cut to 1,000 training images (test: its 1,017),
  3 epochs, α0 = 0.01 instead of 0.001 (as Rudra Table 2's ci), no lr steps, test error after
  every epoch. Labelled in every table (tags ``data_note``, ``scale``). 3,000 samples are 25 hardsync
  updates: the hardsync curve barely moves; what ci can show is whether α0 with large n diverges.
* ``small`` (about 1–2 h here): the whole cifar10_subset (5,085 images), 20 epochs, α0 = 0.001,
  ÷10 after epochs 15 and 18.
* ``paper``: full CIFAR-10 (``dataset=cifar10``), 140 epochs, the §4.3.1 hyperparameters: a cluster/GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["dataset=cifar10_subset", "dataset.subset=1000", "epochs=3", "optimizer.lr=0.01", "optimizer.milestones=[]",
           "++tags.data_note=cifar10_subset_1000_images_3_epochs_lr0.01"],
    "small": ["dataset=cifar10_subset", "epochs=20", "optimizer.milestones=[15,18]",
              "++tags.data_note=cifar10_subset_20_epochs"],
    "paper": ["dataset=cifar10"],
}

if __name__ == "__main__":
    sys.exit(main("zhang_fig3", "zhang/fig3", SCALES))
