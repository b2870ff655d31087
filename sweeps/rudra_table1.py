"""Rudra Table 1: communication overlap of Rudra-base / -adv / -adv* (simulation only, every scale < 1 min).

The paper's adversarial scenario (μ = 4, 300 MB model, ~60 learners) is simulated at every
scale; the scales differ only in how many PS updates are simulated.
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
    sys.exit(main("rudra_table1", "rudra/table1", SCALES))
