"""Rudra Table 3: top-5 (σ, μ, λ) by low test error and small training time (runs the 2 hardsync rows).

The other three rows of Table 3 are Table 2 rows: run ``sweeps/rudra_table2.py`` at the same scale
first (or after); the report ranks all 25 configurations of that scale. The scales are Table 2's,
so both studies train on the same data for the same number of epochs (tags ``data_note``, ``scale``):

* ``ci`` (234 s measured here, 1 thread a run, load 12–14): the whole cifar10_subset (5,085 images), 1 epoch,
  the paper's α0 = 0.001, seeds 0, 1, 2 (Table 2's scale and reason): (0,4,30) 80.5 % mean test error,
  (0,8,30) 85.4 %.
* ``small`` (estimated an hour here): all 5,085 cifar10_subset images, 20 epochs, seeds 0, 1, 2.
* ``full`` (~5 min here): all 60,000 CIFAR-10 images as JPEG q75 (``dataset=cifar10_jpeg``), 2 epochs, seeds
  0, 1, 2 (Table 2's ``full``): (0,4,30) 39 s/epoch and (0,8,30) ~40 s/epoch of one thread (measured as Table
  2's), plus 5 s per test evaluation and 9 s to start: 6 runs × 2 epochs on 2 parallel jobs ≈ 5 min. The ranking
  stays "not resolvable" on 10,000 test images (see ``sweeps/rudra_table2.py``).
* ``paper``: full CIFAR-10, 140 epochs, seeds 0–2: a cluster or GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main
from sweeps.rudra_table2 import SCALES

if __name__ == "__main__":
    sys.exit(main("rudra_table3", "rudra/table3", SCALES))
