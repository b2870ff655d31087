"""A generic Hydra app (not psbench) for the ``psbench_optuna`` sweeper tests.

It returns what ``returns`` says: a number, a tuple (two objectives) or a mapping, computed
from ``x`` and ``y``, after ``sleep`` seconds. Each job appends its pid to ``attempts`` in its output dir. Environment
knobs: ``SWEEP_APP_KILL_AT=k`` SIGKILLs the whole sweep process when its k-th job starts (as
``kill -9`` would, mid-trial); ``SWEEP_APP_CRASH_X=v`` makes the jobs with ``x == v`` raise.
"""

import os
import signal
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

_calls = [0]


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig):
    _calls[0] += 1
    out = Path(HydraConfig.get().runtime.output_dir)
    with open(out / "attempts", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    if _calls[0] == int(os.environ.get("SWEEP_APP_KILL_AT", "0")):
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("SWEEP_APP_CRASH_X") == str(cfg.x):
        raise RuntimeError(f"x={cfg.x} crashes")
    time.sleep(cfg.sleep)
    x, y = float(cfg.x), float(cfg.y)
    if cfg.returns == "tuple":
        return x + y, (6 - x) ** 2 + (1 - y)
    if cfg.returns == "mapping":
        return {"loss": (x - 3) ** 2 + y, "size": x}
    return (x - 3) ** 2 + y + cfg.epochs


if __name__ == "__main__":
    main()
