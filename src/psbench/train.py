"""Run one job from a composed config: simulate the schedule, then train on it with Lightning.

:func:`train` is what ``psbench`` (``cli.py``) calls after validation and MLflow set-up:

1. data module and model (seeded); model size = PS message size (compression ``none``);
2. cost model (hardware profile, or a calibration of the real model) → simulator →
   schedule of ⌊epochs·N/μ⌋ gradients (capped by ``trainer.max_updates``);
3. ``schedule_only``: statistics only; otherwise a Trainer with
   :class:`~psbench.strategy.ParameterServerStrategy`, one step per PS update, evaluating
   test error every epoch's worth of updates;
4. the summary dict (``summary.json``) and artifacts (schedule, staleness histogram).
"""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from psbench import lifecycle
from psbench.cluster import CostModel, Topology
from psbench.errors import require
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule, Simulator
from psbench.ps.local import uses_local_steps


def _get(cfg: Mapping, key: str, default: Any = None) -> Any:
    v = cfg.get(key, default) if cfg is not None else default
    return default if v is None else v


def build_protocol(cfg: DictConfig) -> Protocol:
    p = cfg.protocol
    rho = p.get("rho")
    return Protocol(p.name, int(cfg.learners), n=p.get("n"), staleness_bound=p.get("staleness_bound"),
                    local_steps=int(_get(p, "local_steps", 1)), rho=None if rho is None else float(rho))


def build_topology(cfg: DictConfig) -> Topology:
    t = cfg.topology
    return Topology(t.name, int(_get(t, "learners_per_node", 4)), int(_get(t, "broadcast_fanout", 2)))


def build_cost(cfg: DictConfig, message_bytes: int, net: torch.nn.Module | None = None,
               input_shape: tuple = (), num_classes: int = 10) -> CostModel:
    h = cfg.hardware
    overrides = {k: h.get(k) for k in ("bandwidth_Bps", "intra_node_bandwidth_Bps", "latency_s", "ps_service_s",
                                       "ps_apply_Bps", "jitter_cv", "ps_jitter_cv", "heavy_tail")}
    compute = h.get("compute") or {}
    overrides.update(overhead_s=compute.get("overhead_s"), per_sample_s=compute.get("per_sample_s"))
    strag = h.get("stragglers") or {}
    overrides.update(straggler_fraction=strag.get("fraction"), straggler_slowdown=strag.get("slowdown"))
    cost = CostModel.from_profile(h.name, message_bytes, **overrides)
    if h.get("calibrate") and net is not None:
        from dataclasses import replace

        from psbench.cluster.calibrate import calibrate

        mu = int(cfg.batch_size)
        cost = replace(cost, compute=calibrate(net, input_shape, num_classes, sorted({1, 4, 16, 64, mu})))
    return cost


def build_data_and_model(cfg: DictConfig):
    """The data module (prepared and set up) and the seeded model of a config; sets the torch thread count."""
    from psbench.data import build_datamodule
    from psbench.models import build_model

    seed = int(cfg.seed)
    if cfg.trainer.get("num_threads"):
        torch.set_num_threads(int(cfg.trainer.num_threads))
    torch.manual_seed(seed)
    ds = OmegaConf.to_container(cfg.dataset, resolve=True)
    dm = build_datamodule(ds.pop("name"), cfg.paths.data_dir, seed=seed, **ds)  # type: ignore[union-attr, arg-type]
    dm.prepare_data()
    dm.setup("fit")
    m = OmegaConf.to_container(cfg.model, resolve=True)
    torch.manual_seed(seed)
    net = build_model(m.pop("name"), dm.input_shape, dm.num_classes, **m)  # type: ignore[union-attr, arg-type]
    return dm, net


def build_lr_policy(cfg: DictConfig) -> LRPolicy:
    lp = OmegaConf.to_container(cfg.lr_policy, resolve=True)
    return LRPolicy(**lp)  # type: ignore[arg-type]


def total_gradients(cfg: DictConfig, num_train: int, protocol: Protocol) -> int:
    spg = int(cfg.batch_size) * protocol.local_steps
    g = int(float(cfg.epochs) * num_train) // spg
    max_updates = cfg.trainer.get("max_updates")
    if max_updates is not None:
        g = min(g, int(max_updates) * protocol.gradients_per_update)
    require(g >= protocol.gradients_per_update, "epochs", cfg.epochs,
            f"enough epochs for one update of c = {protocol.gradients_per_update} gradients of μ = {cfg.batch_size}")
    return g


def weights_sha256(net: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(net.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def save_final_weights(cfg: DictConfig, net: torch.nn.Module, run_dir: Path, artifacts: list[str]) -> None:
    """``weights.pt`` (the final ``state_dict``) into ``artifacts`` unless ``trainer.save_weights=false``."""
    if bool(_get(cfg.get("trainer"), "save_weights", True)):
        path = run_dir / "weights.pt"
        torch.save(net.state_dict(), path)
        artifacts.append(str(path))


@torch.no_grad()
def evaluate(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> tuple[float, float]:
    """(test error, test loss) over a whole tensor data set."""
    net.eval()
    wrong, loss = 0, 0.0
    for i in range(0, len(x), batch):
        logits = net(x[i:i + batch])
        wrong += int((logits.argmax(1) != y[i:i + batch]).sum())
        loss += float(torch.nn.functional.cross_entropy(logits, y[i:i + batch], reduction="sum"))
    net.train()
    return wrong / len(x), loss / len(x)


def quick_evaluate(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                   budget_s: float = 2.0) -> dict[str, float | None]:
    """``test_error``/``test_loss`` of the current weights for a killed run's summary, or None for both
    when a first small batch says the whole test set would take more than ``budget_s``."""
    probe = min(len(x), 64)
    t0 = time.perf_counter()
    evaluate(net, x[:probe], y[:probe])
    if probe == 0 or (time.perf_counter() - t0) * len(x) / probe > budget_s:
        return {"test_error": None, "test_loss": None}
    err, loss = evaluate(net, x, y)
    return {"test_error": err, "test_loss": loss if math.isfinite(loss) else None}


def plot_staleness(hist: Mapping[int, int], label: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    total = sum(hist.values()) or 1
    ax.bar(list(hist), [c / total for c in hist.values()], width=0.9)
    ax.set_xlabel("staleness σ")
    ax.set_ylabel("fraction of gradients")
    ax.set_title(f"{label} (Rudra Fig 4 / Zhang Fig 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _progress_callbacks(mode: str):
    from pytorch_lightning.callbacks import RichProgressBar

    from psbench.strategy.progress import PlainProgress

    if mode == "none":
        return [], False
    if mode == "rich" or (mode == "auto" and sys.stdout.isatty()):
        return [RichProgressBar()], True
    return [PlainProgress()], False


def train(cfg: DictConfig, run_dir: Path, logger=None, plan=None) -> dict[str, Any]:
    """Run the job described by ``cfg``; return the summary (see ``summary.json`` in the README).

    ``plan`` (:class:`psbench.checkpoint.Plan`) turns on checkpoints and, with its ``state``, resumes
    from one; a requested stop raises :class:`psbench.checkpoint.RunStopped` after writing it.
    """
    if _get(cfg.get("engine"), "name", "sim") == "dist":  # real processes: psbench.engine
        from psbench.engine.launcher import train_dist

        return train_dist(cfg, run_dir, logger)

    t_start = time.perf_counter()
    seed = int(cfg.seed)
    dm, net = build_data_and_model(cfg)

    protocol, topology, policy = build_protocol(cfg), build_topology(cfg), build_lr_policy(cfg)
    compression = build_compression(cfg, net)
    cost = build_run_cost(cfg, net, dm, protocol, compression)
    sim = Simulator(protocol, cost, topology, int(cfg.batch_size), total_gradients(cfg, dm.num_train, protocol), seed)
    meta = {"protocol": protocol.label, "learners": protocol.learners, "batch_size": int(cfg.batch_size),
            "topology": topology.name, "seed": seed}
    schedule = Schedule.collect(lifecycle.checked(sim.run()), meta=meta)  # a signal stops the simulation too
    stats = sim.stats.as_dict()
    artifacts = [str(schedule.save(run_dir / "schedule.npz")),
                 str(plot_staleness(stats["staleness_hist"], protocol.label, run_dir / "staleness_hist.png"))]
    samples = schedule.num_gradients * sim.samples_per_gradient
    summary: dict[str, Any] = {
        "status": "finished", "diverged": False, "test_error": None, "test_loss": None, "train_loss": None,
        **stats, "samples": samples, "epochs_done": samples / dm.num_train, "schedule_sha256": schedule.sha256(),
        "weights_sha256": None, "protocol": protocol.label, "artifacts": artifacts,
        "compression": str(_get(cfg.get("compression"), "name", "none")),
    }
    if cfg.schedule_only:
        summary["wall_time_s"] = time.perf_counter() - t_start
        return summary

    if plan is not None and plan.state is not None:
        require(plan.state["schedule_sha256"] == summary["schedule_sha256"], "resume", str(plan.path),
                "a checkpoint of this schedule (the recomputed schedule differs from the checkpoint's: "
                "was psbench changed in between?)")
    summary.update(_fit(cfg, dm, net, schedule, sim.samples_per_gradient, policy, protocol, logger, compression,
                        plan, t_start))
    summary["weights_sha256"] = weights_sha256(net)
    save_final_weights(cfg, net, run_dir, artifacts)
    summary["wall_time_s"] = time.perf_counter() - t_start + (plan.prior("wall_time_s") if plan else 0.0)
    return summary


def build_run_cost(cfg: DictConfig, net: torch.nn.Module, dm, protocol: Protocol, compression=None) -> CostModel:
    """The run's cost model: the hardware profile for this model, with the codec's exact push/pull payloads."""
    from psbench.models import model_bytes

    cost = build_cost(cfg, model_bytes(net), net, dm.input_shape, dm.num_classes)
    if compression is None:
        return cost
    from dataclasses import replace  # codec payloads are data-independent: they set the transfer times

    return replace(cost, push_bytes=compression.push_bytes(),
                   pull_bytes=compression.pull_bytes(protocol.gradients_per_update), pull_delta=compression.localize)


def build_compression(cfg: DictConfig, net: torch.nn.Module):
    """Per-learner codecs for ``cfg.compression`` (:mod:`psbench.compression`), or None for ``none``."""
    c = cfg.get("compression")
    if c is None or _get(c, "name", "none") == "none":
        return None
    from psbench.compression.pipeline import LearnerCompression

    return LearnerCompression(OmegaConf.to_container(c, resolve=True),  # type: ignore[arg-type]
                              {k: p.shape for k, p in net.named_parameters()}, int(cfg.seed))


def _fit(cfg, dm, net, schedule, spg, policy, protocol, logger, compression=None, plan=None,
         t_start: float = 0.0) -> dict[str, Any]:
    import logging
    import warnings

    import pytorch_lightning as pl
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    from psbench.checkpoint import RunStopped
    from psbench.strategy import ClassifierModule, ParameterServerStrategy, UpdateBatches
    from psbench.strategy.interrupt import StopOnSignal

    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*returned `None`.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)
    updates_per_epoch = schedule.num_updates * dm.num_train / max(1, schedule.num_gradients * spg)
    every = max(1, round(updates_per_epoch * float(_get(cfg.trainer, "eval_every_epochs", 1))))
    opt_cfg = OmegaConf.to_container(cfg.optimizer, resolve=True)
    local = None
    if uses_local_steps(protocol.name):  # learners run opt_cfg locally; the PS adds their commits
        from psbench.strategy.local_steps import LocalSteps, LocalUpdateBatches, server_optimizer

        local = LocalSteps(protocol, schedule, dm.x_train, dm.y_train, int(cfg.batch_size), int(cfg.seed), opt_cfg,
                           policy)
        opt_cfg = server_optimizer(opt_cfg)
    module = ClassifierModule(net, opt_cfg, updates_per_epoch)
    strategy = ParameterServerStrategy(schedule, str(_get(cfg.trainer, "batching", "auto")),
                                       log_every_n_updates=int(_get(cfg.trainer, "log_every_n_updates", 10)),
                                       local=local, compression=compression, num_train=dm.num_train)
    from psbench.strategy.progress import EpochThroughput

    callbacks, rich = _progress_callbacks(str(_get(cfg.trainer, "progress", "auto")))
    callbacks += [EpochThroughput(), StopOnSignal()]
    checkpointer = None
    if plan is not None:
        from psbench.checkpoint import Checkpointer

        checkpointer = Checkpointer(plan, schedule.sha256(), t_start)
        callbacks.append(checkpointer)
    trainer = pl.Trainer(
        strategy=strategy, accelerator="cpu", max_epochs=1, logger=logger if logger is not None else False,
        val_check_interval=min(every, schedule.num_updates), check_val_every_n_epoch=None,
        num_sanity_val_steps=0, enable_checkpointing=False, enable_model_summary=False,
        enable_progress_bar=rich, callbacks=callbacks, log_every_n_steps=strategy.log_every,
        deterministic=bool(_get(cfg.trainer, "deterministic", True)),
        gradient_clip_val=cfg.trainer.get("gradient_clip_val"),
    )
    updates = LocalUpdateBatches(schedule, spg) if local is not None else \
        UpdateBatches(schedule, dm.x_train, dm.y_train, spg, policy, int(cfg.batch_size), protocol.learners,
                      int(cfg.seed))
    start = plan.start if plan is not None else 0  # a resumed run executes updates start…U−1
    if start:
        updates = torch.utils.data.Subset(updates, range(start, schedule.num_updates))
    data = torch.utils.data.DataLoader(updates, batch_size=None, shuffle=False, num_workers=0)
    t0 = time.perf_counter()
    try:
        try:
            with lifecycle.deferred():  # a signal stops the fit at the next update boundary (StopOnSignal)
                trainer.fit(module, train_dataloaders=data, val_dataloaders=dm.val_dataloader())
        except SIGTERMException:  # Lightning's SIGTERM handler ran before StopOnSignal took the signal back
            lifecycle.check()
            raise
        except RunStopped as stop:  # a signal asked for a checkpoint (StopOnSignal): it is written, now end KILLED
            if lifecycle.pending() is None:
                raise
            print(f"psbench: checkpoint before update {stop.update} in {stop.path} (resume={stop.path.parent})",
                  file=sys.stderr, flush=True)
            lifecycle.check()
    except lifecycle.Killed as k:
        k.progress.update(updates_done=strategy.updates_done, updates_total=schedule.num_updates,
                          samples=strategy.samples_done, sim_time_s=strategy.sim_time_s,
                          **quick_evaluate(net, dm.x_test, dm.y_test))
        raise
    fit_s = time.perf_counter() - t0 + (plan.prior("fit_time_s") if plan is not None else 0.0)
    test_error, test_loss = evaluate(net, dm.x_test, dm.y_test)
    diverged = strategy.diverged or not math.isfinite(test_loss)
    done = strategy.updates_done
    samples = int(schedule.offsets[done]) * spg if done else 0
    if logger is not None:
        logger.log_metrics({"test_error": test_error, "test_loss": test_loss, "samples_per_s": samples / fit_s},
                           step=max(0, trainer.global_step))
    return {"status": "diverged" if diverged else "finished", "diverged": diverged,
            "diverged_at_update": strategy.diverged_at, "test_error": test_error, "test_loss": test_loss,
            "train_loss": strategy.recent_loss, "updates_done": done, "samples_trained": samples,
            "samples_per_s": samples / fit_s if fit_s > 0 else None, "fit_time_s": fit_s,
            "bytes_pushed_measured": strategy.bytes_pushed if compression is not None else None,
            "resumed_from_update": start if start else None,
            "checkpoints_written": len(checkpointer.saves) if checkpointer else 0,
            "checkpoint_time_s": sum(s for _, s, _ in checkpointer.saves) if checkpointer else 0.0,
            "checkpoint_bytes": checkpointer.saves[-1][2] if checkpointer and checkpointer.saves else None}
