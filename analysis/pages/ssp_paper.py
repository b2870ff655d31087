"""Published numbers of the SSP DNN paper (Kumar, Xie, Yin, Xing), copied from it (§6, Table 1, Figs 2–5).

Figures 2–5 are plots; the text gives the set-up and the 6-machine speed-ups, and only these are
shown beside ours.
"""

from __future__ import annotations

#: dataset tag (``dataset_stand_in``) → what the paper used (Table 1, §6.1 "Parameter Settings").
DATASETS = {
    "timit": {
        "name": "TIMIT",
        "figures": ("2", "4"),
        "features": 360,
        "classes": 2001,
        "samples": "1.1M",
        "net": "6 hidden layers × 2048 (sigmoid), about 24 million parameters",
        "batch": 100,
        "lr": 0.05,
        "staleness": 10,
        "speedup6": 3.6,
    },
    "imagenet63k": {
        "name": "ImageNet-63K",
        "figures": ("3", "5"),
        "features": 21504,
        "classes": 1000,
        "samples": "63K",
        "net": "hidden 5000, 3000, 2000 (sigmoid), about 132 million parameters",
        "batch": 1000,
        "lr": 1.0,
        "staleness": 10,
        "speedup6": 4.3,
    },
}
#: "close to 6 times faster on instance of ImageNet data set when run with 6 machines" (abstract)
ABSTRACT_IMAGENET_SPEEDUP6 = "close to 6"
MACHINES = (1, 2, 3, 4, 5, 6)  # "a computer cluster with 6 machines" (§6.1)
