"""The ``dataset`` config group: one option per data set of :mod:`psbench.data`, with its keys."""

from __future__ import annotations

from psbench.schema import Group, Keys, boolean, integer, number, one_of, sequence

#: the data layers of the papers' code (:mod:`psbench.data.preprocess`; kept here torch-free)
PREPROCESS = ("unit_mean", "mean", "symmetric", "per_image", "minmax250")

_COMMON: Keys = {
    "download": boolean(),                                         # fetch the standard files if missing
    "eval_batch_size": integer(1),
    "subset": integer(1, null="all training samples", words="(the first N training samples)"),
    "verify": boolean().optional(),                            # md5 checks of the raw files
    "preprocess": one_of(*PREPROCESS).optional(),                 # the paper's data layer
}
DATASET_KEYS: dict[str, Keys] = {
    "digits": {**_COMMON, "test_size": integer(1, 1796).optional()},
    "mnist": _COMMON,
    "fashion_mnist": _COMMON,
    "cifar10": _COMMON,
    "cifar10_subset": _COMMON,
    "synthetic": {
        **_COMMON,
        "shape": sequence(integer(1), min_length=1, what="a list of integers >= 1, e.g. [1, 8, 8]"),
        "num_classes": integer(2),
        "num_train": integer(1),
        "num_test": integer(1),
        "separation": number(0).optional(),
        "noise": number(0).optional(),
    },
}
DATASET_NAMES = tuple(DATASET_KEYS)
DATASET = Group(DATASET_KEYS)
