"""Rudra Fig 4 (Zhang Fig 1): staleness of 1-, 2- and 30-softsync with λ = 30 (simulation only).

``paper``: 140 epochs of 50,000 CIFAR-10 images at μ = 128 (54,687 gradients per run). The
simulation needs only the number of samples, so the 5,085-image cifar10_subset is run for
140·50000/5085 = 1376.6 epochs, the same gradient count (tag ``data_note``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

NOTE = "++tags.data_note=cifar10_subset_epochs_scaled_to_50000x140_samples"
SCALES = {
    "ci": ["epochs=10", "++tags.data_note=cifar10_subset_10_epochs"],
    "small": ["epochs=140", "++tags.data_note=cifar10_subset_140_epochs"],
    "paper": ["epochs=1376.6", NOTE],
}

if __name__ == "__main__":
    sys.exit(main("rudra_fig4", "rudra/fig4", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
