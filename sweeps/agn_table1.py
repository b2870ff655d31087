"""AGN Table 1 (Hermans et al. §4): AGN vs asynchronous EASGD per (n workers, H local steps) on MNIST; trains.

The cells are the cases of one grid study (``experiment=agn/table1``, AEASGD's ρ = 0.9/(n·η)); the report
(``python -m analysis``, page ``agn_table1``) puts the paper's numbers beside ours: the learners' final mini-batch
training accuracy (what the paper's curves show) and the center's test accuracy, simulated training time and the
temporal efficiency E(AGN, AEASGD) (Eq 4) from the runs' MLflow histories. Simulated times come from our cost
model (``hardware=laptop``), so only their ratios compare with the paper's.

* ``ci`` (``experiment=agn/table1_ci``): n ∈ {10, 20}, H ∈ {10, 20, 40} (12 cells; the preset prunes the others
  unrun), 3 epochs of MNIST on an MLP 784-128-10, seeds 0, 1, 2 (the report decides a claim on ≥ 3 seeds per
  configuration). One seed of the 12 cells took ~5 min here, so about 15 min (not re-timed).
* ``paper``: every cell (n ∈ {10, 20, 40}, H ∈ {10, 15, …, 40}), 40 epochs of the preset's convnet (agn_net),
  seed 0: a cluster job.

The trials run one at a time at every scale (as ``--serial``), with torch's default threads, as this table's runs
always have. More seeds: ``hydra.sweeper.params.seed='choice(0,1,2,3)'`` (a re-run adds only the missing trials).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, SERIAL, main

SCALES = {
    "ci": [SEEDS],
    "paper": [],
}
EXPERIMENT = {"ci": "agn/table1_ci", "paper": "agn/table1"}

if __name__ == "__main__":
    sys.exit(main("agn_table1", EXPERIMENT, SCALES, [*sys.argv[1:], SERIAL]))
