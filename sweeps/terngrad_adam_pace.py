"""Why TernGrad trails fp32 in TernGrad Table 1 at ``full``: Table 1's fp32 at N = 2 with Adam's LR times the step
ratio TernGrad's noise leaves (``python -m analysis.adam_step``: 0.60), beside Table 1's runs.

Preset ``src/psbench/conf/experiment/reference/terngrad_adam_pace.yaml``. The TernGrad Table 1 page compares these
runs with its fp32 and TernGrad rows at N = 2, epoch by epoch.

* ``full`` (its one scale): Table 1's ``full`` budget and data (all of CIFAR-10 as JPEG q75, 3 epochs), seeds 0, 1,
  2: 3 runs of ~330 s at one thread (Table 1's fp32 N = 2 runs), ~10 min two at a time.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SEEDS, main

SCALES = {"full": [SEEDS, "dataset=cifar10_jpeg", "epochs=3", "++tags.data_note=cifar10_jpeg_q75_3_epochs"]}

if __name__ == "__main__":
    sys.exit(main("terngrad_adam_pace", "reference/terngrad_adam_pace", SCALES))
