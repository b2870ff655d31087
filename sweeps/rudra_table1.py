"""Rudra Table 1: communication overlap of Rudra-base / -adv / -adv* (simulation only, every scale ~1–2 min).

The paper's adversarial scenario (μ = 4, 300 MB model, ~60 learners, 1-softsync: c = 60 gradients per
update) is simulated at every scale on the p775_cluster cost model; the scales differ only in how many
PS updates are simulated — 50, 200, 1,000 (3,000 to 60,000 gradients), the steady state the table
measures (the preset's epochs are large enough that ``trainer.max_updates`` decides). ``run_all`` runs
``paper`` at every scale.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

SCALES = {
    "ci": ["trainer.max_updates=50"],
    "small": ["trainer.max_updates=200"],
    "paper": ["trainer.max_updates=1000"],
}

if __name__ == "__main__":
    sys.exit(main("rudra_table1", "rudra/table1", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
