"""Rudra Table 2 under Eq 6 as written, α = α0/n (``lr_policy=nominal_staleness``), beside Table 2's own study
(α0 over each update's measured ⟨σ⟩).

Preset ``src/psbench/conf/experiment/reference/rudra_table2_nominal.yaml``: Table 2's 23 rows, recipe and seeds.

* ``full``: Table 2's ``full`` budget and data (all of CIFAR-10 as JPEG q75, 2 epochs, no ÷10 steps), seeds 0–2.
* ``paper_jpeg``: the paper's budget (140 epochs, ÷10 after 120 and 130) on all of CIFAR-10 as JPEG q75, seed 0,
  for the two μλ ≈ 128 rows the ``full`` study under this reading puts furthest apart.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main
from sweeps.rudra_table2 import SCALES as TABLE2

SCALES = {
    "full": TABLE2["full"],
    "paper_jpeg": [
        "dataset=cifar10_jpeg",
        "hydra.sweeper.params.seed='choice(0)'",
        "hydra.sweeper.constraints=[\"case in ['s2_mu64_lam2','s18_mu8_lam18']\"]",
        "++tags.data_note=cifar10_jpeg_q75_140_epochs",
    ],
}

if __name__ == "__main__":
    sys.exit(main("rudra_table2_nominal", "reference/rudra_table2_nominal", SCALES))
