"""Why Rudra Table 2's μλ ≈ 128 rows spread at ``full``: each row's PS updates on one learner, without staleness
(batch c·μ at the row's mean LR), beside Table 2's runs.

Preset ``src/psbench/conf/experiment/reference/rudra_table2_no_staleness.yaml``. The Rudra Table 2 page sets each
row's error beside its twin's: the difference is what staleness costs that row at this budget.

* ``full`` (its one scale): Table 2's ``full`` budget and data (all of CIFAR-10 as JPEG q75, 2 epochs, no ÷10
  steps), seeds 0, 1, 2: 18 runs, 16 min here two at a time (2026-11-27).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main
from sweeps.rudra_table2 import SCALES as TABLE2

#: Table 2's own full budget, data and seeds: a row and its twin differ only in the staleness
SCALES = {"full": TABLE2["full"]}

if __name__ == "__main__":
    sys.exit(main("rudra_table2_no_staleness", "reference/rudra_table2_no_staleness", SCALES))
