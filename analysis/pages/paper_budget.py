"""What a CIFAR page shows of its runs at the paper's own budget (``scale=paper_jpeg``: 140 epochs with the ÷10 steps
after 120 and 130, on the JPEG q75 re-encoding of all 60,000 images, seed 0, the cases its claims rest on): each
run's final test error beside the paper's number, or where a run still RUNNING is (never a number read as final), the
seeds' spread the ``full`` study measured for the same configuration (one seed is all that fits here), and the
recipe's single-learner reference at the same budget (``experiment=reference/cifar10_full``), read from the store.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from analysis.evidence import Errors, run_errors, run_value, stood_in
from analysis.page import PAPER_SCALES, PLANNED_SEEDS, Context
from analysis.pages.cifar_jpeg import REFERENCE, _latest, curve
from analysis.render import data_note, error_axis, figure, legend, md_table
from analysis.runs import SCALE_ORDER, Run, scales_of, select
from analysis.verdicts import MIN_SEEDS


def running(ctx: Context, **tags: str) -> list[Run]:
    """The runs of ``tags`` still RUNNING (their numbers are never read as final)."""
    return select(ctx.unfinished, **tags)


def scales_with(finished: Sequence[Run], unfinished: Sequence[Run]) -> list[str]:
    """The scales of a page's finished runs, and the paper-budget scales (:data:`PAPER_SCALES`) where runs are still
    RUNNING: a 140-epoch sweep is shown while it runs, pending."""
    scales = set(scales_of(finished)) | {s for s in scales_of(unfinished) if s in PAPER_SCALES}
    return sorted(scales, key=lambda s: (SCALE_ORDER.get(s, 9), s))


def reference(ctx: Context) -> Errors | None:
    """The single learner's final test error at 140 epochs (``experiment=reference/cifar10_full``, finished runs only),
    None when the store has none."""
    return run_errors("one learner, 140 epochs", select(ctx.runs, experiment=REFERENCE))


def finished_in(run: Run) -> str:
    """ "finished" with the run's training and job time in hours, every resume counted (the summary's
    ``fit_time_s`` and ``wall_time_s`` carry the time before each resume; the hours a job lay stopped between
    resumes are not in them)."""
    fit, wall = (run.metrics.get(k) for k in ("fit_time_s", "wall_time_s"))  # summary/<key> first (runs.py)
    if fit is None or wall is None:
        return "finished"
    return f"finished: {fit / 3600:.1f} h of training, {wall / 3600:.1f} h job (every resume counted)"


def resume_command(runs: Sequence[Run]) -> str:
    """The sentence that says how to resume (or rerun) ``runs``: ``python -m sweeps <entry> scale=<scale>`` of each
    study they came from (their ``optuna_study`` tag is ``<entry>_<scale>``: sweeps/entries.yaml), "" if none did."""
    cmds = []
    for r in runs:
        study, scale = r.tags.get("optuna_study", ""), r.tags.get("scale", "")
        if scale and study.endswith(f"_{scale}"):
            cmd = f"`python -m sweeps {study.removesuffix(f'_{scale}')} scale={scale}`"
            cmds += [cmd] if cmd not in cmds else []
    if not cmds:
        return ""
    return (
        f"Resume them with {' and '.join(cmds)}: the same command resumes the same study, each unfinished run from "
        "its last checkpoint in its own MLflow run (finished ones are not run again).\n\n"
    )


def full_spread(runs: Sequence[Run]) -> str:
    """The seeds' spread of one configuration at ``full`` (the std of its final test errors, the seeds, the epochs),
    "—" with fewer than MIN_SEEDS there."""
    vals = [v for r in runs if (v := run_value(r)) is not None]
    if len(vals) < MIN_SEEDS:  # what stood_in lends: a spread of fewer seeds is shown nowhere
        return "—"
    return f"± {statistics.stdev(vals) * 100:.2f} pp (std of {len(vals)} seeds at {_full_at(runs)})"


def _full_at(runs: Sequence[Run]) -> str:
    return f"full, {'/'.join(sorted({r.params.get('epochs', '?') for r in runs}))} epochs"


def with_full_spread(g: Errors | None, full: Sequence[Run], scale: str) -> Errors | None:
    """A configuration's final errors at ``scale`` with, where that scale's sweep plans one seed
    (:data:`~analysis.page.PLANNED_SEEDS`: ``paper_jpeg``), the seeds' spread of the same configuration's ``full``
    runs standing in for its own (:func:`~analysis.evidence.stood_in`: ≥ 3 seeds there, on the same images), so that
    a claim is decided on one seed where its difference beats the noise a seed has: early training's spread, an
    assumption about the end's, named beside every number it enters. Any other scale has seeds of its own to plan:
    ``g`` as it is."""
    if PLANNED_SEEDS.get(scale) != 1 or g is None:
        return g
    return stood_in(g, run_errors(g.label, full), _full_at(full))


def section(
    ctx: Context,
    scale: str,
    cases: Mapping[str, tuple[str, str]],
    finished: Sequence[Run],
    unfinished: Sequence[Run],
    full: Sequence[Run],
) -> tuple[str, list[list[str]]]:
    """The "at the paper's budget" block of a page's ``scale`` (one of :data:`PAPER_SCALES`): per case of ``cases``
    (case -> (label, what the paper says)), the final test error of its finished run, or where its RUNNING run is
    ("not final"), or "not started"; the seeds' spread of the same case in ``full`` (the page's ``full`` runs); the
    single-learner reference from the store. What the claims below say of these runs is the verdict rule's. With the
    block, its table's rows (the scale, then :data:`HEADER`), which the index gathers."""
    rows, states, shown = [], [], []
    for case, (label, paper) in cases.items():
        done = select(finished, case=case)
        going = select(unfinished, case=case)
        if done:  # a finished run wins over a RUNNING one of the same case (a run left open by a crash)
            g = run_errors(label, done)
            ours = "—" if g is None else f"{g.mean * 100:.2f} (n={g.n}, {g.images or 0:,} test images)"
            r = done[0]
            state, run, note = "finished", f"{finished_in(r)}; MLflow run {r.run_id[:8]}", data_note(r)
            shown.append(r)
        elif going:
            r = going[0]
            where = _latest(ctx, r, r.params.get("epochs", "140"))
            ours, state, run, note = "—", "running", f"running: {where}; MLflow run {r.run_id[:8]}", data_note(r)
            shown.append(r)
        else:
            ours, state, run, note = "—", "not started", "not started", ""
        states.append(state)
        rows.append([scale, label, paper, ours, run, full_spread(select(full, case=case)), note])
    n_done, n_going = states.count("finished"), states.count("running")
    return (
        f"\n### At the paper's budget ({scale}): 140 epochs, ÷10 after 120 and 130, seed 0\n\n"
        f"{n_done} finished, {n_going} running. A running run's numbers are where it is, not final; its claims "
        'below are "pending". One seed per configuration is all that fits here: the seeds\' spread the `full` '
        "study measured for the same configuration (≥ 3 seeds, early training) stands in for its own, so a claim "
        "is decided where its difference beats the noise one seed has. It is not measured where `full` has no "
        "such spread, or where one of the two learned and the other did not (a spread at chance says nothing of "
        "a run that learned). The spread is an assumption about 140 epochs, not a measurement there; each claim "
        "names it.\n\n"
        + md_table(HEADER, [row[1:] for row in rows])
        + f"\n{resume_command(shown)}{reference_said(ctx)}\n"
    ), rows


#: the columns of a paper-budget block's table
HEADER = ["configuration", "the paper", "ours, test error %", "run", "seeds' spread", "data"]


def reference_said(ctx: Context) -> str:
    """The sentence on the recipe's single learner at 140 epochs (:func:`reference`): its final test error, its
    time and MLflow run, against the papers' 17.9 % and ~18 %."""
    ref = reference(ctx)
    if ref is None:
        return (
            "The recipe's single-learner reference (`experiment=reference/cifar10_full`) has no finished run in "
            "this store."
        )
    runs = select(ctx.runs, experiment=REFERENCE)
    which = (
        f"; {finished_in(runs[0])}; MLflow run {runs[0].run_id[:8]}"
        if len(runs) == 1
        else f"; MLflow runs {', '.join(r.run_id[:8] for r in runs)}"
    )
    return (
        f"The recipe's single learner at the same budget (`experiment=reference/cifar10_full`, one learner, batch "
        f"100, 140 epochs, on the JPEG q75 re-encoding): **{ref.mean * 100:.2f} %** (n={ref.n}{which}), against the "
        "papers' 17.9 % (Rudra §4.2) and ~18 % (Zhang §4.1): the floor these runs can reach on these images."
    )


def plot(
    ctx: Context,
    cases: Mapping[str, tuple[str, float]],
    finished: Sequence[Run],
    unfinished: Sequence[Run],
    path: Path,
    title: str,
) -> Path | None:
    """Test error vs epoch of each case's run at the paper's budget (case -> (label, the paper's final error %)),
    finished (solid) or still running (dashed, "not final"), each beside the paper's number, with the recipe's
    single learner after 140 epochs (:func:`reference`); None when no run has an evaluation yet."""
    lines = []
    for case, (label, paper) in cases.items():
        done, going = select(finished, case=case), select(unfinished, case=case)
        run = (done or going or [None])[0]
        pts = curve(ctx, run) if run is not None else []
        if pts:
            lines.append((label, paper, pts, not done))
    if not lines:
        return None
    ref = reference(ctx)
    with figure(path, 1, 1, figsize=(7, 3.5)) as ax:
        for i, (label, paper, pts, running) in enumerate(lines):
            color = f"C{i}"
            ax.plot(
                [e for e, _ in pts],
                [v * 100 for _, v in pts],
                color=color,
                ls="--" if running else "-",
                label=f"{label}" + (" (running, not final)" if running else ""),
            )
            ax.axhline(paper, color=color, ls=":", lw=1, label=f"paper {label}: {paper:g} %")
        if ref is not None:
            ax.axhline(ref.mean * 100, color="k", ls="--", lw=0.8, label=f"ours, one learner: {ref.mean * 100:.2f} %")
        ax.set_xlim(0, 140)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test error (%)")
        error_axis(ax)
        ax.set_title(title, fontsize=9)
        legend(ax, fontsize=7)
    return path
