"""SSP (Kumar et al.) Figs 3 and 5, ImageNet-63K-shaped synthetic stand-in: objective vs time, speed-up, 1–6 machines.

ImageNet-63K is not available: ``dataset=synthetic`` with 21504 features / 1000 classes (tag
``data_note``); the paper's sigmoid MLP is ``model=ssp_mlp``; ci/small shrink it and use ReLU
(``model_note``); SSP, s = 10. ``ci`` and ``small`` run seeds 0, 1, 2 per machine count
(the report decides "more machines converge faster" only on ≥ 3 seeds); ``paper`` one seed.

* ``ci`` (one seed: 68 s here, 2026-11-24, parallel on 2 cores; 3 seeds × 6 machine counts): one hidden layer of
  128 instead of 5000-3000-2000, 6,000 samples,
  5 epochs, 10 with ≥ 2 machines (30/60 updates of the paper's mini-batch 1000), learning rate 1
  (the paper's).
* ``small`` (about an hour here; not run yet): hidden 1000-600-400, 20,000 samples, 10 epochs (20),
  mini-batch 1000.
* ``paper``: 5000-3000-2000 (≈ 132 M parameters), 63,000 samples, 10 epochs (20 with ≥ 2 machines): a
  cluster/GPU job (the data alone are 5.4 GB of float32).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, main

RELU = ["model.activation=relu", "++tags.model_note=relu_ssp_mlp_shrunk"]  # a narrow sigmoid net barely moves
SCALES = {
    "ci": [
        SEEDS,
        *RELU,
        "model.hidden=[128]",
        "dataset.num_train=6000",
        "dataset.num_test=1000",
        "hydra.sweeper.derived.epochs='5*min(learners,2)'",
        "hardware.compute.per_sample_s=1.729e-4",  # 6 * 2,881,640 / 1e11
        "++tags.data_note=synthetic_21504x1000_for_ImageNet-63K_6000_samples_hidden128",
    ],
    "small": [
        SEEDS,
        *RELU,
        "model.hidden=[1000,600,400]",
        "dataset.num_train=20000",
        "hydra.sweeper.derived.epochs='10*min(learners,2)'",
        "hardware.compute.per_sample_s=1.365e-3",  # 6 * 22,747,000 / 1e11
        "++tags.data_note=synthetic_21504x1000_for_ImageNet-63K_20000_samples_hidden1000-600-400",
    ],
    "paper": [],
}

if __name__ == "__main__":
    sys.exit(main("ssp_fig3_5", "ssp/fig3_5", SCALES))
