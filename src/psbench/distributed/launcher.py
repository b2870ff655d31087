"""``engine=dist`` end to end: check, start λ learner processes, rendezvous, run the PS, clean up.

:func:`train_dist` is what :func:`psbench.train.train` calls for ``engine=dist`` with the run's
:class:`~psbench.run_setup.RunSetup` (a replay's schedule is simulated or loaded there); it returns the
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
from psbench.distributed.spec import LearnerSpec, Window
from psbench.distributed.transport import LearnerFailure
from psbench.errors import ConfigError, RunFailure
from psbench.files import write_atomic
from psbench.summary import RunSummary

if TYPE_CHECKING:
    from psbench.run_setup import RunSetup


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
    """Run ``setup`` with real processes; return its :class:`~psbench.summary.RunSummary` (:func:`run_summary`).

    Along its seams: the gradient budget (a replayed schedule's, or G's: :func:`_budget`), the learners' spec checked
    and written before any process starts (:func:`learner_spec`), the learners started and the PS run
    (:func:`_serve`), the engine's records (:func:`_records`) and the run's end both engines share
    (:func:`psbench.models.evaluate.finish`)."""
    from psbench.compression.wire import GradientWire
    from psbench.models.evaluate import evaluate, finish
    from psbench.optimizer.build import configure, param_groups
    from psbench.ps.schedule import updates_per_epoch

    t_start = time.perf_counter()
    run_dir = Path(run_dir)
    opts, net, dm = setup.dist, setup.net, setup.data
    assert opts is not None, "engine=dist runs with the dist engine's options (psbench.assemble.build_run)"
    artifacts: list[str] = []
    replay, G, updates, sim_time_s = _budget(setup, run_dir, artifacts)
    comp = None if setup.compression is None else dict(setup.compression)
    shapes = {k: p.shape for k, p in net.named_parameters()}
    wire = None if comp is None else GradientWire(comp, shapes, setup.seed)
    per_epoch = updates_per_epoch(updates, G, setup.samples_per_gradient, dm.num_train)
    opt, sched = configure(param_groups(net), setup.optimizer, per_epoch)
    ps, transport, join_s = _serve(setup, run_dir, opts, (opt, sched), replay, G, updates, wire, logger)
    numel = sum(p.numel() for p in net.parameters())
    log, timing = _records(setup, ps, run_dir, artifacts)
    summary = run_summary(
        ps,
        replay or log,
        mode=opts.mode,
        num_train=dm.num_train,
        model_bytes=numel * 4,
        join_time_s=join_s,
        bytes_pushed=transport.bytes_received + ps.stats.pushes_received * m.HEADER * 8,
        bytes_pulled=transport.bytes_sent,
        push_payload_bytes=None if wire is None else wire.push_bytes,
        sim_time_s=sim_time_s,
        calibration=_calibration(setup, ps, log, timing, numel),
        artifacts=artifacts,
    )
    summary = finish(
        summary,
        net,
        lambda: evaluate(net, dm.x_test, dm.y_test, loss=setup.loss),
        run_dir,
        setup.trainer.save_weights,
        logger,
        ps.stats.updates,
        ("run_time_s",),
    )
    return replace(summary, wall_time_s=time.perf_counter() - t_start)


def _budget(setup: RunSetup, run_dir: Path, artifacts: list[str]) -> tuple[Any, int, int, float | None]:
    """(the replayed schedule or None, G, PS updates, its simulated time): a replay runs its schedule (saved, and its
    simulated trace drawn, into the run dir), a free run G rounded down to whole updates of c."""
    from psbench.ps import plan

    protocol = setup.protocol
    replay = setup.schedule if setup.dist is not None and setup.dist.mode == "replay" else None
    if replay is None:  # a free run has measured time only (run_time_s)
        G = setup.gradients - setup.gradients % protocol.gradients_per_update
        return None, G, G // protocol.gradients_per_update, None
    artifacts.append(str(replay.save(run_dir / "schedule.npz")))
    sim = plan.SimulatedRun(replay, setup.sim_stats or {}, setup.trace)  # a simulated replay's trace (not a file's)
    timeline = plan.plot_timeline(
        sim, protocol, setup.batch_size, setup.hardware, setup.topology, run_dir / "timeline.png"
    )
    artifacts += [timeline] if timeline is not None else []
    return replay, replay.num_gradients, replay.num_updates, simulated_time(replay)


def learner_spec(setup: RunSetup, opts, port: int, data_file: Path) -> LearnerSpec:
    """The learners' spec (:class:`~psbench.distributed.spec.LearnerSpec`) of ``setup``: a local-step protocol's
    window of H steps of the learners' optimizer, the codec, the model as the run built it."""
    from psbench.data import output_size, task_of
    from psbench.ps.local import is_elastic, uses_local_steps

    protocol, dm = setup.protocol, setup.data
    window = None
    if uses_local_steps(protocol.name):  # learners run the learner optimizer for H local steps; the PS adds commits
        window = Window(
            protocol.local_steps,
            setup.batch_size,
            is_elastic(protocol.name),
            protocol.rho,
            dict(setup.learner_optimizer),
        )
    return LearnerSpec(
        addr=opts.master_addr,
        port=port,
        world_size=protocol.learners + 1,
        timeout_s=max(float(opts.timeout_s), 3600.0),
        connect_timeout_s=float(opts.connect_timeout_s),
        model=dict(setup.model),  # learners build it as the run did
        input_shape=list(dm.input_shape),
        output_size=output_size(dm),
        task=task_of(dm),
        python_path=[p for p in sys.path if p],  # a user's _target_ modules import there as here
        data_file=str(data_file),
        seed=setup.seed,
        samples_per_gradient=setup.samples_per_gradient,
        threads=int(opts.learner_threads),
        delay_s={str(k): float(v) for k, v in dict(opts.learner_delay_s or {}).items()},
        rank_offset=1,
        window=window,
        compression=None if setup.compression is None else dict(setup.compression),
    )


def _serve(setup: RunSetup, run_dir: Path, opts, optimizer, replay, G: int, updates: int, wire, logger):
    """Write the learners' data and spec (checked first), start them (``spawn``) or wait for them (``external``),
    form the process group and run the PS; (the PS, its transport, seconds until every learner joined). Whatever ends
    it, no learner process and no copy of the data outlive it; a signal ends it KILLED with what was done."""
    from psbench.distributed.transport import GlooTransport

    lam, dm, net = setup.protocol.learners, setup.data, setup.net
    addr, connect_s = opts.master_addr, float(opts.connect_timeout_s)
    store = _store(addr, int(opts.port), lam + 1, connect_s)
    data_file, spec_file = run_dir / "learner_data.pt", run_dir / "dist_spec.json"
    procs, ps = Learners(), None
    try:
        torch.save({"x": dm.x_train.contiguous(), "y": dm.y_train.contiguous()}, data_file)
        spec = learner_spec(setup, opts, store.port, data_file)
        spec.check()
        spec.save(spec_file)
        if opts.launch == "spawn":
            procs.spawn(spec_file, lam, run_dir, spec.threads)
        print(
            f"psbench: engine=dist: PS rank 0 at {addr}:{store.port}, waiting up to {connect_s:g} s "
            f"(engine.connect_timeout_s) for {lam} learners (spec {spec_file})",
            file=sys.stderr,
            flush=True,
        )
        try:
            join_s = _join(store, lam, procs, connect_s, spec.timeout_s, opts.mode)
            numel = sum(p.numel() for p in net.parameters())
            transport = GlooTransport(lam, numel, procs.alive, push_bytes=None if wire is None else wire.push_bytes)
            ps = _parameter_server(setup, opts, optimizer, replay, G, transport, wire, logger)
            with lifecycle.deferred():  # the PS loop checks for a signal between messages (update boundaries)
                ps.run()
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
                samples=ps.stats.pushes_applied * setup.samples_per_gradient,
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
    return ps, transport, join_s


def _join(store, lam: int, procs: Learners, connect_s: float, timeout_s: float, mode: str) -> float:
    """Wait for the λ learners (:func:`_rendezvous`) and form the gloo process group; the seconds it took."""
    import torch.distributed as dist

    t_join = time.perf_counter()
    _rendezvous(store, lam, procs, connect_s)
    try:
        dist.init_process_group(
            "gloo", store=store, rank=0, world_size=lam + 1, timeout=datetime.timedelta(seconds=timeout_s)
        )
    except RuntimeError as e:
        why = " ".join(str(e).split())[:200]
        raise RunFailure(f"engine=dist: the process group did not form: {why}") from None
    join_s = time.perf_counter() - t_join
    logging.getLogger("psbench").info("engine=dist: %d learners joined in %.1f s; %s run starts", lam, join_s, mode)
    return join_s


def _parameter_server(setup: RunSetup, opts, optimizer, replay, G: int, transport, wire, logger):
    """The PS (rank 0) of ``setup``: its protocol, lr policy, optimizer and lr schedule, the replayed schedule or G."""
    from psbench.distributed.ps_server import ParameterServer

    opt, sched = optimizer
    return ParameterServer(
        setup.net,
        opt,
        sched,
        setup.protocol,
        setup.policy,
        setup.batch_size,
        setup.samples_per_gradient,
        G,
        transport,
        replay=replay,
        timeout_s=float(opts.timeout_s),
        tolerate_failures=opts.tolerate_failures,
        gradient_clip_val=setup.trainer.gradient_clip_val,
        divergence_factor=setup.trainer.divergence_factor,
        logger=logger,
        log_every=setup.trainer.log_every_n_updates,
        wire=wire,
        num_train=setup.data.num_train,
    )


def _records(setup: RunSetup, ps, run_dir: Path, artifacts: list[str]) -> tuple[Any, dict[str, Any]]:
    """The engine's own records in the run dir: the PS's event log (a free run's schedule), its timing and the
    measured staleness histogram; (the event log, the timing)."""
    from psbench.ps.staleness import plot_staleness

    mode, protocol = ("replay" if ps.replay is not None else "free_run"), setup.protocol
    meta = {**_meta(setup), "engine": "dist", "mode": mode}
    log = ps.event_log(meta)
    artifacts.append(str(log.save(run_dir / ("dist_log.npz" if mode == "replay" else "schedule.npz"))))
    timing: dict[str, Any] = ps.timing(log)
    write_atomic(run_dir / "dist_timing.npz", lambda fh: np.savez(fh, **timing))
    artifacts.append(str(run_dir / "dist_timing.npz"))
    hist = ps.stats.staleness.as_dict()
    artifacts.append(str(plot_staleness(hist, f"{protocol.label} (measured)", run_dir / "staleness_hist.png")))
    return log, timing


def _meta(setup: RunSetup) -> dict[str, Any]:
    from psbench.ps import plan

    return plan.schedule_meta(setup.protocol, setup.batch_size, setup.topology, setup.seed)


def _calibration(setup: RunSetup, ps, log, timing, numel: int) -> dict[str, Any] | None:
    """A free run's cost model fitted to its measured log and compared (:mod:`psbench.calibration.free_run`)."""
    stats = ps.stats
    if ps.replay is not None or not stats.pushes_applied or stats.failed_learners:
        return None
    from psbench.calibration.free_run import compare

    return compare(
        log, timing, setup.protocol, setup.batch_size, setup.data.num_train, numel * 4, stats.run_time_s, setup.seed
    )


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
    sim_time_s: float | None = None,
    calibration: dict[str, Any] | None = None,
    artifacts: list[str] | None = None,
) -> RunSummary:
    """The :class:`~psbench.summary.RunSummary` of a finished :class:`ParameterServer` run (its test error, loss and
    weights are :func:`psbench.models.evaluate.finish`'s).

    ``schedule``: the replayed schedule, or the free run's measured event log (its hash is
    ``schedule_sha256``). ``sim_time_s``: the simulated time of a replayed schedule (``None`` in a free
    run: nothing was simulated); the measured time is ``run_time_s``. ``push_payload_bytes`` is the
    codec's payload of one push (``None``: uncompressed, ``model_bytes``).
    """
    stats, lam, spg = ps.stats, ps.lam, ps.spg
    run_s = stats.run_time_s
    diverged = ps.diverged_at is not None
    samples = stats.pushes_applied * spg
    return RunSummary(
        status="diverged" if diverged else "finished",
        diverged=diverged,
        diverged_at_update=ps.diverged_at,
        divergence=ps.divergence,
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
        artifacts=list(artifacts or []),
    )


def simulated_time(schedule) -> float | None:
    """The simulated time of a schedule's last update; ``None`` for a dist free run's measured event log."""
    if schedule.meta.get("engine") == "dist" or not schedule.num_updates:
        return None
    return float(schedule.update_time[-1])
