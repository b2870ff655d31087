"""Wall time of ``scale=ci`` runs of three sweeps, before vs after the execution work (parallel trials, look-ahead
gradients, several updates per Trainer step), in one run.

    python benchmarks/bench_ci_sweeps.py [--cases N | --all] [--sweeps a,b] [--repeats R] [--threads T]
                                         [--before REV] [--override KEY=VALUE ...]
    python benchmarks/bench_ci_sweeps.py --whole [--serial] [--sweeps a,b] [--repeats R] [--before REV]

``--whole`` times what the issue measures: each sweep's entry point (``python -m sweeps <name> scale=ci``; in an
old tree that has them, ``python sweeps/<name>.py scale=ci``), as a user runs it (its default logger, launcher and
threads), old and new interleaved, each run with a fresh ``PSBENCH_ROOT``. ``--serial``
adds a third side, the new code with ``--serial`` (one job at a time, as before), to tell the faster
execution from the parallel jobs apart. Printed per sweep: seconds per side, new/old speed-up, the jobs
finished per side, and the load averages before and after.

"before" is the code at ``--before`` (default ``fad06dd^1``: main just before the look-ahead merge), exported
with ``git archive`` into a temporary directory and imported through ``PYTHONPATH=<that>/src`` with this venv;
"after" is this working tree. Each case runs as the ``psbench`` command (``python -m psbench.cli``) — the
preset, the sweep's ``scale=ci`` overrides and the case's own overrides, ``seed=0``, ``logger=none``, a
temporary ``PSBENCH_ROOT`` — old and new interleaved (old, new, old, new, …) so that the machine's load hits
both alike; a case's time is the best of ``--repeats`` pairs. Printed: which code each side imports, each
case's seconds and new/old speed-up, the total, and the final weights' hashes (equal where the old and new
execution agree bit for bit, e.g. hardsync).

Cases: the first ``--cases`` (default 1) of each sweep's ``hydra.sweeper.cases`` in the order below (the
asynchronous ones first: the cases the look-ahead is for), or all of them with ``--all``. ``--override`` adds
overrides to every run (e.g. ``epochs=1`` to shorten; printed with the results).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SWEEPS = {  # sweep script -> (preset, cases in the order this benchmark takes them)
    "rudra_table2": ("rudra/table2", ["s30_mu4_lam30", "s1_mu4_lam30", "s18_mu8_lam18"]),
    "rudra_fig5": ("rudra/fig5", ["s30_alpha0_over_sigma", "s4_alpha0_over_sigma"]),
    "zhang_fig3": ("zhang/fig3", ["s30_tau", "s15_tau", "hardsync"]),
}


def sweep_cases(preset: str) -> dict[str, dict]:
    """The preset's ``hydra.sweeper.cases`` (case name -> overrides)."""
    cfg = yaml.safe_load((REPO / "src/psbench/conf/experiment" / f"{preset}.yaml").read_text())
    return cfg["hydra"]["sweeper"]["cases"]


def ci_overrides(sweep: str) -> list[str]:
    """The sweep's ``scale=ci`` overrides that apply to one run (its ``hydra.*`` ones dropped)."""
    from sweeps.entries import get

    return [o for o in get(sweep).scales["ci"] if not o.startswith("hydra.")]


def runs(n: int | None, sweeps: list[str]) -> list[tuple[str, list[str]]]:
    out = []
    for sweep in sweeps:
        preset, first = SWEEPS[sweep]
        cases = sweep_cases(preset)
        names = first + [c for c in cases if c not in first] if n is None else first[:n]
        for name in names:
            case = [f"{k}={v}" for k, v in cases[name].items()]
            out.append((f"{sweep}/{name}", [f"experiment={preset}", *ci_overrides(sweep), *case, "seed=0"]))
    return out


def env_for(src: Path, root: Path, threads: int) -> dict[str, str]:
    from psbench.cli import default_data_dir

    env = dict(
        os.environ,
        PYTHONPATH=str(src),
        PSBENCH_ROOT=str(root),
        PSBENCH_DATA=default_data_dir(str(REPO)),
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
    )
    return env


def which(env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", "import psbench; print(psbench.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def run_once(env: dict[str, str], args: list[str], run_dir: Path) -> tuple[float, dict]:
    cmd = [
        sys.executable,
        "-m",
        "psbench.cli",
        *args,
        "logger=none",
        "trainer.progress=none",
        f"trainer.num_threads={env['OMP_NUM_THREADS']}",
        f"hydra.run.dir={run_dir}",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=env["PSBENCH_ROOT"], capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return secs, json.loads((run_dir / "summary.json").read_text())


def whole_sweeps(args: argparse.Namespace, tmp: Path, old_tree: Path) -> None:
    """``--whole``: each sweep's entry point, old (the old tree's entry point and code) vs new, interleaved."""
    sides = {"old": (old_tree, []), "new": (REPO, [])}
    if args.serial:
        sides["new --serial"] = (REPO, ["--serial"])
    for side, (tree, _) in sides.items():
        env = dict(os.environ, PYTHONPATH=str(tree / "src"))
        where = which(env)
        assert Path(where).resolve().is_relative_to((tree / "src").resolve()), f"{side} imports {where}"
        print(f"{side}: {tree / 'sweeps'}, psbench from {where}")
    print(f"best of {args.repeats}; load before: {os.getloadavg()}")
    print(
        f"{'sweep':<16}"
        + "".join(f"{side + ' s':>16}" for side in sides)
        + "".join(f"{side + '/old':>18}" for side in list(sides)[1:])
        + "  jobs finished"
    )
    total = dict.fromkeys(sides, 0.0)
    for sweep in args.sweeps.split(","):
        best = dict.fromkeys(sides, float("inf"))
        done = {}
        for r in range(args.repeats):
            for side, (tree, extra) in sides.items():  # interleaved: the same load for all
                root = tmp / f"whole-{side.replace(' ', '')}-{sweep}-{r}"
                root.mkdir()
                path = f"{tree / 'src'}{os.pathsep}{tree}"  # `-m sweeps` from the tree
                env = dict(os.environ, PYTHONPATH=path, PSBENCH_ROOT=str(root), PSBENCH_DATA=data_dir())
                script = tree / "sweeps" / f"{sweep}.py"  # a tree from before sweeps/entries.yaml
                entry = [str(script)] if script.is_file() else ["-m", "sweeps", sweep]
                cmd = [sys.executable, *entry, "scale=ci", *extra, *args.override]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
                secs = time.perf_counter() - t0
                if proc.returncode != 0:
                    raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
                best[side] = min(best[side], secs)
                summaries = [json.loads(p.read_text()) for p in root.glob("sweeps/*/*/summary.json")]
                done[side] = sum(s.get("status", "finished") == "finished" for s in summaries)
                print(f"  {sweep} {side}: {secs:.1f} s, load {os.getloadavg()}", flush=True)
        for side in sides:
            total[side] += best[side]
        print(
            f"{sweep:<16}"
            + "".join(f"{best[side]:>16.1f}" for side in sides)
            + "".join(f"{best['old'] / best[side]:>17.2f}×" for side in list(sides)[1:])
            + "  "
            + ", ".join(str(done[side]) for side in sides),
            flush=True,
        )
    print(
        f"{'total':<16}"
        + "".join(f"{total[side]:>16.1f}" for side in sides)
        + "".join(f"{total['old'] / total[side]:>17.2f}×" for side in list(sides)[1:])
    )
    print(f"load after: {os.getloadavg()}")


def data_dir() -> str:
    """The datasets both sides read (``$PSBENCH_DATA``)."""
    from psbench.cli import default_data_dir

    return default_data_dir(str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1, help="cases per sweep (default 1)")
    ap.add_argument("--all", action="store_true", help="every case of the sweeps")
    ap.add_argument("--sweeps", default=",".join(SWEEPS), help="comma-separated subset of " + ",".join(SWEEPS))
    ap.add_argument("--repeats", type=int, default=1, help="old/new pairs per case; the best of each side counts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--before", default="fad06dd^1", help="git revision of the 'before' code")
    ap.add_argument("--override", action="append", default=[], help="extra override for every run")
    ap.add_argument("--whole", action="store_true", help="time each sweep's whole entry point (scale=ci)")
    ap.add_argument("--serial", action="store_true", help="with --whole: also the new code with --serial")
    args = ap.parse_args()
    todo = runs(None if args.all else args.cases, args.sweeps.split(","))
    with tempfile.TemporaryDirectory(prefix="bench_ci_") as tmp:
        tmp = Path(tmp)
        old_tree = tmp / "before"
        old_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.before, "src", "sweeps"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
        if args.whole:
            return whole_sweeps(args, tmp, old_tree)
        sides = {}
        for side, src in (("old", old_tree / "src"), ("new", REPO / "src")):
            root = tmp / f"root-{side}"
            root.mkdir()
            sides[side] = env_for(src, root, args.threads)
            where = which(sides[side])
            assert Path(where).resolve().is_relative_to(src.resolve()), f"{side} imports {where}, not {src}"
            print(f"{side}: psbench from {where}")
        print(f"threads={args.threads}, best of {args.repeats}, overrides: {' '.join(args.override) or '-'}")
        print(f"load before: {os.getloadavg()}")
        print(f"{'case':<36}{'old s':>9}{'new s':>9}{'speed-up':>10}  same weights")
        total = {"old": 0.0, "new": 0.0}
        for name, case in todo:
            best = {"old": float("inf"), "new": float("inf")}
            sha = {}
            for r in range(args.repeats):
                for side in ("old", "new"):  # interleaved: the same load for both
                    secs, summary = run_once(
                        sides[side], [*case, *args.override], tmp / f"root-{side}" / f"{name.replace('/', '_')}-{r}"
                    )
                    best[side] = min(best[side], secs)
                    sha[side] = summary.get("weights_sha256")
            total["old"] += best["old"]
            total["new"] += best["new"]
            print(
                f"{name:<36}{best['old']:>9.1f}{best['new']:>9.1f}{best['old'] / best['new']:>9.2f}×  "
                f"{'yes' if sha['old'] == sha['new'] else 'no (float tolerance)'}",
                flush=True,
            )
        print(f"{'total':<36}{total['old']:>9.1f}{total['new']:>9.1f}{total['old'] / total['new']:>9.2f}×")
        print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
