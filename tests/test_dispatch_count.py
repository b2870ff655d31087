"""Host synchronisations and dispatched ops, counted on the CPU (:mod:`psbench.dispatch_count`; issue 38 items 2–3).

The counter itself on the idioms that stop a GPU's host; then what a psbench run does per PS update: what holds
today and must keep holding (the look-ahead's flushes read back at most once each; Lightning's loop reads nothing
back per update), and the GPU executor's (issue 38 item 2): the losses and divergence checks of the updates read
back once per look-ahead flush, never per update.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from psbench.dispatch_count import EVALUATION, FIT, GRADIENTS, OTHER, UPDATE, DispatchCounter, count, count_run

#: a small asynchronous run: many updates per look-ahead flush, seconds on one thread
RUN = (
    "trainer.progress=none",
    "trainer.num_threads=1",
    "trainer.checkpoint_every=0",
    "trainer.save_weights=false",
    "trainer.timeline_updates=0",
    "logger=none",
    "protocol=async",
    "learners=8",
    "batch_size=4",
    "epochs=1",
)


def test_every_idiom_that_reads_a_device_value_back_is_a_synchronisation():
    x = torch.randn(8)

    def reads() -> None:
        x.sum().item()
        float(x.max())
        int(x.argmax())
        bool(x.sum() > 0)
        math.isfinite(x.sum())
        if x[0] > 0:
            pass
        x.nonzero()
        x[x > 0]
        torch.equal(x, x)

    _, c = count(reads)
    assert c.total("syncs") == 9
    assert all(site.startswith("tests/test_dispatch_count.py:") for site in c.sync_sites), c.sync_sites
    _, quiet = count(lambda: (x * 2).sum() + x.mean())  # ops stay on the device
    assert quiet.total("syncs") == 0 and quiet.total("ops") == 4


def test_host_reads_of_cpu_tensors_are_counted_apart_and_the_methods_restored():
    x = torch.arange(4)
    tolist, numpy = torch.Tensor.tolist, torch.Tensor.numpy
    _, c = count(lambda: (x.tolist(), x.numpy()))
    assert c.total("host_reads") == 2 and c.total("syncs") == 0
    assert torch.Tensor.tolist is tolist and torch.Tensor.numpy is numpy


def test_an_upload_is_a_synchronisation_and_counted_on_the_cpu_too():
    """torch copies host → device with ``cudaMemcpyAsync`` and then waits for the stream (from pageable memory the
    driver may wait even when asked not to): the host waits for every queued kernel. Counted where the target is a
    device (``meta`` here, CUDA on a GPU), Python data included (torch copies those with the dispatcher's hooks off);
    on a CPU run, where the same line dispatches nothing, a blocking call is counted as an upload."""
    from psbench.strategy.device import upload

    x, to, tensor, as_tensor = torch.arange(3), torch.Tensor.to, torch.tensor, torch.as_tensor
    _, dev = count(
        lambda: (
            x.to("meta"),
            x.to("meta", non_blocking=True),  # unpinned memory: waits all the same
            torch.tensor([1.0, 2.0], device="meta"),
            torch.as_tensor(np.arange(3), device="meta"),
        )
    )
    assert dev.total("syncs") == 4 and dev.total("uploads") == 0, dev.sync_sites
    assert all(site.endswith("host-to-device copy") for site in dev.sync_sites), dev.sync_sites
    cpu = torch.device("cpu")
    _, host = count(
        lambda: (
            torch.from_numpy(np.arange(3)).to(cpu),  # an upload on a GPU run
            torch.tensor([1.0], device=cpu),
            torch.as_tensor([1.0], device="cpu"),
            upload(x, cpu),  # already there: not
            x.to(torch.float64),  # no device: not
            x.to(cpu, torch.float32, True),  # non-blocking, positionally: not
            torch.tensor([1.0]),  # stays on the host: not
            torch.as_tensor(x, device=cpu),  # already a tensor where it is needed: not
        )
    )
    assert host.total("uploads") == 3 and host.total("syncs") == 0, host.upload_sites
    assert {site.rsplit(" ", 1)[1] for site in host.upload_sites} == {"to", "tensor", "as_tensor"}
    assert torch.Tensor.to is to and "to" not in torch.Tensor.__dict__
    assert torch.tensor is tensor and torch.as_tensor is as_tensor


def test_upload_to_cuda_goes_pinned_and_non_blocking(monkeypatch):
    """psbench's ``upload`` on a CUDA target (its branch driven on the CPU: the pinning and the copy recorded): a
    pinned copy sent non-blocking, so the host does not wait; elsewhere a plain copy, or the tensor itself."""
    from psbench.strategy.device import upload

    calls = []
    to = torch.Tensor.to

    def pin_memory(t):
        calls.append("pin")
        return t.clone()

    def recording_to(t, *args, **kwargs):
        calls.append(("to", str(args[0]) if args else None, kwargs.get("non_blocking", False)))
        return t if args and str(args[0]).startswith("cuda") else to(t, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory, raising=False)
    monkeypatch.setattr(torch.Tensor, "to", recording_to, raising=False)
    x = torch.arange(3)
    upload(x, torch.device("cuda", 0))
    assert calls == ["pin", ("to", "cuda:0", True)]
    calls.clear()
    upload(x, torch.device("meta"))
    assert calls == [("to", "meta", False)]  # MPS and others: blocking, as Lightning does
    calls.clear()
    assert upload(x, torch.device("cpu")) is x and calls == []


def test_phases_take_the_counts_of_what_runs_inside_them():
    x = torch.ones(3)

    class Thing:
        def work(self) -> float:
            return float(x.sum())

    with DispatchCounter() as c:
        assert c.wrap(Thing, "work", "inner")
        Thing().work()
        with c.phase("outer"):
            x + 1
            Thing().work()
        assert not c.wrap(Thing, "absent", "nothing")
    assert "work" not in Thing.__dict__ or Thing.__dict__["work"].__name__ == "work"
    assert c.counts.syncs == {"inner": 2} and c.counts.ops == {"inner": 4, "outer": 1}
    assert c.counts.calls == {"inner": 2, "outer": 1} and c.counts.ops[OTHER] == 0


@pytest.fixture
def counted(compose_cfg, tmp_path):
    from psbench.train import prepare

    runs = iter(range(100))

    def run(updates: int, *overrides: str):
        d = tmp_path / f"run{next(runs)}"
        d.mkdir()
        return count_run(prepare(compose_cfg(*RUN, f"trainer.max_updates={updates}", *overrides)), d)

    return run


def test_the_look_ahead_reads_back_at_most_once_per_flush_and_lightning_none_per_update(counted):
    short, long = counted(24), counted(48)
    for rc in (short, long):
        assert rc.flushes >= 1 and rc.counts.calls[UPDATE] >= rc.updates
        assert rc.counts.ops[GRADIENTS] > 0 and rc.counts.syncs[GRADIENTS] <= rc.flushes  # today: none at all
        assert rc.counts.calls[EVALUATION] >= 1
    assert (short.updates, long.updates) == (24, 48)
    assert long.counts.syncs[FIT] == short.counts.syncs[FIT]  # Lightning's loop: per run, not per update


def test_the_counts_are_a_function_of_the_run(counted):
    a, b = counted(24).as_dict(), counted(24).as_dict()
    assert a == b


def test_at_most_one_host_synchronisation_per_look_ahead_flush(counted):
    """The strategy reads its updates back once per flush (psbench.strategy.pending): no synchronisation at all
    per update, one read (a CPU tensor's ``tolist`` here, a device-to-host copy on a GPU) per flush; Lightning's
    own are per run (the test above)."""
    rc = counted(48)
    syncs, reads = rc.counts.syncs, rc.counts.host_reads
    assert syncs[UPDATE] == syncs[GRADIENTS] == 0, rc.as_dict()
    assert 0 < reads[UPDATE] + reads[GRADIENTS] <= rc.flushes, rc.as_dict()
    # nor an upload: a look-ahead's index and weight tensors reach the device without waiting for it
    assert rc.counts.uploads[UPDATE] == rc.counts.uploads[GRADIENTS] == 0, rc.counts.upload_sites
    assert rc.flushes < rc.updates / 3  # many updates per flush: reading back per update would fail the line above


def test_an_async_update_neither_copies_snapshots_into_new_buffers_nor_sums_its_one_row(counted):
    """Per async update, in 24 more updates: a snapshot goes into a dropped one's buffers (one ``_foreach_copy_``,
    where a clone per weight tensor was 64 clones), and an update's one vmapped row is its aggregate, a view (where
    a sum per weight tensor and loss was 120 more sums)."""
    short, long = counted(24), counted(48)

    def more(phase: str, op: str) -> int:
        return long.counts.phase_ops[phase, op] - short.counts.phase_ops[phase, op]

    updates = long.updates - short.updates
    assert more(UPDATE, "clone") < updates / 4 and more(UPDATE, "_foreach_copy_") > 0
    assert more(GRADIENTS, "sum") < updates, long.top_ops(GRADIENTS)


def test_hardsync_reads_back_once_per_64_updates_not_per_flush(counted):
    """Hardsync's updates are a look-ahead flush each: read back before every flush, a GPU's host waited for each
    update's kernels before it launched the next update's. In the psbench command nothing but psbench sees the
    weights between read-backs, and hardsync's aggregates are tensors of their own (no flush's tensor kept alive):
    read back once per ``Pending.MAX_UPDATES``, and at the fit's end."""
    rc = counted(48, "protocol=hardsync", "batch_size=2")
    assert rc.updates == 48 and rc.flushes == 48
    assert rc.counts.host_reads[UPDATE] + rc.counts.host_reads[GRADIENTS] <= 1, rc.counts.read_sites


def test_the_divergence_check_is_finished_once_per_flush_not_per_update(counted):
    """Per update only what must see θ before its step (``update_terms``: a product and a 1-norm per weight tensor);
    the loss + Σ|θ·g| of every update since the last read-back and its t − t = 0 are one stack, sum, add, sub and
    eq at the read-back (``finite_flags``), where they were five kernels per update."""
    short, long = counted(24), counted(48)
    updates, reads = long.updates - short.updates, long.flushes - short.flushes + 1
    assert updates > 3 * reads
    for op in ("eq", "sub"):
        assert long.counts.phase_ops[UPDATE, op] - short.counts.phase_ops[UPDATE, op] <= reads, long.top_ops(UPDATE)


@pytest.mark.parametrize("fused", [False, True])
def test_a_nesterov_update_copies_its_aggregate_only_for_a_step_that_writes_into_it(counted, monkeypatch, fused):
    """``foreach`` SGD with Nesterov momentum adds the momentum into p.grad in place, so the update keeps a copy of
    its aggregate to apply again after a rollback (a clone per weight tensor); the fused step (a GPU's) leaves
    p.grad alone and needs none."""
    from psbench.optimizer import build

    if fused:
        monkeypatch.setattr(build, "FUSED_DEVICES", ("cpu",))
    momentum = ("optimizer.momentum=0.9", "optimizer.weight_decay=0")
    plain, nesterov = counted(48, *momentum), counted(48, *momentum, "+optimizer.nesterov=true")
    clones = nesterov.counts.phase_ops[UPDATE, "clone"] - plain.counts.phase_ops[UPDATE, "clone"]
    assert clones == 0 if fused else clones >= 48, clones


def test_the_weights_are_looked_up_per_run_not_per_update(counted, monkeypatch):
    """Walking the module tree for θ (``named_parameters``) cost ~150 Python calls per PS update; the look-ahead
    looks the tensors up once (the optimizer steps them in place)."""
    walks = []
    named_parameters = torch.nn.Module.named_parameters

    def counting(self, *args, **kwargs):
        walks.append(type(self).__name__)
        return named_parameters(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "named_parameters", counting)
    counted(24)
    short = len(walks)
    walks.clear()
    counted(48)
    assert len(walks) == short, f"{len(walks) - short} more walks for 24 more updates"
