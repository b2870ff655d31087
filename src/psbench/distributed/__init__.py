"""``engine=dist``: real learner and parameter-server processes over ``torch.distributed``.

Rank 0 is the parameter server (PS), ranks 1..λ are learners; they exchange point-to-point
messages (:mod:`~psbench.distributed.messages`). The PS applies the simulator's protocol rules
(:class:`~psbench.ps.Protocol`), learning-rate policies and optimizer to real gradients:

* ``free_run`` — true concurrency; the PS logs every event in the :class:`~psbench.ps.Schedule`
  format with the staleness and wall times it measured;
* ``replay`` — the PS applies pushes strictly in a given schedule's order (buffering early
  arrivals), so a simulated run is re-executed for real, bit for bit on CPU.

Modules: :mod:`messages`, :mod:`transport`, :mod:`learner` (the learner process), :mod:`ps_server` (the PS event
loop), :mod:`launcher` (process start, rendezvous, failure handling, ``train_dist``), :mod:`options` (the
torch-free ``engine`` checks); a free run's calibration (the simulator's cost model fitted to its log) is
:mod:`psbench.calibration.free_run`'s. The aggregation rule and the sample stream are :mod:`psbench.ps`'s, the
wire format :mod:`psbench.compression.wire`'s. Nothing heavy is imported here: a learner process imports only
torch and the model code.
"""
