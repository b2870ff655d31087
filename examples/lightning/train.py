"""Train ``model.py``'s LitConvNet on digits with plain Lightning or on a simulated parameter server.

    python examples/lightning/train.py                                   # 4-softsync, λ = 8 learners of μ = 16
    python examples/lightning/train.py --protocol async --learners 30 --batch-size 4
    python examples/lightning/train.py --plain                           # the same script without psbench

The only psbench line is the strategy: each of the λ simulated learners computes LitConvNet's own
``training_step`` on its mini-batch of μ = the DataModule's batch size, on the weights it pulled; the PS applies
the SGD optimizer of ``configure_optimizers``. ``strategy.summary`` holds the schedule's staleness and the
simulated cluster time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytorch_lightning as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import DigitsData, LitConvNet


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocol", default="softsync", help="hardsync | softsync | async | ssp")
    ap.add_argument("--n", type=int, default=4, help="softsync's splitting parameter")
    ap.add_argument("--learners", type=int, default=8, help="λ")
    ap.add_argument("--batch-size", type=int, default=16, help="μ, each learner's mini-batch")
    ap.add_argument("--hardware", default="laptop", help="the simulated cluster: laptop | p775 | p775_cluster")
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plain", action="store_true", help="plain Lightning (one learner), for comparison")
    args = ap.parse_args(argv)
    pl.seed_everything(args.seed, verbose=False)
    strategy = "auto"
    if not args.plain:
        from psbench import ParameterServerStrategy

        strategy = ParameterServerStrategy.simulated(
            protocol=args.protocol,
            n=args.n if args.protocol == "softsync" else None,
            learners=args.learners,
            hardware=args.hardware,
            seed=args.seed,
        )
    trainer = pl.Trainer(
        strategy=strategy,
        accelerator="cpu",
        max_epochs=args.max_epochs,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    trainer.fit(LitConvNet(), datamodule=DigitsData(args.batch_size, args.seed))
    result = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if not args.plain:
        s = strategy.summary
        result.update(
            protocol=s.protocol,
            staleness_mean=s.staleness_mean,
            staleness_hist=s.staleness_hist,
            ps_updates=s.ps_updates,
            sim_time_s=s.sim_time_s,
        )
    print(result)
    return result


if __name__ == "__main__":
    main()
