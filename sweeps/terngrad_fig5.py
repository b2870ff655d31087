"""TernGrad Fig 5: training throughput vs GPUs from the Appendix B performance model (no training).

The model is analytic (Eq 15–18, :mod:`psbench.compression.perf_model`), so every scale is the same
cheap computation (well under a minute): it writes ``fig5.csv`` and ``fig5.png`` under
``<root>/sweeps/terngrad_fig5`` and prints the speedups. The report page
(``python -m analysis``, page ``terngrad_fig5``) evaluates the same model directly.

    python sweeps/terngrad_fig5.py [scale=ci|small|paper]
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SCALES, run, scale_of


def main(argv: list[str] | None = None) -> int:
    try:
        scale, _ = scale_of("terngrad_fig5", list(sys.argv[1:] if argv is None else argv), SCALES)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    out = Path(os.environ.get("PSBENCH_ROOT") or os.getcwd()) / "sweeps" / "terngrad_fig5"
    return run("terngrad_fig5", scale, [sys.executable, "-m", "psbench.compression.perf_model", "--out", str(out)])


if __name__ == "__main__":
    sys.exit(main())
