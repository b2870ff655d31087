"""SSP (Kumar et al.) Figs 2 and 4 on a TIMIT-shaped synthetic stand-in: objective vs time and speed-up, 1–6 machines.

TIMIT is not available: ``dataset=synthetic`` with 360 features / 2001 classes (tag ``data_note``);
the paper's sigmoid MLP is ``model=ssp_mlp``; ci/small shrink it and use ReLU (tag ``model_note``); SSP, s = 10.
``ci`` and ``small`` run seeds 0, 1, 2 per machine count (the report decides "more machines converge faster" only
on ≥ 3 seeds); ``paper`` one seed.

* ``ci`` (one seed: 47 s here, 2026-11-24, parallel on 2 cores; 3 seeds × 6 machine counts): hidden [256, 256]
  instead of 6 × 2048, 20,000 samples, 4 epochs (8 with ≥ 2 machines),
  learning rate 1.0 instead of 0.05 (a narrow ReLU net does not move at 0.05 in 800 updates here).
  Compute per sample follows the net's size (6·P/1e11 s, see the preset).
* ``small`` (about an hour here; not run yet): 6 × 512 hidden, 200,000 samples, 5 epochs (10), learning rate 0.05.
* ``paper``: 6 × 2048 (≈ 24 M parameters), 1.1 M samples, 10 epochs (20 with ≥ 2 machines: §6.2's t_n
  needs p reached), learning rate 0.05: a cluster/GPU job.
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
        "model.hidden=[256,256]",
        "dataset.num_train=20000",
        "dataset.num_test=2000",
        "hydra.sweeper.derived.epochs='4*min(learners,2)'",
        "optimizer.lr=1.0",
        "hardware.compute.per_sample_s=4.03e-5",  # 6 * 672,465 / 1e11
        "++tags.data_note=synthetic_360x2001_for_TIMIT_20000_samples_hidden256x2_lr1",
    ],
    "small": [
        SEEDS,
        *RELU,
        "model.hidden=[512,512,512,512,512,512]",
        "dataset.num_train=200000",
        "hydra.sweeper.derived.epochs='5*min(learners,2)'",
        "hardware.compute.per_sample_s=1.515e-4",  # 6 * 2,524,625 / 1e11
        "++tags.data_note=synthetic_360x2001_for_TIMIT_200000_samples_hidden512x6",
    ],
    "paper": [],
}

if __name__ == "__main__":
    sys.exit(main("ssp_fig2_4", "ssp/fig2_4", SCALES))
