"""Zhang et al. Fig 1: staleness distribution of 1-, 15- and 30-softsync with λ = 30, μ = 4 (simulation only).

``paper``: 140 epochs of 50,000 CIFAR-10 images at μ = 4 (1.75 M gradients per run). The
simulation needs only the number of samples, so the 5,085-image cifar10_subset is run for
140·50000/5085 = 1376.6 epochs, the same gradient count (tag ``data_note``).

Cost here (3 runs, schedule only): ``ci`` 1 epoch (1,271 gradients per run) about 30 s in all;
``small`` 10 epochs about 1 min; ``paper`` 1.75 M gradients per run, several minutes.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["epochs=1", "++tags.data_note=cifar10_subset_1_epoch"],
    "small": ["epochs=10", "++tags.data_note=cifar10_subset_10_epochs"],
    "paper": ["epochs=1376.6", "++tags.data_note=cifar10_subset_epochs_scaled_to_50000x140_samples"],
}

if __name__ == "__main__":
    sys.exit(main("zhang_fig1", "zhang/fig1", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
