"""Rudra Table 4 (ImageNet): simulated training time per epoch of the 4 configurations (no training).

The validation errors need ImageNet and are not reproduced; the report shows the paper's. Every
scale is a schedule (``schedule_only=true``) of ``src/psbench/conf/experiment/rudra/table4.yaml`` (AlexNet of
§4.2 on synthetic 3×256×256 images, compute time fitted to the paper's 54 h/epoch baseline, P775
links and PS); the scales differ in how many samples they simulate; minutes/epoch = simulated time
per sample × 1.2 M (tags ``data_note``):

* ``ci`` (254 s measured here, mostly building the 298 MB model per job): 6,400 samples per case.
* ``small`` (47 s measured here): 64,000 samples.
* ``paper`` (84 s measured here): 1,200,000 samples, one ImageNet epoch.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main

_NOTE = "++tags.data_note=synthetic_imagenet_shape_alexnet_{}_samples_simulated"
SCALES = {
    "ci": ["epochs=100", _NOTE.format(6400)],
    "small": ["epochs=1000", _NOTE.format(64000)],
    "paper": ["epochs=18750", _NOTE.format(1200000)],
}

if __name__ == "__main__":
    sys.exit(main("rudra_table4", "rudra/table4", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
