"""``engine=dist``: real learner and parameter-server processes over ``torch.distributed`` (DESIGN §3).

Rank 0 is the parameter server (PS), ranks 1..λ are learners; they exchange point-to-point
messages (:mod:`~psbench.engine.messages`). The PS applies the simulator's protocol rules
(:class:`~psbench.ps.Protocol`), learning-rate policies and optimizer to real gradients:

* ``free_run`` — true concurrency; the PS logs every event in the :class:`~psbench.ps.Schedule`
  format with the staleness and wall times it measured;
* ``replay`` — the PS applies pushes strictly in a given schedule's order (buffering early
  arrivals), so a simulated run is re-executed for real, bit for bit on CPU.

Modules: :mod:`aggregate` (the one aggregation rule, shared with the Lightning strategy),
:mod:`messages`, :mod:`learner` (the learner process), :mod:`ps_server` (the PS event loop),
:mod:`launcher` (process start, rendezvous, failure handling, ``train_dist``), :mod:`calibrate`
(fit the simulator's cost model to a free-run log). Nothing heavy is imported here: a learner
process imports only torch and the model code.
"""
