"""Zhang et al. Fig 3: CIFAR10 training loss / test error vs epoch, λ = 30, μ = 4, α0 vs α0/τ (Eq 3); trains CNNs.

7 runs: hardsync (SSGD), 1-/15-/30-softsync with α0 (30-softsync with α0 = Downpour) and with α0/τ.

* ``ci``: the whole cifar10_subset (5,085 images; test: its 1,017), 6 epochs, the paper's α0 = 0.001
  (the preset's cifar10_full recipe: mean-only inputs on the 0–255 scale, Caffe fillers, LRN,
  lr/decay multipliers), no lr steps, test error after every epoch. Labelled in every table (tags
  ``data_note``, ``scale``). Before the recipe, inputs were scaled to [0, 1] and ci had to raise α0 to
  0.01; with the paper's inputs α0 = 0.001 learns within 6 epochs. Seeds 0, 1, 2 (the report decides on ≥ 3).
  Measured here (test error after 6 epochs, mean ± std over the 3 seeds): hardsync 64.0 ± 1.1 %; α0: 1-softsync
  67.8 ± 2.1 %, 15- and 30-softsync 90.95 % (chance, every seed); α0/τ: 1-, 15-, 30-softsync 67.8 ± 2.1 %,
  68.1 ± 2.1 %, 64.8 ± 1.4 %. 21 runs: 50 min with one thread a run at a load of 12–14 (~25 s a run quiet).
* ``small`` (hours here: at a load of 12–14 about 10 min a run, 21 runs): the whole cifar10_subset (5,085
  images), 20 epochs, α0 = 0.001, ÷10 after epochs 15 and 18.
* ``full`` (~1 h here): all of CIFAR-10 as JPEG q75 (``dataset=cifar10_jpeg``: 50,000 / 10,000 images;
  ``data_note``), 5 epochs, α0 = 0.001, no lr steps, seeds 0, 1, 2. Measured here (one thread, the job's CPU
  seconds over 0.1–0.5 epoch, load 3–6, 2026-11-26): hardsync 39 s/epoch (30 gradients on one snapshot),
  1-softsync ~40 s/epoch, 15-softsync 70 s/epoch, 30-softsync 83 s/epoch (one μ = 4 gradient per update), plus 5 s
  per evaluation of the 10,000 test images and 9 s to start: 461 s per seed and epoch for the 7 curves, so
  21 runs × 5 epochs on 2 parallel jobs ≈ 3,460 s + 2 min ≈ 59 min. The issue's 3-epoch run on this data had
  hardsync at 45.4 %, 30-softsync α0 at 90 % and α0/τ at 50.6 %, so at 5 epochs the curves the claims compare
  have learned (or, with α0 at n ≥ 15, sit at chance while hardsync learned). Not decided here: "~18 % after
  140 epochs" (the page leaves it to ``paper``; no budget on this machine reaches it), and "α0/τ curves within
  2 pp" can hold only with a spread under ~0.2 pp (2 SE of two curves ≈ 1.8 pp at 40 % error: the test set's
  1.4 pp and the seeds'), so it can fail or stay unresolved.
* ``paper_jpeg``: the paper's budget (140 epochs, ÷10 after 120 and 130, §4.3.1) on all of CIFAR-10 as JPEG q75,
  seed 0, for the four curves the claims rest on: hardsync, 30-softsync with α0 (Downpour), 1- and 30-softsync
  with α0/τ (the paper: α0 stays at ~90 %, the α0/τ curves "virtually indistinguishable" at ~18 %).
* ``paper``: full CIFAR-10 (``dataset=cifar10``), 140 epochs, the §4.3.1 hyperparameters: a cluster/GPU job.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, main

SCALES = {
    "ci": [
        "dataset=cifar10_subset",
        SEEDS,
        "epochs=6",
        "optimizer.milestones=[]",
        "++tags.data_note=cifar10_subset_6_epochs",
    ],
    "small": [
        "dataset=cifar10_subset",
        SEEDS,
        "epochs=20",
        "optimizer.milestones=[15,18]",
        "++tags.data_note=cifar10_subset_20_epochs",
    ],
    "full": [
        "dataset=cifar10_jpeg",
        SEEDS,
        "epochs=5",
        "optimizer.milestones=[]",
        "++tags.data_note=cifar10_jpeg_q75_5_epochs",
    ],
    "paper_jpeg": [
        "dataset=cifar10_jpeg",
        "hydra.sweeper.params.seed='choice(0)'",
        "hydra.sweeper.constraints=[\"case in ['hardsync','s30_alpha0','s1_tau','s30_tau']\"]",
        "++tags.data_note=cifar10_jpeg_q75_140_epochs",
    ],
    "paper": ["dataset=cifar10", SEEDS],
}

if __name__ == "__main__":
    sys.exit(main("zhang_fig3", "zhang/fig3", SCALES))
