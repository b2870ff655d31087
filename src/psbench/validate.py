"""Check a composed psbench config before any work is done.

:func:`validate` raises :class:`~psbench.errors.ConfigError` naming the first offending key,
its value and what is allowed; the CLI prints that as one line. The allowed names live in
the simulation core (protocols, lr policies, topologies) or in the tuples below, one place
each; ``tests/test_validate.py`` checks that they match the option files in ``conf/``.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from psbench.cluster.topology import TOPOLOGIES
from psbench.errors import ConfigError, require
from psbench.lr.policies import LR_POLICIES
from psbench.ps.local import LOCAL_PROTOCOLS, is_elastic
from psbench.ps.protocols import PROTOCOLS

# Protocol, lr-policy and topology names are the simulation core's own tuples (imported
# above); the config-only sets live here.
MODELS = ("mlp", "lenet", "cifar_cnn", "cifarnet", "alexnet", "googlenet", "vgg_a", "ssp_mlp", "agn_net")
DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10", "cifar10_subset", "synthetic")
# option -> the keys (besides ``name``) it uses; a key that only other options use is an
# error (protocol=hardsync +protocol.n=4). Options not listed use no extra key.
PROTOCOL_KEYS: dict[str, tuple[str, ...]] = {
    "softsync": ("n",), "ssp": ("staleness_bound",),
    **{name: ("local_steps", "rho") if is_elastic(name) else ("local_steps",) for name in LOCAL_PROTOCOLS},
}
LR_POLICY_KEYS: dict[str, tuple[str, ...]] = {
    "sqrt_scaling": ("reference_batch",),
    "mean_staleness": ("min_staleness",),
    "per_gradient": ("zero_staleness",),
    "exponential": ("decay",),
}
OPTIMIZERS = ("sgd", "adagrad", "adam")
COMPRESSIONS = ("none", "fp16", "qsgd", "topk", "randomk", "signsgd", "terngrad")  # = psbench.compression's
# codec -> its keys (psbench.compression.allowed_keys without ``name``; kept torch-free here, a test holds them equal)
COMPRESSION_KEYS: dict[str, tuple[str, ...]] = {
    "fp16": ("error_feedback",),
    "qsgd": ("error_feedback", "levels", "bucket"),
    "topk": ("error_feedback", "k"),
    "randomk": ("error_feedback", "k"),
    "signsgd": ("error_feedback", "scale"),
    "terngrad": ("error_feedback", "clip", "wire", "share_scalers", "float_last_layer", "localize"),
}
ENGINES = ("sim", "dist")
LOGGERS = ("mlflow", "none")
PROGRESS = ("auto", "rich", "plain", "none")


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


def _one_of(options: Any) -> str:
    return "one of " + ", ".join(options)


def _int_at_least(cfg: Any, key: str, lo: int) -> int:
    v = _get(cfg, key)
    require(_is_int(v) and v >= lo, key, v, f"an integer >= {lo}")
    return v


def _num(cfg: Any, key: str, ok: Any, allowed: str) -> float:
    v = _get(cfg, key)
    require(_is_num(v) and ok(v), key, v, allowed)
    return v


def _get(cfg: Any, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ConfigError(key, None, "a value (the key is missing from the config)")
        node = node[part]
    return node


def _name(cfg: Any, group: str, allowed: Any) -> str:
    v = _get(cfg, f"{group}.name")
    require(v in allowed, f"{group}.name", v, _one_of(allowed))
    return v


def _keys_used(cfg: Any, group: str, names: tuple[str, ...], keys: Mapping[str, tuple[str, ...]]):
    """Check ``{group}.name`` against ``names``; refuse a key that only other options use."""
    name = _name(cfg, group, names)
    for key in sorted({k for ks in keys.values() for k in ks} - set(keys.get(name, ()))):
        if key in cfg[group]:
            users = "|".join(o for o, ks in keys.items() if key in ks)
            raise ConfigError(f"{group}.{key}", cfg[group][key], f"only with {group}={users}")
    return name


def check_writable_dir(key: str, path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if needed and prove it is writable by writing a probe file.

    ``os.access`` is not enough: tests and CI run as root, for whom a chmod-0 dir is still
    writable while ``/proc/...`` or a path under a regular file is not.
    """
    p = Path(path)
    probe = p / f".psbench-write-probe-{uuid.uuid4().hex}"
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError(key, str(p), f"a writable directory ({reason})") from None
    return p


def validate(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` for the first invalid value in a composed config.

    Everything checked here is cheap and local (no data files are opened; the data
    modules raise :class:`~psbench.errors.DataError` for those). ``cfg.paths.output_dir``
    is created if missing and probed for writability.
    """
    learners = _int_at_least(cfg, "learners", 1)
    _int_at_least(cfg, "batch_size", 1)
    epochs = _get(cfg, "epochs")
    require(_is_num(epochs) and epochs > 0, "epochs", epochs, "a number > 0")
    seed = _get(cfg, "seed")
    require(_is_int(seed), "seed", seed, "an integer")
    so = _get(cfg, "schedule_only")
    require(isinstance(so, bool), "schedule_only", so, "true or false")
    resume = _get(cfg, "resume")
    require(resume is None or (isinstance(resume, str) and resume != ""), "resume", resume,
            "null, auto, or the path of a run dir to resume")

    _validate_model(cfg, so)
    _validate_dataset(cfg)
    _validate_protocol(cfg, learners)
    _validate_lr_policy(cfg)
    _validate_optimizer(cfg)
    _validate_compression(cfg)
    _name(cfg, "topology", TOPOLOGIES)
    _int_at_least(cfg, "topology.learners_per_node", 1)
    _int_at_least(cfg, "topology.broadcast_fanout", 1)
    _validate_hardware(cfg)
    if _name(cfg, "engine", ENGINES) == "dist":
        from psbench.engine.launcher import check_config

        check_config(cfg)
        require(resume is None, "resume", resume, "null with engine=dist (dist runs are not checkpointed)")
        stop = _get(cfg, "trainer.stop_after_updates")
        require(stop is None, "trainer.stop_after_updates", stop, "null with engine=dist")
    _validate_trainer(cfg)
    _name(cfg, "logger", LOGGERS)
    check_writable_dir("paths.output_dir", _get(cfg, "paths.output_dir"))


def _validate_model(cfg: DictConfig, schedule_only: bool) -> None:
    """The model name; ``model.batchnorm`` only for schedule-only runs (the gradient path cannot train BN)."""
    _name(cfg, "model", MODELS)
    bn = cfg.model.get("batchnorm", False)
    require(isinstance(bn, bool), "model.batchnorm", bn, "true or false")
    require(not bn or schedule_only, "model.batchnorm", bn,
            "false unless schedule_only=true (learners' gradients are vmapped over stacked weight snapshots, "
            "where BatchNorm cannot update its running statistics)")


def _validate_dataset(cfg: DictConfig) -> None:
    name = _name(cfg, "dataset", DATASETS)
    _int_at_least(cfg, "dataset.eval_batch_size", 1)
    subset = _get(cfg, "dataset.subset")
    require(subset is None or (_is_int(subset) and subset >= 1), "dataset.subset", subset,
            "null or an integer >= 1")
    if name == "synthetic":
        shape = _get(cfg, "dataset.shape")
        require(
            len(shape) >= 1 and all(_is_int(d) and d >= 1 for d in shape),
            "dataset.shape", list(shape), "a list of integers >= 1, e.g. [1, 8, 8]",
        )
        _int_at_least(cfg, "dataset.num_classes", 2)
        _int_at_least(cfg, "dataset.num_train", 1)
        _int_at_least(cfg, "dataset.num_test", 1)


def _validate_protocol(cfg: DictConfig, learners: int) -> None:
    name = _keys_used(cfg, "protocol", PROTOCOLS, PROTOCOL_KEYS)
    if name == "softsync":
        n = _get(cfg, "protocol.n")
        require(_is_int(n) and 1 <= n <= learners, "protocol.n", n,
                f"an integer with 1 <= n <= learners (λ={learners})")
    elif name == "ssp":
        _int_at_least(cfg, "protocol.staleness_bound", 0)
    elif name in LOCAL_PROTOCOLS:
        _int_at_least(cfg, "protocol.local_steps", 1)
        if is_elastic(name):  # elastic moves ρη(θ_l − θ̃) with ρη in (0, 1]: at most all the way to the center
            lr = _get(cfg, "optimizer.lr")
            _num(cfg, "protocol.rho", lambda v: v > 0 and (not _is_num(lr) or v * lr <= 1),
                 f"a number > 0 with rho * optimizer.lr <= 1 (optimizer.lr={lr})")


def _validate_lr_policy(cfg: DictConfig) -> None:
    name = _keys_used(cfg, "lr_policy", LR_POLICIES, LR_POLICY_KEYS)
    if name == "sqrt_scaling":
        _int_at_least(cfg, "lr_policy.reference_batch", 1)
    elif name == "mean_staleness":
        _num(cfg, "lr_policy.min_staleness", lambda v: v > 0, "a number > 0")
    elif name == "per_gradient":
        _num(cfg, "lr_policy.zero_staleness", lambda v: v > 0, "a number > 0")
    elif name == "exponential":
        _num(cfg, "lr_policy.decay", lambda v: 0 < v <= 1, "a number in (0, 1]")


def _validate_optimizer(cfg: DictConfig) -> None:
    _name(cfg, "optimizer", OPTIMIZERS)
    _num(cfg, "optimizer.lr", lambda v: v > 0, "a number > 0")
    if "momentum" in cfg.optimizer:
        _num(cfg, "optimizer.momentum", lambda v: 0 <= v < 1, "a number in [0, 1)")
    if "weight_decay" in cfg.optimizer:
        _num(cfg, "optimizer.weight_decay", lambda v: v >= 0, "a number >= 0")
    if "milestones" in cfg.optimizer:
        ms = list(_get(cfg, "optimizer.milestones"))
        require(
            all(_is_num(m) and m > 0 for m in ms) and ms == sorted(ms),
            "optimizer.milestones", ms, "an increasing list of epochs > 0",
        )
    if "gamma" in cfg.optimizer:
        _num(cfg, "optimizer.gamma", lambda v: 0 < v <= 1, "a number in (0, 1]")
    if cfg.optimizer.get("poly_power") is not None:  # TernGrad §4: polynomial decay to zero
        _num(cfg, "optimizer.poly_power", lambda v: v > 0, "null (no polynomial decay) or a number > 0")
        _num(cfg, "optimizer.poly_epochs", lambda v: v > 0,
             "a number of epochs > 0 (where the polynomial decay reaches zero)")


def _validate_hardware(cfg: DictConfig) -> None:
    _num(cfg, "hardware.compute.overhead_s", lambda v: v >= 0, "a number >= 0 (seconds)")
    _num(cfg, "hardware.compute.per_sample_s", lambda v: v > 0, "a number > 0 (seconds)")
    _num(cfg, "hardware.bandwidth_Bps", lambda v: v > 0, "a number > 0 (bytes/s)")
    _num(cfg, "hardware.intra_node_bandwidth_Bps", lambda v: v > 0, "a number > 0 (bytes/s)")
    _num(cfg, "hardware.latency_s", lambda v: v >= 0, "a number >= 0 (seconds)")
    _num(cfg, "hardware.ps_service_s", lambda v: v >= 0, "a number >= 0 (seconds)")
    _num(cfg, "hardware.ps_apply_Bps", lambda v: v > 0, "a number > 0 (bytes/s)")
    _num(cfg, "hardware.jitter_cv", lambda v: v >= 0, "a number >= 0")
    _num(cfg, "hardware.ps_jitter_cv", lambda v: v >= 0, "a number >= 0")
    _num(cfg, "hardware.stragglers.fraction", lambda v: 0 <= v <= 1, "a number in [0, 1]")
    _num(cfg, "hardware.stragglers.slowdown", lambda v: v >= 1, "a number >= 1")
    tail = _get(cfg, "hardware.heavy_tail")
    require(tail is None or (_is_num(tail) and tail > 1), "hardware.heavy_tail", tail,
            "null or a Pareto shape > 1")
    cal = _get(cfg, "hardware.calibrate")
    require(isinstance(cal, bool), "hardware.calibrate", cal, "true or false")


def _validate_compression(cfg: DictConfig) -> None:
    name = _keys_used(cfg, "compression", COMPRESSIONS, COMPRESSION_KEYS)
    if name != "none" and _get(cfg, "protocol.name") in LOCAL_PROTOCOLS:
        raise ConfigError("compression.name", name, "none with the local-step protocols (" +
                          ", ".join(LOCAL_PROTOCOLS) + ")")
    c = cfg.compression
    for key in ("error_feedback", "share_scalers", "float_last_layer", "localize"):
        if key in c:
            require(isinstance(c[key], bool), f"compression.{key}", c[key], "true or false")
    if name == "qsgd":
        _int_at_least(cfg, "compression.levels", 1)
        _int_at_least(cfg, "compression.bucket", 1)
    elif name in ("topk", "randomk"):
        _num(cfg, "compression.k", lambda v: 0 < v <= 1, "a fraction in (0, 1]")
    elif name == "signsgd":
        v = _get(cfg, "compression.scale")
        require(v in ("l1", "seide"), "compression.scale", v, "one of l1, seide")
    elif name == "terngrad":
        clip = _get(cfg, "compression.clip")
        require(clip is None or (_is_num(clip) and clip > 0), "compression.clip", clip,
                "null (no clipping) or a number c > 0 (clip to c·std)")
        v = _get(cfg, "compression.wire")
        require(v in ("2bit", "base3"), "compression.wire", v, "one of 2bit, base3")


def _validate_trainer(cfg: DictConfig) -> None:
    mu = _get(cfg, "trainer.max_updates")
    require(mu is None or (_is_int(mu) and mu >= 1), "trainer.max_updates", mu,
            "null or an integer >= 1")
    _int_at_least(cfg, "trainer.eval_every_epochs", 1)
    _int_at_least(cfg, "trainer.log_every_n_updates", 1)
    progress = _get(cfg, "trainer.progress")
    require(progress in PROGRESS, "trainer.progress", progress, _one_of(PROGRESS))
    _int_at_least(cfg, "trainer.checkpoint_every", 0)
    stop = _get(cfg, "trainer.stop_after_updates")
    require(stop is None or (_is_int(stop) and stop >= 1), "trainer.stop_after_updates", stop,
            "null or an integer >= 1")
    sw = _get(cfg, "trainer.save_weights")
    require(isinstance(sw, bool), "trainer.save_weights", sw, "true or false")
    nt = _get(cfg, "trainer.num_threads")
    require(nt is None or (_is_int(nt) and nt >= 1), "trainer.num_threads", nt,
            "null or an integer >= 1")
