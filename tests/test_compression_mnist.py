"""TernGrad Fig 3 at reduced scale: LeNet on MNIST, TernGrad within 1 pp of fp32 for 2 and 8 learners.

Slow (deselected by default; ``pytest -m slow tests/test_compression_mnist.py``). Total mini-batch 64 split
over N learners (TernGrad §4.1), hardsync, momentum SGD α0 = 0.01, the same schedule and seed for every
variant; one epoch (937 updates) instead of the paper's 10K iterations. The no-clip variant
(TernGrad-noclip, Table 2) is recorded next to it and must be worse or equal (within test-set noise).
Six LeNet trainings: 10–30 minutes on a shared 2-core machine.
"""

from __future__ import annotations

import json

import pytest

from data_files import REAL_DATA, needs_real_mnist
from psbench.train import train


@pytest.mark.slow
@needs_real_mnist
@pytest.mark.parametrize("learners", [2, 8])
def test_terngrad_lenet_mnist_within_1pp_of_fp32(compose_cfg, tmp_path, learners):
    base = (
        "model=lenet",
        "dataset=mnist",
        f"paths.data_dir={REAL_DATA}",
        f"learners={learners}",
        f"batch_size={64 // learners}",
        "epochs=1",
        "optimizer.lr=0.01",
        "logger=none",
        "trainer.progress=none",
        "seed=0",
    )
    runs = {}
    for label, extra in (
        ("fp32", ()),
        ("terngrad", ("compression=terngrad",)),
        ("noclip", ("compression=terngrad", "compression.clip=null")),
    ):
        out = tmp_path / label
        out.mkdir()
        s = train(compose_cfg(*base, *extra), out)
        runs[label] = {k: s[k] for k in ("test_error", "bytes_pushed", "bytes_pulled", "sim_time_s", "fit_time_s")}
        print(json.dumps({"learners": learners, label: runs[label]}), flush=True)
    assert runs["terngrad"]["test_error"] <= runs["fp32"]["test_error"] + 0.01
    # Table 2: noclip is worse or equal. On 10,000 test images at ~2 % error the standard deviation of a
    # difference of two runs is ≈ 0.2 pp, so "equal" is read as within 0.25 pp (λ = 2 measured: clip 2.12 %,
    # noclip 2.05 %, fp32 1.98 %).
    assert runs["noclip"]["test_error"] >= runs["terngrad"]["test_error"] - 0.0025
