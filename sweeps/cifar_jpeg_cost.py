"""What the JPEG re-encoding of ``dataset=cifar10_jpeg`` costs: the recipe on cifar10_subset's original pixels and
on the JPEG q75 counterparts of the same images.

Preset ``src/psbench/conf/experiment/reference/cifar_jpeg_cost.yaml``: Zhang Fig 3's recipe at its ``ci`` budget
(λ = 30, μ = 4, the cifar10_full network and solver, α0 = 0.001, 6 epochs of the 5,085 subset images, no lr steps)
for hardsync and 30-softsync with α0/τ (the configuration Zhang's ~18 % is about; it learns at this budget: 64.8 %
at ci against hardsync's 64.0 %), each on ``dataset=cifar10_subset`` (tag ``pixels=original``) and on
``dataset=arrays`` reading ``<root>/cache/cifar10_subset_jpeg_q75.npz`` (``pixels=jpeg_q75``), which this entry
point writes with ``python -m psbench.data.cifar_jpeg match-subset`` when it is missing (same images, order and
labels; uint8 pixels, so ``arrays`` treats them as the subset's and the recipe's ``preprocess=mean`` applies to
both). Tags ``configuration`` and ``pixels`` with the ``seed`` pair the runs.

* ``ci`` (its one scale): seeds 0–4, 20 runs. Zhang Fig 3's ci measured ~25 s a run quiet at one thread (this
  configuration's 6 epochs), so 20 runs two at a time take ~5 min quiet, ~10–15 min beside another job. The test
  set is the subset's 1,017 images: 2 SE of one configuration's error is ≥ 2.9 pp at 35 % error, so a difference
  between the arms smaller than ~4–5 pp is inside the verdict rule's noise; the runs are paired (same seed, same
  images), so the per-seed differences are the sharper measure.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import entry_command, main

NAME, PRESET = "cifar_jpeg_cost", "reference/cifar_jpeg_cost"

SEEDS = "hydra.sweeper.params.seed='choice(0,1,2,3,4)'"
SCALES = {"ci": [SEEDS, "++tags.data_note=cifar10_subset_6_epochs"]}
#: the JPEG counterparts of the subset's images, relative to the sweep's root (the preset's ``dataset.path``)
MATCHED = Path("cache") / "cifar10_subset_jpeg_q75.npz"


def ensure_matched(root: Path) -> int:
    """Write ``root / MATCHED`` with the match tool unless it exists; its exit code (0 when it exists)."""
    out = root / MATCHED
    if out.is_file():
        return 0
    from psbench.data import cifar_jpeg

    argv = ["match-subset", "--out", str(out), "--root-dir", str(root)]
    print("+ python -m psbench.data.cifar_jpeg", " ".join(argv), flush=True)
    return cifar_jpeg.main(argv)


def run(argv: list[str]) -> int:
    """``python sweeps/cifar_jpeg_cost.py [scale=ci] [override ...]``: the .npz if missing, then the sweep."""
    try:
        entry_command(NAME, PRESET, SCALES, argv)  # an unknown scale is refused before any work
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    return ensure_matched(Path(os.environ.get("PSBENCH_ROOT") or os.getcwd())) or main(NAME, PRESET, SCALES, argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
