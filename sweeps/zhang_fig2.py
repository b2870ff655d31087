"""Zhang et al. Fig 2: speed-up in training time per epoch vs λ, CIFAR10 (~350 kB) and ImageNet (~300 MB), simulated.

48 schedule-only runs (see src/psbench/conf/experiment/zhang/fig2.yaml): hardsync, 1-softsync and async for
λ ∈ {1, 2, 4, 8, 16, 30}, CIFAR μ ∈ {4, 128}, ImageNet μ = 16, on the p775_cluster cost model. Each
run simulates G gradients per learner; time per epoch is extrapolated from the steady rate.

Cost here: ``ci`` G = 50 (about 3–5 min, mostly building the 297.6 MB stand-in model 16 times);
``small`` G = 200 (about 5–8 min); ``paper`` G = 1,000 (about 10–15 min).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import main


def _g(g: int) -> list[str]:
    return [
        f"hydra.sweeper.derived.epochs='learners*batch_size*{g}/5085'",
        f"++tags.data_note=sim_{g}_grads_per_learner",
    ]


SCALES = {"ci": _g(50), "small": _g(200), "paper": _g(1000)}

if __name__ == "__main__":
    sys.exit(main("zhang_fig2", "zhang/fig2", SCALES, resources="ci"))  # schedule only: CPU minutes at every scale
