"""Rudra Table 3: top-5 (σ, μ, λ) by low test error and small training time (runs the 2 hardsync rows).

The other three rows of Table 3 are Table 2 rows: run ``sweeps/rudra_table2.py`` at the same scale
first (or after); the report ranks all 25 configurations of that scale. The scales are Table 2's,
so both studies train on the same data for the same number of epochs (tags ``data_note``, ``scale``):

* ``ci`` (234 s measured here, 1 thread a run, load 12–14): the whole cifar10_subset (5,085 images), 1 epoch,
  the paper's α0 = 0.001, seeds 0, 1, 2 (Table 2's scale and reason): (0,4,30) 80.5 % mean test error,
  (0,8,30) 85.4 %.
* ``small`` (estimated an hour here): all 5,085 cifar10_subset images, 20 epochs, seeds 0, 1, 2.
* ``paper``: full CIFAR-10, 140 epochs, seeds 0–2: a cluster or GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main
from sweeps.rudra_table2 import SCALES

if __name__ == "__main__":
    sys.exit(main("rudra_table3", "rudra/table3", SCALES))
