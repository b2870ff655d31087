"""Rudra Fig 8: speed-up of the training time vs λ for μ = 128 and μ = 4, three protocols (simulation only).

Every scale is a schedule (``schedule_only=true``, no training) of the 32 cases of
``src/psbench/conf/experiment/rudra/fig8.yaml`` on the p775_cluster cost model; the scales differ in the number of
epochs of cifar10_subset (5,085 images) they simulate — a speed-up is a ratio of times per sample (the
report divides by the samples each schedule holds: hardsync runs whole updates only), so it does
not depend on the data set's size once the pipeline is in steady state (tags ``data_note``).

* ``ci`` (269 s measured here, mostly the start of each of the 32 jobs): 10 epochs (≈ 51,000 samples).
* ``small`` (estimated 2–5 min here): 40 epochs (≈ 203,000 samples).
* ``paper`` (143 s measured here): 140 epochs of cifar10_subset (≈ 712,000 samples, 1/10 of the
  paper's 140 CIFAR-10 epochs; the full CIFAR-10 is not available here).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["epochs=10", "++tags.data_note=cifar10_subset_10_epochs_simulated"],
    "small": ["epochs=40", "++tags.data_note=cifar10_subset_40_epochs_simulated"],
    "paper": ["epochs=140", "++tags.data_note=cifar10_subset_140_epochs_simulated"],
}

if __name__ == "__main__":
    sys.exit(main("rudra_fig8", "rudra/fig8", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
