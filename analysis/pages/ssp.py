"""SSP for DNNs (Kumar, Xie, Yin, Xing): Figs 2–5 — paper numbers beside ours, on synthetic stand-ins.

Figs 2/3 are the objective vs run time for 1–6 machines (learners) under SSP (s = 10), Figs 4/5 the
speed-up t_1/t_n, where t_n is when the objective of n machines falls to p, the objective of one
machine at the end of training (§6.2). TIMIT and ImageNet-63K are not available here: synthetic data of
their shapes stand in, and every table says so. Builders read MLflow only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

from analysis.evidence import objective
from analysis.learning import increasing, learned
from analysis.page import Budget, Context, Page, Shown, coverage
from analysis.pages import ssp_paper as P
from analysis.render import cell, figure, legend, md_table
from analysis.runs import Run, history, scales_of, select
from analysis.verdicts import Claim, not_measured, simulated

ORDER = 4
#: §6: 10 epochs (20 with ≥ 2 machines, so that every run reaches the objective; the sweeps keep that ratio at
#: every scale, so k of 10 is the share of each run's budget)
BUDGET = Budget(10)
WINDOW = 10  # logged points in the trailing mean that smooths the mini-batch objective
SPEEDUP_TOL = 0.25  # a 6-machine speed-up "as the paper's" is within ±25 % of it


def _runs(ctx: Context, dataset: str) -> list[Run]:
    return select(ctx.runs, paper="ssp", dataset_stand_in=dataset)


def _machines(r: Run) -> int:
    return int(r.tags.get("case", "m0")[1:] or 0)


def smooth(values: Sequence[float], window: int = WINDOW) -> list[float]:
    """Trailing mean over at most ``window`` points (the objective is logged per mini-batch, so noisy)."""
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def objective_curve(ctx: Context, r: Run) -> list[tuple[float, float]]:
    """``(simulated seconds, smoothed objective)``: the training loss and simulated time logged at the same updates."""
    t = dict(history(ctx.tracking_uri, r, "sim_time_s"))
    pts = [(t[s], v) for s, v in history(ctx.tracking_uri, r, "train_loss") if s in t]
    return list(zip([p[0] for p in pts], smooth([p[1] for p in pts]), strict=True))


def time_to(curve: Sequence[tuple[float, float]], p: float) -> float | None:
    """First time the objective is ≤ p, or None if it never gets there (§6.2's t)."""
    return next((t for t, v in curve if v <= p), None)


def speedups(curves: Mapping[int, Sequence[tuple[float, float]]]) -> dict[int, tuple[float | None, float | None]]:
    """``{machines: (t_n, t_1/t_n)}`` with p = the 1-machine objective at the end of training."""
    one = curves.get(1)
    if not one:
        return {}
    p = one[-1][1]
    t1 = time_to(one, p)
    out = {}
    for n, c in sorted(curves.items()):
        tn = time_to(c, p)
        out[n] = (tn, (t1 / tn) if (tn and t1) else None)
    return out


def _header(ds: Mapping, runs: Sequence[Run]) -> str:
    notes = sorted({r.tags.get("data_note", "") for r in runs} | {r.tags.get("model_note", "") for r in runs})
    return (
        f"Paper: {ds['name']} ({ds['features']} features, {ds['classes']} classes, {ds['samples']} samples), "
        f"{ds['net']}, SGD, mini-batch {ds['batch']}, learning rate {ds['lr']:g}, staleness {ds['staleness']}. "
        f"**Ours: synthetic data of the same shape stand in for {ds['name']} (not available here)**; "
        f"notes: {', '.join(n for n in notes if n) or '—'}. Time is simulated: the paper's 10 Gbit/s links, "
        "the Petuum server sharded over the n machines (k = n shards, one per machine, each machine's slice "
        "local: `hardware.ps_colocated`; k follows from the design, nothing is fitted on an SSP number; runs "
        "made before this term had one PS on one link), compute 6 FLOP per parameter per sample at an assumed "
        "100 GFLOP/s per machine; the paper gives no timings, so the speed-up depends on this assumed "
        "compute/communication ratio.\n" + _throughput(ds)
    )


def _throughput(ds: Mapping) -> str:
    """The cost model's own ceiling: samples/s of n machines over 1 for the paper's net (no staleness cost)."""
    from psbench.cluster import CostModel, Topology
    from psbench.ps import Protocol, Simulator

    params, per_sample = (25_821_137, 1.549e-3) if ds["name"] == "TIMIT" else (130_531_000, 7.832e-3)
    rows = []
    for colocated in (False, True):
        rate = {}
        for n in P.MACHINES:
            cost = CostModel.from_profile(
                "laptop",
                4 * params,
                bandwidth_Bps=1.25e9,
                overhead_s=0.0,
                per_sample_s=per_sample,
                ps_shards=n if colocated else 1,
                ps_colocated=colocated,
            )
            sim = Simulator(
                Protocol("ssp", n, staleness_bound=ds["staleness"]), cost, Topology("rudra_base"), ds["batch"], n * 60
            )
            for _ in sim.run():
                pass
            rate[n] = sim.total_gradients / sim.stats.sim_time_s
        rows.append(
            ["k = n co-located shards" if colocated else "one PS, one link"]
            + [f"{rate[n] / rate[1]:.2f}" for n in P.MACHINES]
        )
    return (
        "\nThroughput ceiling of the cost model alone (samples/s of n machines over 1, the paper-size net, "
        "no staleness cost; the speed-up t_1/t_n below also pays for staleness):\n\n"
        + md_table(["server", *[f"n = {n}" for n in P.MACHINES]], rows)
    )


def _curves(ctx: Context, rs: Sequence[Run]) -> dict[int, list[tuple[float, float]]]:
    return {_machines(r): objective_curve(ctx, r) for r in rs}


def one_seed(rs: Sequence[Run]) -> tuple[list[Run], str | None]:
    """The runs of the lowest seed that every machine count has (speed-ups compare machine counts within one seed,
    never across seeds), and that seed; all runs and None when no seed is common to every machine count."""
    counts = {_machines(r) for r in rs}
    by_seed: dict[str, set[int]] = {}
    for r in rs:
        by_seed.setdefault(r.params.get("seed", ""), set()).add(_machines(r))
    common = sorted((k for k, ms in by_seed.items() if ms == counts), key=lambda k: (len(k), k))
    if not common:
        return list(rs), None
    return [r for r in rs if r.params.get("seed", "") == common[0]], common[0]


CMD = "python -m sweeps ssp_fig2_4 scale=ci; python -m sweeps ssp_fig3_5"


def _shown(ctx: Context, claims: list, note: str) -> Shown:
    """Both data sets' (data set, machines) configurations, per scale."""
    runs = [r for key in P.DATASETS for r in _runs(ctx, key)]
    want = [f"{key} m{n}" for key in P.DATASETS for n in P.MACHINES]
    return Shown(
        coverage(runs, want, key=lambda r: f"{r.tags.get('dataset_stand_in')} {r.tags.get('case')}"),
        claims,
        runs,
        CMD,
        note,
    )


# --------------------------------------------------------------------------- Figs 2–3
def ssp_fig2_3(ctx: Context) -> tuple[str, str]:
    md = ["# SSP Figs 2–3 — objective vs run time for 1–6 machines (SSP, s = 10)\n"]
    claims = []
    for key, ds in P.DATASETS.items():
        runs = _runs(ctx, key)
        md.append(f"\n## Fig {ds['figures'][0]}: {ds['name']} stand-in\n\n" + _header(ds, runs))
        if not scales_of(runs):
            md.append(
                f"\nNo runs in the store (python sweeps/ssp_fig{ds['figures'][0]}_{ds['figures'][1]}.py scale=ci).\n"
            )
            claims.append(
                not_measured(f"{ds['name']}: more machines consistently improve the convergence speed", "no runs")
            )
            continue
        scales = scales_of(runs)
        for scale in scales:
            rs = sorted(select(runs, scale=scale), key=_machines)
            per_run = {r.run_id: objective_curve(ctx, r) for r in rs}
            curves = {_machines(r): per_run[r.run_id] for r in rs}  # plotted: the latest seed of each
            t_end = min((c[-1][0] for c in per_run.values() if c), default=None)
            rows, at_t = [], {}
            for n in sorted(curves):
                seeds = select(rs, case=f"m{n}")
                cs = [per_run[r.run_id] for r in seeds if per_run[r.run_id]]
                at_t[n] = [v for c in cs if (v := _at(c, t_end)) is not None]
                rows.append(
                    [
                        str(n),
                        cell([c[-1][1] for c in cs], 1, 4),
                        cell([c[-1][0] for c in cs], 1, 4),
                        cell(at_t[n], 1, 4),
                        cell([r.metrics.get("staleness_mean") for r in seeds]),
                        cell([r.metrics.get("comm_overlap") for r in seeds], 1, 3),
                        f"{sum(r.tags.get('diverged') == 'true' for r in seeds)} of {len(seeds)}",
                    ]
                )
            md += [
                f"\n### scale = {scale}\n\nPer number of machines: mean ± std over seeds (n); objective = the "
                f"training loss smoothed over the last {WINDOW} logged updates.\n\n",
                md_table(
                    [
                        "machines",
                        "final objective",
                        "end sim time s",
                        f"objective at t = {t_end:.4g} s" if t_end is not None else "objective at common t",
                        "⟨σ⟩",
                        "comm overlap",
                        "diverged",
                    ],
                    rows,
                ),
            ]
            png = _curve_plot(curves, ds["name"], ds["figures"][0], ctx.out / f"ssp_fig{ds['figures'][0]}_{scale}.png")
            if png:
                md.append(f"\n![objective vs time]({png.name})\n")
            if scale == scales[-1]:
                claims.append(_faster_claim(ds, at_t))
    return _shown(ctx, claims, "synthetic stand-ins"), "".join(md)


def _at(curve: Sequence[tuple[float, float]], t: float | None) -> float | None:
    """The objective of ``curve`` at its last point at or before ``t``."""
    return next((v for s, v in reversed(curve) if t is not None and s <= t), None)


def _faster_claim(ds: Mapping, at_t: Mapping[int, list[float]]) -> Claim:
    """The objective at the common time (the end of the fastest run) strictly decreasing in machines, by the
    verdict rule (per machine count ≥ 3 seeds, the best must have learned: 10 % below ln(classes))."""
    text = (
        f"{ds['name']}: more machines consistently improve the convergence speed (objective at a common time "
        "strictly decreasing in machines)"
    )
    ns = sorted(at_t, reverse=True)
    series = [objective(f"{n} machine{'s' if n > 1 else ''}", at_t[n], ds["classes"]) for n in ns]
    return increasing(text, series, labels=[f"{n} machines" for n in ns])


def _curve_plot(curves: Mapping[int, Sequence[tuple[float, float]]], name: str, fig_no: str, path: Path) -> Path | None:
    if not any(curves.values()):
        return None
    with figure(path, figsize=(6, 4)) as ax:
        for n, c in sorted(curves.items()):
            if c:
                ax.plot([t for t, _ in c], [v for _, v in c], label=f"{n} machine{'s' if n > 1 else ''}")
        vals = [v for c in curves.values() for _, v in c if v > 0]
        if vals and max(vals) / min(vals) > 100:  # a diverging objective flattens a linear axis
            ax.set_yscale("log")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("objective (training loss, smoothed)")
        ax.set_title(f"SSP Fig {fig_no}: {name} stand-in (synthetic)")
        legend(ax, fontsize=7)
    return path


# --------------------------------------------------------------------------- Figs 4–5
def ssp_fig4_5(ctx: Context) -> tuple[str, str]:
    md = [
        "# SSP Figs 4–5 — speed-up t_1/t_n vs machines\n\n",
        "t_n = the simulated time at which the (smoothed) objective of n machines falls to p, the objective of "
        "one machine at the end of training (§6.2); ‘not reached’ = the n-machine run never got to p.\n",
    ]
    claims = []
    for key, ds in P.DATASETS.items():
        runs = _runs(ctx, key)
        md.append(f"\n## Fig {ds['figures'][1]}: {ds['name']} stand-in\n\n" + _header(ds, runs))
        if not scales_of(runs):
            md.append("\nNo runs in the store.\n")
            claims.append(not_measured(f"{ds['name']}: with 6 machines {ds['speedup6']:g}x speed-up", "no runs"))
            continue
        scales = scales_of(runs)
        for scale in scales:
            rs, seed = one_seed(select(runs, scale=scale))
            curves = _curves(ctx, rs)
            sp = speedups(curves)
            rows = [
                [
                    str(n),
                    "—" if tn is None else f"{tn:.4g}",
                    "not reached" if s is None else f"{s:.2f}",
                    str(n),
                    f"{ds['speedup6']:g}" if n == 6 else "—",
                ]
                for n, (tn, s) in sp.items()
            ]
            which = (
                f"seed {seed}, the lowest seed every machine count has"
                if seed is not None
                else "no seed has every machine count: the latest run of each"
            )
            md += [
                f"\n### scale = {scale}\n\nOne run (n=1) per number of machines ({which}).\n\n",
                md_table(["machines", "t_n (sim s)", "ours speed-up", "linear", "paper speed-up"], rows),
            ]
            png = _speedup_plot(
                sp, ds["name"], ds["figures"][1], ctx.out / f"ssp_fig{ds['figures'][1]}_{scale}.png", ds["speedup6"]
            )
            if png:
                md.append(f"\n![speed-up vs machines]({png.name})\n")
            if scale == scales[-1]:
                one = curves.get(1) or []
                claims += speedup_claims(
                    ds, sp, learned("1 machine", objective("1 machine", [one[-1][1]] if one else [], ds["classes"]))
                )
    return _shown(ctx, claims, "synthetic stand-ins"), "".join(md)


def speedup_claims(ds: Mapping, sp: Mapping[int, tuple[float | None, float | None]], premise: Claim) -> list[Claim]:
    """§6.2's speed-ups; p is the 1-machine objective at the end, so they need that run to have learned."""
    paper = ds["speedup6"]
    s6 = sp.get(6, (None, None))[1]
    nums = ", ".join(f"{n}: {'not reached' if s is None else f'{s:.2f}x'}" for n, (_, s) in sp.items())
    six = simulated(
        f"{ds['name']}: with 6 machines {paper:g}x speed-up (within ±{SPEEDUP_TOL:.0%})",
        None if 6 not in sp else s6 is not None and abs(s6 - paper) <= SPEEDUP_TOL * paper,
        f"ours {'not reached' if s6 is None else f'{s6:.2f}x'} with 6 machines" if 6 in sp else "—",
        premise=premise,
    )
    vals = [s for _, s in sp.values()]
    grows = simulated(
        f"{ds['name']}: speed-up grows with the number of machines (scales well)",
        None if len(vals) < 2 else None not in vals and all(a < b for a, b in itertools.pairwise(vals)),
        nums or "—",
        premise=premise,
    )
    return [six, grows]


def _speedup_plot(sp: Mapping[int, tuple], name: str, fig_no: str, path: Path, paper6: float) -> Path | None:
    pts = [(n, s) for n, (_, s) in sp.items() if s is not None]
    if not pts:
        return None
    with figure(path, figsize=(5, 3.5)) as ax:
        ax.plot(P.MACHINES, P.MACHINES, "b-", label="linear (optimal)")
        ax.plot([n for n, _ in pts], [s for _, s in pts], "r-o", label="ours (SSP, simulated)")
        ax.plot([6], [paper6], "k*", ms=12, label=f"paper: {paper6:g}x with 6 machines")
        ax.set_xlabel("machines")
        ax.set_ylabel("speed-up t_1/t_n")
        ax.set_title(f"SSP Fig {fig_no}: {name} stand-in")
        legend(ax, fontsize=7)
    return path


# --------------------------------------------------------------------------- Table 1, Fig 6
def ssp_table1(ctx: Context) -> tuple[Shown, str]:
    rows = [
        [
            ds["name"],
            str(ds["features"]),
            str(ds["classes"]),
            ds["samples"],
            ds["net"],
            f"synthetic: {ds['features']} features, {ds['classes']} classes (dataset=synthetic, "
            f"experiment=ssp/fig{ds['figures'][0]}_{ds['figures'][1]})",
        ]
        for ds in P.DATASETS.values()
    ]
    md = (
        "# SSP Table 1 — statistics of the data sets\n\n"
        "Paper: the data sets of Figs 2–5. Ours: neither is available here; synthetic data of the same shape "
        "(seeded Gaussian class clusters, not speech or images) stand in, as every SSP page says.\n\n"
        + md_table(["data set", "features", "classes", "samples", "paper's network", "ours"], rows)
    )
    return Shown(note="the paper's data sets (not available here) and our synthetic stand-ins"), md


def ssp_fig6(ctx: Context) -> tuple[Shown, str]:
    md = (
        "# SSP Fig 6 — convergence of the parameters on TIMIT, 6 machines\n\n"
        "Paper: a plot of parameter values over time on TIMIT with 6 machines. Ours: not measured. psbench "
        "logs the objective, staleness and timing per update, not parameter traces, and TIMIT is not available "
        "here (the stand-in is synthetic); the Figs 2–3 runs (`python -m sweeps ssp_fig2_4 scale=ci`) have the "
        "6-machine run, but not its parameters over time.\n"
    )
    claim = not_measured("with 6 machines the parameters converge", "psbench records no parameter traces")
    return Shown(claims=[claim], note="not measured: psbench records no parameter traces"), md


PAGES = [
    Page("SSP", "Fig 1", reason="an illustration (single- and multi-layer DNN): no numbers"),
    Page("SSP", "Table 1", "ssp_table1", ssp_table1),
    Page("SSP", "Figs 2–3", "ssp_fig2_3", ssp_fig2_3, budget=BUDGET),
    Page("SSP", "Figs 4–5", "ssp_fig4_5", ssp_fig4_5, budget=BUDGET),
    Page("SSP", "Fig 6", "ssp_fig6", ssp_fig6),
]
