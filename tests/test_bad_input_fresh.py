"""A fresh batch of bad input through the real ``psbench`` command: one line, exit 2, no MLflow run, a record.

Values that pass a type check but are not what they say — a float32 that is 0 once cast (``optimizer.lr=1e-50``),
counts and sizes no run can reach (``epochs=1e300``, ``learners=10**7``, a model or a data set larger than the
machine's memory), cost-model parameters that overflow the virtual clock, timeouts that overflow gloo's C ints —
each used to train nothing silently, compute forever, or end in a traceback. Each row is refused in one line
naming the key, with exit 2, before any MLflow run exists; the job's ``summary.json`` says ``failed`` with that
line. Rows marked ``built`` are refused once the run is built (they need the training set's size N or the
model), the rest by the config's declarations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from test_bad_input import _error_line

SCHEDULE = "schedule_only=true"


def _truncated_npz(root: Path) -> list[str]:
    """cifar10_subset's npz cut in half, read with the md5 check off: zipfile.BadZipFile used to escape."""
    folder = root / "data" / "cifar10-subset"
    folder.mkdir(parents=True)
    x = np.zeros((4, 3, 32, 32), np.uint8)
    np.savez(folder / "cifar10-prefix-subset.npz", x_train=x, y_train=np.arange(4), x_test=x, y_test=np.arange(4))
    raw = (folder / "cifar10-prefix-subset.npz").read_bytes()
    (folder / "cifar10-prefix-subset.npz").write_bytes(raw[: len(raw) // 2])
    return ["dataset=cifar10_subset", "+dataset.verify=false", f"paths.data_dir={root / 'data'}"]


# name: (overrides, setup(root) -> more overrides, key, words the line must hold)
Case = tuple[list[str], Callable[[Path], list[str]] | None, str, list[str]]
CASES: dict[str, Case] = {
    # ---- a float32 that is not what it says once cast
    "lr_zero_in_float32": (["optimizer.lr=1e-50"], None, "optimizer.lr", ["float32 keeps it"]),
    "adam_lr_subnormal": (["optimizer=adam", "optimizer.lr=1e-45"], None, "optimizer.lr", ["1.2e-38"]),
    "weight_decay_zero_in_float32": (["optimizer.weight_decay=1e-50"], None, "optimizer.weight_decay", ["float32"]),
    "adam_beta_zero_in_float32": (
        ["optimizer=adam", "optimizer.betas=[0.9,1e-50]"],
        None,
        "optimizer.betas",
        ["float32 keeps"],
    ),
    "gamma_zero_in_float32": (["optimizer.gamma=1e-50"], None, "optimizer.gamma", ["float32"]),
    "momentum_subnormal": (["optimizer.momentum=1e-40"], None, "optimizer.momentum", ["float32"]),
    "zero_staleness_reciprocal_inf": (
        ["lr_policy=per_gradient", "lr_policy.zero_staleness=1e-50"],
        None,
        "lr_policy.zero_staleness",
        ["reciprocal"],
    ),
    "min_staleness_reciprocal_inf": (
        ["lr_policy=mean_staleness", "lr_policy.min_staleness=1e-50"],
        None,
        "lr_policy.min_staleness",
        ["reciprocal"],
    ),
    "decay_zero_in_float32": (["lr_policy=exponential", "lr_policy.decay=1e-50"], None, "lr_policy.decay", ["float32"]),
    "clip_zero_in_float32": (["trainer.gradient_clip_val=1e-50"], None, "trainer.gradient_clip_val", ["float32"]),
    "rho_zero_in_float32": (
        ["protocol=aeasgd", "protocol.local_steps=2", "protocol.rho=1e-300"],
        None,
        "protocol.rho",
        ["float32"],
    ),
    "terngrad_clip_zero_in_float32": (
        ["compression=terngrad", "compression.clip=1e-50"],
        None,
        "compression.clip",
        ["float32"],
    ),
    # ---- counts and sizes no run can reach
    "epochs_1e300": (["epochs=1e300", SCHEDULE], None, "epochs", ["fit in this machine's memory"]),  # built
    "learners_10_million": (["learners=10000000", SCHEDULE], None, "learners", ["<= 100000"]),
    "batch_above_the_training_set": (["batch_size=1500"], None, "batch_size", ["[1, 1437]"]),  # built
    "threads_100k": (["trainer.num_threads=100000"], None, "trainer.num_threads", ["[1, 1024]"]),
    "memory_budget_above_the_machine": (
        ["trainer.memory_budget_mb=1e12"],
        None,
        "trainer.memory_budget_mb",
        ["this machine's memory"],
    ),
    "mlp_of_a_billion_units": (["model.hidden=[1000000000]"], None, "model.hidden", ["fit in half"]),  # built
    "synthetic_samples_above_memory": (
        ["dataset=synthetic", "dataset.num_train=100000000"],
        None,
        "dataset.shape",
        ["fit in half this machine's memory"],
    ),
    "synthetic_shape_above_memory": (
        ["dataset=synthetic", "dataset.shape=[100000,100000]"],
        None,
        "dataset.shape",
        ["fit in half"],
    ),
    "synthetic_classes_10_to_11": (
        ["dataset=synthetic", "dataset.num_classes=100000000000"],
        None,
        "dataset.num_classes",
        ["2147483647"],
    ),
    "ssp_bound_10_to_20": (
        ["protocol=ssp", "protocol.staleness_bound=100000000000000000000", SCHEDULE],
        None,
        "protocol.staleness_bound",
        ["2147483647"],
    ),
    "local_steps_10_to_12": (
        ["protocol=agn", "protocol.local_steps=1000000000000"],
        None,
        "protocol.local_steps",
        ["2147483647"],
    ),
    "qsgd_levels_past_float32": (
        ["compression=qsgd", "compression.levels=1000000000000"],
        None,
        "compression.levels",
        ["exact in float32"],
    ),
    "qsgd_bucket_10_to_20": (
        ["compression=qsgd", "compression.bucket=100000000000000000000"],
        None,
        "compression.bucket",
        ["2147483647"],
    ),
    "eval_every_10_to_20": (
        ["trainer.eval_every_epochs=100000000000000000000"],
        None,
        "trainer.eval_every_epochs",
        ["2147483647"],
    ),
    "updates_per_step_10_to_20": (
        ["trainer.updates_per_step=100000000000000000000"],
        None,
        "trainer.updates_per_step",
        ["2147483647"],
    ),
    "max_updates_10_to_20": (
        ["trainer.max_updates=100000000000000000000"],
        None,
        "trainer.max_updates",
        ["2147483647"],
    ),
    "eval_batch_10_to_12": (["dataset.eval_batch_size=1000000000000"], None, "dataset.eval_batch_size", ["2147483647"]),
    "reference_batch_10_to_20": (
        ["lr_policy=sqrt_scaling", "lr_policy.reference_batch=100000000000000000000"],
        None,
        "lr_policy.reference_batch",
        ["2147483647"],
    ),
    "learners_per_node_10_to_12": (
        ["topology.learners_per_node=1000000000000", SCHEDULE],
        None,
        "topology.learners_per_node",
        ["100000"],
    ),
    "nodes_10_to_12": (["topology.nodes=1000000000000", SCHEDULE], None, "topology.nodes", ["100000"]),
    # ---- cost-model parameters that overflowed the virtual clock (or silently made it absurd)
    "latency_1e300": (["hardware.latency_s=1e300", SCHEDULE], None, "hardware.latency_s", ["1e+06"]),
    "bandwidth_1e-300": (["hardware.bandwidth_Bps=1e-300", SCHEDULE], None, "hardware.bandwidth_Bps", ["[1, "]),
    "jitter_cv_overflow": (["hardware.jitter_cv=1e300", SCHEDULE], None, "hardware.jitter_cv", ["[0, 10]"]),
    "per_sample_1e300": (
        ["hardware.compute.per_sample_s=1e300", SCHEDULE],
        None,
        "hardware.compute.per_sample_s",
        ["(0, 1000]"],
    ),
    "ps_shards_a_billion": (["hardware.ps_shards=1000000000", SCHEDULE], None, "hardware.ps_shards", ["100000"]),
    "straggler_slowdown_1e300": (
        ["hardware.stragglers.slowdown=1e300", SCHEDULE],
        None,
        "hardware.stragglers.slowdown",
        ["1e+06"],
    ),
    "contention_1e300": (["hardware.contention=1e300", SCHEDULE], None, "hardware.contention", ["[0, 1000]"]),
    "node_share_1e300": (["hardware.node_share=1e300", SCHEDULE], None, "hardware.node_share", ["[0, 1000]"]),
    "ps_apply_rate_1e-300": (["hardware.ps_apply_Bps=1e-300", SCHEDULE], None, "hardware.ps_apply_Bps", ["[1, "]),
    # ---- timeouts and delays that overflowed gloo's and the OS's C ints
    "dist_timeout_1e300": (
        ["engine=dist", "engine.timeout_s=1e300", "learners=2"],
        None,
        "engine.timeout_s",
        ["at most a week"],
    ),
    "dist_connect_timeout_1e300": (
        ["engine=dist", "engine.connect_timeout_s=1e300", "learners=2"],
        None,
        "engine.connect_timeout_s",
        ["at most a week"],
    ),
    "dist_learner_threads_100k": (
        ["engine=dist", "engine.learner_threads=100000", "learners=2"],
        None,
        "engine.learner_threads",
        ["[1, 1024]"],
    ),
    "dist_learner_delay_1e300": (
        ["engine=dist", "engine.learner_delay_s={0:1e300}", "learners=2"],
        None,
        "engine.learner_delay_s",
        ["[0, 86400]"],
    ),
    "lock_timeout_1e300": (["logger.lock_timeout_s=1e300"], None, "logger.lock_timeout_s", ["at most a day"]),
    # ---- the rest
    "plus_on_a_key_the_config_has": (
        ["+trainer.batching=loop"],
        None,
        "+trainer.batching",
        ["trainer.batching=loop without the +"],
    ),
    "truncated_npz_without_md5_check": ([], _truncated_npz, "", ["cifar10_subset: cannot read"]),  # built
}


@pytest.mark.parametrize("case", list(CASES))
def test_fresh_bad_input_is_one_line_exit_2_no_run_and_a_record(run_psbench, mlflow_runs, psbench_root, case):
    args, setup, key, words = CASES[case]
    db = psbench_root / "mlflow.db"
    args = [*args, *(setup(psbench_root) if setup else [])]
    before = db.read_bytes()
    run_dir = psbench_root / "run"
    proc = run_psbench(*args, "trainer.progress=none", f"hydra.run.dir={run_dir}", root=psbench_root, timeout=300)
    if key:
        line = _error_line(proc, key)
    else:  # a data file: the line names the file, not a key (psbench.errors.DataError)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        line = lines[0]
        assert str(psbench_root / "data") in line, line
    for w in words:
        assert w in line, (w, line)
    other = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("psbench: error:")]
    assert other == [], other  # the line is all the user sees
    assert db.read_bytes() == before and mlflow_runs(psbench_root) == []  # no experiment, no run
    if (run_dir / ".hydra").is_dir():  # the job started (Hydra made its dir): its record says why it ended
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "failed" and summary["mlflow_run_id"] is None
        assert line == f"psbench: error: {summary['failure_reason']}"


def test_the_batch_is_fresh_and_large_enough():
    """At least 40 rows, none of them a row of tests/test_bad_input.py."""
    from test_bad_input import CASES as EARLIER

    assert len(CASES) >= 40
    assert not {tuple(c[0]) for c in CASES.values() if c[0]} & {tuple(c[0]) for c in EARLIER.values()}
