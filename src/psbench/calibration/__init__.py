"""Fitting the cost model to measurements, above the simulator it runs (:mod:`psbench.ps`, :mod:`psbench.cluster`).

* :mod:`.paper_fit` — ``p775_cluster``'s terms fitted on the papers' published timings, each on one number, and
  what the fitted model predicts for the others (``python -m psbench.calibration.paper_fit``);
* :mod:`.model_time` — the real model's forward+backward time at a few μ on this machine
  (``hardware.calibrate=true``);
* :mod:`.free_run` — the cost model fitted to an ``engine=dist`` free run's measured event log, and the
  simulation of it compared with the measurement (``python -m psbench.calibration.free_run RUN_DIR``).
"""
