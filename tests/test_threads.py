"""Intra-op threads that fit the run's gradients when ``trainer.num_threads`` is unset (:mod:`psbench.threads`)."""

from __future__ import annotations

import json

import pytest
import torch

from psbench import threads
from psbench.models import build_model

CNN = ("model=cifar_cnn", "dataset=synthetic", "dataset.shape=[3,32,32]", "batch_size=4")
FAST = ("trainer.progress=none", "epochs=1", "trainer.max_updates=4", "logger=none", "trainer.checkpoint_every=0")


def test_the_rule_gives_one_thread_per_share_of_work_at_least_one_at_most_the_default():
    per = threads.FLOPS_PER_THREAD
    assert threads.pick(0, 16) == 1 and threads.pick(per / 2, 16) == 1
    assert threads.pick(2 * per, 16) == 2 and threads.pick(5.5 * per, 16) == 5
    assert threads.pick(1e6 * per, 16) == 16 and threads.pick(1e6 * per, 1) == 1
    counts = [threads.pick(f * per, 8) for f in range(40)]
    assert counts == sorted(counts)


def test_flops_are_counted_on_the_meta_device_and_scale_with_the_network():
    cnn = threads.gradient_flops(build_model("cifar_cnn", (3, 32, 32), 10, lrn=True), (3, 32, 32))
    mlp = threads.gradient_flops(build_model("mlp", (1, 8, 8), 10), (1, 8, 8))
    assert cnn is not None and mlp is not None
    assert 50e6 < cnn < 100e6 and 20e3 < mlp < 100e3  # ≈ 3 × the forward's multiply-adds × 2

    class NeedsValues(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(x) * float(x.sum() > 0)  # reads a value: no meta run

    assert threads.gradient_flops(NeedsValues(), (4,)) is None


@pytest.fixture
def sixteen_cores(monkeypatch):
    """torch's default as on a 16-core machine (the suite itself runs with OMP_NUM_THREADS=1)."""
    monkeypatch.setattr(threads, "_DEFAULT", [16])
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("protocol=async", "batch_size=4", "learners=8"), 1),  # 0.16 MFLOP: the MLP on digits
        (("protocol=hardsync", "batch_size=4", "learners=8"), 1),
        ((*CNN, "protocol=async"), 2),  # 4 samples × 69 MFLOP
        ((*CNN, "protocol=hardsync", "learners=30"), 16),  # λμ = 120 samples on one snapshot
    ],
)
def test_an_unset_count_fits_the_gradient_and_says_why(compose_cfg, sixteen_cores, overrides, expected):
    from psbench.assemble import build_run

    setup = build_run(compose_cfg(*FAST, "schedule_only=true", *overrides))
    assert setup.threads == expected == torch.get_num_threads()
    assert setup.threads_from.startswith("auto: ") and "at most 16" in setup.threads_from
    again = build_run(compose_cfg(*FAST, "schedule_only=true", *overrides))  # a rule of the config: the same count
    assert (again.threads, again.threads_from) == (setup.threads, setup.threads_from)


def test_a_configured_count_is_used_as_it_is(compose_cfg, sixteen_cores):
    from psbench.assemble import build_run

    setup = build_run(compose_cfg(*FAST, "schedule_only=true", "trainer.num_threads=3"))
    assert (setup.threads, setup.threads_from, torch.get_num_threads()) == (3, "trainer.num_threads", 3)


def test_the_run_records_the_count_it_trained_with(run_psbench, tmp_path):
    """torch's default 2 here; the default run's 128-sample gradients of the digits MLP (5 MFLOP) take one."""
    two = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    proc = run_psbench(*FAST, "hydra.run.dir=run", root=tmp_path, env=two)
    assert proc.returncode == 0, proc.stderr[-2000:]
    prov = json.loads((tmp_path / "run" / "summary.json").read_text())["provenance"]
    assert prov["threads"] == 1 and prov["threads_from"].startswith("auto: ") and "at most 2" in prov["threads_from"]
    proc = run_psbench(*FAST, "hydra.run.dir=set", "trainer.num_threads=2", root=tmp_path, env=two)
    prov = json.loads((tmp_path / "set" / "summary.json").read_text())["provenance"]
    assert (prov["threads"], prov["threads_from"]) == (2, "trainer.num_threads")
