"""``engine=dist`` end to end: check, start λ learner processes, rendezvous, run the PS, clean up.

:func:`train_dist` is what :func:`psbench.train.train` calls for ``engine=dist`` with the run's
:class:`~psbench.assemble.RunSetup` (a replay's schedule is simulated or loaded there); it returns the
same :class:`~psbench.summary.RunSummary` as the simulator path, with the engine's own counts
(:func:`run_summary`). The calling process is rank 0, the PS — the only one that talks to
MLflow — and, with ``engine.launch=spawn`` (default), starts the learners itself as
``python -m psbench.distributed.learner <run_dir>/dist_spec.json <rank>``, each
killed by the kernel if the PS process dies (``PR_SET_PDEATHSIG``) and terminated on every exit
path here, and ``learner_data.pt`` (their copy of the training set) is removed. With
``engine.launch=external`` it only waits, at most ``engine.connect_timeout_s``, for λ learners
started elsewhere, e.g. by torchrun on other nodes (README "engine=dist").

SIGINT/SIGTERM/SIGHUP (:mod:`psbench.lifecycle`) stop the PS between messages; the run ends KILLED with
what was done. Spawned learners ignore SIGINT (the terminal's Ctrl-C reaches the whole process
group; the PS stops them); a learner ended by SIGINT/SIGTERM kills the run rather than failing it.
Handled failures (:class:`~psbench.distributed.transport.LearnerFailure`, a process group that does not
form) are :class:`~psbench.errors.RunFailure`: one line in the CLI.

Bad input fails before any process starts, as one :class:`~psbench.errors.ConfigError`: λ above
``engine.max_learners`` (≤ 256), a port in use, ``backend=nccl`` (needs a GPU; the data plane here
is gloo), a tree topology, or TernGrad scaler sharing among c > 1 learners
(:func:`psbench.distributed.options.check_dist`). Codecs run for real: learners push their exact bytes (:mod:`wire`).
Local-step protocols (H > 1: downpour, agn, aeasgd, dynsgd) run for real: learners take their H
local steps in their own processes (spec key ``window``) and push commits.

``timeline.png`` (:mod:`psbench.ps.timeline`) is drawn in replay mode when the schedule is simulated for it
(``engine.schedule`` null): the simulator's trace of it. A replayed ``schedule.npz`` holds no trace, and a free
run's event log holds, per gradient, when it was computed and when the PS took it, but not when the PS granted
the weights: its pulls and its waits at the barrier or the SSP bound cannot be told apart, so neither draws one.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from psbench import lifecycle
from psbench.distributed import messages as m
from psbench.distributed.transport import LearnerFailure
from psbench.errors import ConfigError, RunFailure
from psbench.summary import RunSummary

if TYPE_CHECKING:
    from psbench.assemble import RunSetup


# ---------------------------------------------------------------------------------- processes
class Learners:
    """The learner processes this PS started (``spawn``) or, for ``external``, none to watch."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def spawn(self, spec_file: Path, learners: int, run_dir: Path, threads: int) -> None:
        # Ctrl-C reaches the whole process group: the PS alone handles it and stops the learners
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PSBENCH_SPAWNED="1")
        env.pop("HYDRA_FULL_ERROR", None)
        with lifecycle.deferred():  # every learner started is in self.procs, so stop() ends it
            for rank in range(1, learners + 1):
                log = run_dir / f"learner_{rank}.log"
                with open(log, "wb") as fh:
                    self.procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "psbench.distributed.learner", str(spec_file), str(rank)],
                            stdout=fh,
                            stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            env=env,
                            close_fds=True,
                        )
                    )
                self.logs.append(log)
        (run_dir / "dist_pids.json").write_text(
            json.dumps({"ps": os.getpid(), **{str(r + 1): p.pid for r, p in enumerate(self.procs)}})
        )

    def alive(self, l: int) -> str | None:
        """None while learner ``l`` runs; else why not (exit code, signal, last log line)."""
        if l >= len(self.procs):
            return None
        rc = self.procs[l].poll()
        if rc is None:
            return None
        why = f"(pid {self.procs[l].pid}) exited with code {rc}"
        if rc < 0:
            why += f" ({signal.Signals(-rc).name})"
        try:
            last = [s for s in self.logs[l].read_text(errors="replace").splitlines() if s.strip()]
        except OSError:
            last = []
        # the learner's own error (a user's model raising in it) is the log's last line; its traceback is the log
        return why + (f": {last[-1].strip()[:200]}" if last and rc > 0 else "") + f" (its output: {self.logs[l]})"

    def killed_by(self) -> tuple[int, int] | None:
        """(rank, signal) of a learner ended by SIGINT, SIGTERM or SIGHUP: the run was killed, it did not fail."""
        for rank, p in enumerate(self.procs, 1):
            rc = p.poll()
            if rc is not None and (-rc in lifecycle.SIGNALS or rc - 128 in lifecycle.SIGNALS):
                return rank, abs(rc) % 128
        return None

    def stop(self, grace_s: float = 3.0) -> None:
        """Terminate every learner still running, then kill what remains; reap all."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + grace_s
        for p in self.procs:
            try:
                p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _store(addr: str, port: int, world: int, timeout_s: float):
    import torch.distributed as dist

    try:
        return dist.TCPStore(
            addr, port, world, True, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False
        )
    except (RuntimeError, OSError) as e:
        text = str(e).lower()
        reason = "address already in use" if "in use" in text else " ".join(str(e).split())[:120]
        raise ConfigError("engine.port", port, f"a free TCP port on {addr} ({reason})") from None


def _rendezvous(store, learners: int, procs: Learners, timeout_s: float) -> None:
    keys = [m.READY_KEY.format(rank=r) for r in range(1, learners + 1)]
    deadline = time.monotonic() + timeout_s
    while not store.check(keys):
        for l in range(learners):
            why = procs.alive(l)
            if why is not None:
                raise LearnerFailure(l, f"learner rank {l + 1} {why} before joining")
        if time.monotonic() > deadline:
            missing = [r for r, k in enumerate(keys, 1) if not store.check([k])]
            raise LearnerFailure(
                missing[0] - 1,
                f"learner ranks {missing} did not join within {timeout_s:g} s (engine.connect_timeout_s)",
            )
        time.sleep(0.05)


def _destroy_group(timeout_s: float = 5.0) -> None:
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    t = threading.Thread(target=dist.destroy_process_group, daemon=True)
    t.start()
    t.join(timeout_s)


# ---------------------------------------------------------------------------------- the job
def train_dist(setup: RunSetup, run_dir: Path, logger=None) -> RunSummary:
    """Run ``setup`` with real processes; return its :class:`~psbench.summary.RunSummary` (:func:`run_summary`)."""
    import torch.distributed as dist

    from psbench.compression.wire import GradientWire
    from psbench.data import output_size, task_of
    from psbench.distributed.ps_server import ParameterServer
    from psbench.distributed.transport import GlooTransport
    from psbench.models.evaluate import evaluate, save_final_weights, weights_sha256
    from psbench.optimizer.build import configure, param_groups
    from psbench.ps.local import is_elastic, uses_local_steps
    from psbench.ps.schedule import updates_per_epoch
    from psbench.ps.staleness import plot_staleness

    t_start = time.perf_counter()
    run_dir = Path(run_dir)
    opts = setup.dist
    assert opts is not None, "engine=dist runs with the dist engine's options (psbench.assemble.build_run)"
    seed, dm, net, protocol, policy = setup.seed, setup.data, setup.net, setup.protocol, setup.policy
    lam, mu, spg = protocol.learners, setup.batch_size, setup.samples_per_gradient
    mode = opts.mode
    meta = setup.schedule_meta
    artifacts: list[str] = []
    replay = setup.schedule if mode == "replay" else None
    sim_time_s = None  # simulated time: a replayed schedule's; a free run has measured time only (run_time_s)
    if replay is not None:
        sim_time_s = simulated_time(replay)
        artifacts.append(str(replay.save(run_dir / "schedule.npz")))
        timeline = setup.plot_timeline(run_dir / "timeline.png")  # a simulated replay's trace (not a file's)
        if timeline is not None:
            artifacts.append(timeline)
        G = replay.num_gradients
        updates = replay.num_updates
    else:
        G = setup.gradients - setup.gradients % protocol.gradients_per_update
        updates = G // protocol.gradients_per_update
    opt_cfg, learner_cfg = setup.optimizer, setup.learner_optimizer
    window = None  # a local-step protocol's window: H steps of learner_cfg in the learner, then a commit
    if uses_local_steps(protocol.name):  # learners run learner_cfg for H local steps; the PS adds their commits
        window = {
            "local_steps": protocol.local_steps,
            "batch_size": mu,
            "elastic": is_elastic(protocol.name),
            "rho": protocol.rho,
            "optimizer": dict(learner_cfg),
        }
    comp_opts = None if setup.compression is None else dict(setup.compression)
    wire = None if comp_opts is None else GradientWire(comp_opts, {k: p.shape for k, p in net.named_parameters()}, seed)
    opt, sched = configure(param_groups(net), opt_cfg, updates_per_epoch(updates, G, spg, dm.num_train))

    addr, timeout_s, connect_s = opts.master_addr, float(opts.timeout_s), float(opts.connect_timeout_s)
    world = lam + 1
    store = _store(addr, int(opts.port), world, connect_s)
    data_file = run_dir / "learner_data.pt"
    spec_file = run_dir / "dist_spec.json"
    procs = Learners()
    ps = None
    try:
        torch.save({"x": dm.x_train.contiguous(), "y": dm.y_train.contiguous()}, data_file)
        spec = {
            "addr": addr,
            "port": store.port,
            "world_size": world,
            "timeout_s": max(timeout_s, 3600.0),
            "connect_timeout_s": connect_s,
            "model": dict(setup.model),  # learners build it as the run did
            "input_shape": list(dm.input_shape),
            "output_size": output_size(dm),
            "task": task_of(dm),
            "python_path": [p for p in sys.path if p],  # a user's _target_ modules import there as here
            "data_file": str(data_file),
            "seed": seed,
            "samples_per_gradient": spg,
            "threads": int(opts.learner_threads),
            "delay_s": {str(k): float(v) for k, v in dict(opts.learner_delay_s or {}).items()},
            "rank_offset": 1,
            "window": window,
            "compression": comp_opts,
        }
        spec_file.write_text(json.dumps(spec, indent=1))
        if opts.launch == "spawn":
            procs.spawn(spec_file, lam, run_dir, spec["threads"])
        print(
            f"psbench: engine=dist: PS rank 0 at {addr}:{store.port}, waiting up to {connect_s:g} s "
            f"(engine.connect_timeout_s) for {lam} learners (spec {spec_file})",
            file=sys.stderr,
            flush=True,
        )
        t_join = time.perf_counter()
        try:
            _rendezvous(store, lam, procs, connect_s)
            try:
                dist.init_process_group(
                    "gloo",
                    store=store,
                    rank=0,
                    world_size=world,
                    timeout=datetime.timedelta(seconds=max(timeout_s, 3600.0)),
                )
            except RuntimeError as e:
                why = " ".join(str(e).split())[:200]
                raise RunFailure(f"engine=dist: the process group did not form: {why}") from None
            join_s = time.perf_counter() - t_join
            logging.getLogger("psbench").info(
                "engine=dist: %d learners joined in %.1f s; %s run starts", lam, join_s, mode
            )
            numel = sum(p.numel() for p in net.parameters())
            transport = GlooTransport(lam, numel, procs.alive, push_bytes=None if wire is None else wire.push_bytes)
            ps = ParameterServer(
                net,
                opt,
                sched,
                protocol,
                policy,
                mu,
                spg,
                G,
                transport,
                replay=replay,
                timeout_s=timeout_s,
                tolerate_failures=opts.tolerate_failures,
                gradient_clip_val=setup.trainer.gradient_clip_val,
                logger=logger,
                log_every=setup.trainer.log_every_n_updates,
                wire=wire,
                num_train=dm.num_train,
            )
            with lifecycle.deferred():  # the PS loop checks for a signal between messages (update boundaries)
                stats = ps.run()
        except LearnerFailure:
            lifecycle.check()  # the PS's own signal came with the learners' (Ctrl-C, a job scheduler's kill)
            killed = procs.killed_by()
            if killed is not None:
                name = signal.Signals(killed[1]).name
                raise lifecycle.killed(killed[1], f"killed by {name} (learner rank {killed[0]})") from None
            raise
        for p in procs.procs:  # stopped learners leave by themselves
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    except lifecycle.Killed as k:
        k.progress.update(updates_total=updates)
        if ps is not None:
            from psbench.models.evaluate import quick_evaluate

            k.progress.update(
                updates_done=ps.stats.updates_stepped,
                samples=ps.stats.pushes_applied * spg,
                run_time_s=time.time() - ps.t0,
                **quick_evaluate(net, dm.x_test, dm.y_test, loss=setup.loss),
            )
        raise
    finally:
        with lifecycle.deferred():  # no learner process and no copy of the data outlive the run
            procs.stop()
            _destroy_group()
            data_file.unlink(missing_ok=True)
            del store

    log = ps.event_log({**meta, "engine": "dist", "mode": mode})
    artifacts.append(str(log.save(run_dir / ("dist_log.npz" if mode == "replay" else "schedule.npz"))))
    timing: dict[str, Any] = ps.timing(log)
    np.savez(run_dir / "dist_timing.npz", **timing)
    artifacts.append(str(run_dir / "dist_timing.npz"))
    calibration = None
    if mode == "free_run" and stats.pushes_applied and not stats.failed_learners:
        from psbench.calibration.free_run import compare

        calibration = compare(log, timing, protocol, mu, dm.num_train, numel * 4, stats.run_time_s, seed)
    artifacts.append(
        str(plot_staleness(stats.staleness.as_dict(), f"{protocol.label} (measured)", run_dir / "staleness_hist.png"))
    )
    test_error, test_loss = evaluate(net, dm.x_test, dm.y_test, loss=setup.loss)
    save_final_weights(setup.trainer.save_weights, net, run_dir, artifacts)
    summary = run_summary(
        ps,
        replay or log,
        mode=mode,
        num_train=dm.num_train,
        model_bytes=numel * 4,
        join_time_s=join_s,
        bytes_pushed=transport.bytes_received + stats.pushes_received * m.HEADER * 8,
        bytes_pulled=transport.bytes_sent,
        push_payload_bytes=None if wire is None else wire.push_bytes,
        test_error=test_error,
        test_loss=test_loss,
        weights_sha256=weights_sha256(net),
        sim_time_s=sim_time_s,
        calibration=calibration,
        artifacts=artifacts,
    )
    if logger is not None:
        # the series' final points; the run's totals are its summary/… metrics (cli)
        final = {"test_error": test_error, "test_loss": test_loss, "run_time_s": stats.run_time_s}
        logger.log_metrics({k: v for k, v in final.items() if v is not None}, step=max(0, stats.updates))
    return replace(summary, wall_time_s=time.perf_counter() - t_start)


def run_summary(
    ps,
    schedule,
    *,
    mode: str,
    num_train: int,
    model_bytes: int,
    join_time_s: float | None,
    bytes_pushed: int,
    bytes_pulled: int,
    push_payload_bytes: int | None,
    test_error: float | None,
    test_loss: float | None,
    weights_sha256: str | None,
    sim_time_s: float | None = None,
    calibration: dict[str, Any] | None = None,
    artifacts: list[str] | None = None,
) -> RunSummary:
    """The :class:`~psbench.summary.RunSummary` of a finished :class:`ParameterServer` run.

    ``schedule``: the replayed schedule, or the free run's measured event log (its hash is
    ``schedule_sha256``). ``sim_time_s``: the simulated time of a replayed schedule (``None`` in a free
    run: nothing was simulated); the measured time is ``run_time_s``. ``push_payload_bytes`` is the
    codec's payload of one push (``None``: uncompressed, ``model_bytes``).
    """
    stats, lam, spg = ps.stats, ps.lam, ps.spg
    run_s = stats.run_time_s
    diverged = ps.diverged_at is not None or test_loss is None or not math.isfinite(test_loss)
    samples = stats.pushes_applied * spg
    return RunSummary(
        status="diverged" if diverged else "finished",
        diverged=diverged,
        diverged_at_update=ps.diverged_at,
        test_error=test_error,
        test_loss=test_loss,
        train_loss=ps.recent_loss,
        engine="dist",
        mode=mode,
        protocol=ps.protocol.label,
        staleness_mean=stats.staleness.mean,
        staleness_max=stats.staleness.max,
        staleness_hist=stats.staleness.as_dict(),
        ps_updates=stats.updates,
        gradients=stats.pushes_applied,
        samples=samples,
        epochs_done=samples / num_train,
        schedule_sha256=schedule.sha256(),
        updates_done=stats.updates_stepped,
        sim_time_s=sim_time_s,
        run_time_s=run_s,
        join_time_s=join_time_s,
        pushes_per_s=stats.pushes_received / run_s if run_s > 0 else None,
        comm_overlap=stats.compute_s / (lam * run_s) if run_s > 0 else None,
        bytes_pushed=bytes_pushed,
        bytes_pulled=bytes_pulled,
        pulls=stats.reads,
        pulls_skipped=stats.pulls_skipped,
        message_bytes=model_bytes + m.HEADER * 8,
        model_bytes=model_bytes,
        push_payload_bytes=model_bytes if push_payload_bytes is None else push_payload_bytes,
        ps_timestamp=ps.root_ts,
        pushes_received=stats.pushes_received,
        pushes_applied=stats.pushes_applied,
        parks=stats.parks,
        ssp_reads=stats.ssp_reads,
        ssp_violations=stats.ssp_violations,
        ssp_max_lag=stats.ssp_max_lag,
        failed_learners=list(stats.failed_learners),
        lost_gradients=stats.lost_gradients,
        calibration=calibration,
        calib_ks_staleness=None if calibration is None else calibration["ks_staleness"],
        calib_epoch_time_rel_error=None if calibration is None else calibration["epoch_time_rel_error"],
        weights_sha256=weights_sha256,
        artifacts=list(artifacts or []),
    )


def simulated_time(schedule) -> float | None:
    """The simulated time of a schedule's last update; ``None`` for a dist free run's measured event log."""
    if schedule.meta.get("engine") == "dist" or not schedule.num_updates:
        return None
    return float(schedule.update_time[-1])
