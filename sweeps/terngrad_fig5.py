"""TernGrad Fig 5: training throughput vs GPUs from the Appendix B performance model (no training).

The model is analytic (Eq 15–18, :mod:`psbench.compression.perf_model`), so every scale is the same
cheap computation (well under a minute): it writes ``fig5.csv`` and ``fig5.png`` under
``<root>/sweeps/terngrad_fig5`` and prints the speedups. The report page
(``python -m analysis``, page ``terngrad_fig5``) evaluates the same model directly.

    python sweeps/terngrad_fig5.py [scale=ci|small|paper]
"""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sweeps._runner import SCALES


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    scale = next((a.split("=", 1)[1] for a in args if a.startswith("scale=")), "ci")
    if scale not in SCALES:
        print(f"terngrad_fig5: error: scale={scale!r} is invalid: allowed one of {', '.join(SCALES)}", file=sys.stderr)
        return 2
    out = Path(os.environ.get("PSBENCH_ROOT") or os.getcwd()) / "sweeps" / "terngrad_fig5"
    cmd = [sys.executable, "-m", "psbench.compression.perf_model", "--out", str(out)]
    print("+", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call(cmd)
    print(f"terngrad_fig5 scale={scale}: exit {rc} after {time.perf_counter() - t0:.1f} s", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
