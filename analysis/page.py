"""The page spec and its one status rule.

A page module lives in ``analysis/pages/`` and declares ``ORDER`` (its place in the index) and
``PAGES`` (one :class:`Page` per table/figure of its paper, with a builder or the reason it has none).
A builder returns a :class:`Shown` (per scale, which of the table's configurations have runs; its
claims and the runs it read) and its Markdown; :func:`status` alone decides what the index says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.runs import SCALE_ORDER, Run, scales_of
from analysis.verdicts import (
    EARLY,
    FAILS,
    HOLDS,
    NOT_MEASURED,
    PAPER_BUDGET,
    RESTS_ON,
    Claim,
    budgets_label,
    paper_budget_label,
    rests_on,
)
from psbench.conf import CONF_DIR

NO_RUNS = (
    "\nNo runs of a scale in the store (a run without a scale tag, e.g. an ad-hoc run of the preset, is not counted).\n"
)


def preset_cases(experiment: str) -> list[str]:
    """The case labels of ``psbench/conf/experiment/<experiment>.yaml``'s sweep: the configurations of its table."""
    import yaml

    conf = CONF_DIR / "experiment" / f"{experiment}.yaml"
    return list(((yaml.safe_load(conf.read_text()).get("hydra") or {}).get("sweeper") or {}).get("cases") or [])


def coverage(
    runs: Iterable[Run],
    configs: Iterable[str],
    key: Callable[[Run], str | None] | None = None,
    measured: Callable[[Run], bool] | None = None,
) -> dict[str, tuple[int, int]]:
    """``{scale: (configurations with a measured run, configurations)}`` over the scale-tagged ``runs``.

    A run counts for the configuration ``key(run)`` (default its ``case`` tag) when ``measured(run)``
    (default: always); runs of other labels count for nothing.
    """
    want = set(configs)
    key = key or (lambda r: r.tags.get("case"))
    runs = list(runs)
    out = {}
    for scale in scales_of(runs):
        got = {key(r) for r in runs if r.tags.get("scale") == scale and (measured is None or measured(r))}
        out[scale] = (len(got & want), len(want))
    return out


#: seeds per configuration of a ``full`` sweep (sweeps/_runner.py's SEEDS: 0, 1, 2)
FULL_SEEDS = 3
#: seeds per configuration of a ``paper_jpeg`` sweep (the paper's budget on the JPEG re-encoding: seed 0 only)
PAPER_JPEG_SEEDS = 1
#: seeds per configuration each scale's sweep plans (any other scale: what finished is what was planned)
PLANNED_SEEDS = {"full": FULL_SEEDS, "paper_jpeg": PAPER_JPEG_SEEDS}
#: the scales that train the paper's own budget (epochs and lr steps): their learning claims are at the paper's budget
PAPER_SCALES = ("paper_jpeg", "paper")


def planned(scale: str, configurations: int, runs: Sequence[Run]) -> tuple[int, int]:
    """(finished, planned) runs of a page's sweep at ``scale`` from its finished ``runs`` of that scale: at ``full``
    (measured while the report is read) ``configurations`` × :data:`FULL_SEEDS`, at ``paper_jpeg`` (runs of many
    hours, watched while they run) ``configurations`` × :data:`PAPER_JPEG_SEEDS` (``configurations``: the cases that
    scale runs); at another scale the finished runs are what was planned. :func:`analysis.verdicts.pending` holds
    the scale's claims until they are equal."""
    n = len(runs)
    seeds = PLANNED_SEEDS.get(scale)
    return n, configurations * seeds if seeds else n


@dataclass(frozen=True)
class Budget:
    """The paper's training budget behind a page's learning claims: ``epochs`` of the paper's data, said in
    ``unit`` (``"iterations"`` with ``per_epoch`` iterations an epoch: TernGrad Fig 3's 10K iterations). A learning
    claim decided at a scale whose runs trained k < N is "early training (k of N epochs)", counted apart from
    the claims at the paper's budget (:func:`analysis.verdicts.rests_on`)."""

    epochs: float
    unit: str = "epochs"
    per_epoch: float = 1.0

    def of(self, trained_epochs: float) -> tuple[float, float, str]:
        """(k, N, unit) of runs that trained ``trained_epochs``."""
        return (trained_epochs * self.per_epoch, self.epochs * self.per_epoch, self.unit)


#: the CIFAR-10 budget of Rudra §4.2 and Zhang §4.3.1: 140 epochs (÷10 after 120 and 130)
CIFAR_140 = Budget(140)


# --------------------------------------------------------------------------- page spec
@dataclass(frozen=True)
class Context:
    """What a page builder reads: the FINISHED runs of the store, the report dir, the tracking URI (for artifacts),
    and the runs still RUNNING (a page says a run it waits for is not finished; it reads no number of theirs as
    final)."""

    runs: list[Run]
    out: Path
    tracking_uri: str
    unfinished: list[Run] = field(default_factory=list)


@dataclass(frozen=True)
class Shown:
    """What a page shows, the only input of its index :func:`status`.

    ``configs``: per scale, (configurations of the table with measured runs, configurations of the table);
    ``claims``: (claim, verdict, deciding numbers), rendered by the report below the page's Markdown;
    ``runs``: the runs the page read (their provenance is printed); ``command``: the sweep that makes the
    runs; ``note``: what the status adds (simulation only, data not available); a page with neither configs
    nor command (analytic, or needing data not here) has ``note`` as its status, with its claims' count;
    ``budget``: the rows of its "at the paper's budget" blocks (:func:`analysis.pages.paper_budget.section`), which
    the index and the documentation site's verdicts page gather.
    """

    configs: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    claims: Sequence[Claim] = ()
    runs: Sequence[Run] = ()
    command: str = ""
    note: str = ""
    budget: Sequence[Sequence[str]] = ()


def verdicts_said(claims: Sequence[Claim]) -> str:
    """How many of ``claims`` hold and how many are not decided, per what they rest on (:data:`RESTS_ON`), each
    with its budget: "early training (2 of 140 epochs): 1 of 3 claims hold, 2 not decided; simulation: 1 of 1
    claims hold". A verdict from runs short of the paper's budget is never said without that budget; claims no run
    decides (data not here, nothing recorded) are "k not measured (no runs)"."""
    parts = []
    for kind in RESTS_ON:
        mine = [c for c in claims if rests_on(c) == kind]
        if kind == PAPER_BUDGET:
            unrun = [c for c in mine if c.budget is None and c.verdict == NOT_MEASURED]
            mine = [c for c in mine if c not in unrun]
        if mine:
            label = (
                budgets_label(c.budget for c in mine if c.budget)
                if kind == EARLY
                else paper_budget_label(c.budget for c in mine if c.budget)
                if kind == PAPER_BUDGET
                else kind
            )
            undecided = sum(c.verdict not in (HOLDS, FAILS) for c in mine)
            holds = sum(c.verdict == HOLDS for c in mine)
            parts.append(
                f"{label}: {holds} of {len(mine)} claims hold" + (f", {undecided} not decided" if undecided else "")
            )
        if kind == PAPER_BUDGET and unrun:
            parts.append(f"{len(unrun)} not measured (no runs)")
    return "; ".join(parts)


def status(shown: Shown) -> str:
    """The index's line for a page: "reproduced at scale X" only when every configuration of scale X has
    measured runs and every claim was decided; "no runs", "partial (k of N …)" or "measured at scale X" otherwise;
    then the claims that hold and those not decided, per what they rest on (:func:`verdicts_said`)."""
    claims = [c for c in shown.claims if not c.ours]  # ours are shown, never counted
    undecided = sum(c.verdict not in (HOLDS, FAILS) for c in claims)
    verdicts = verdicts_said(claims) if claims else "no claims decided"
    note = f"; {shown.note}" if shown.note else ""
    if not shown.configs and not shown.command:
        return shown.note + (f": {verdicts}" if claims else "")
    seen = sorted(
        ((s, kn) for s, kn in shown.configs.items() if kn[0] > 0), key=lambda x: (SCALE_ORDER.get(x[0], 9), x[0])
    )
    if not seen:
        return f"no runs ({shown.command})" + note
    full = ", ".join(s for s, (k, n) in seen if k >= n)
    part = "; ".join(f"{k} of {n} configurations at scale {s}" for s, (k, n) in seen if k < n)
    if not full:
        return f"partial ({part})" + note
    text = (
        f"reproduced at scale {full}: {verdicts}"
        if claims and not undecided
        else f"measured at scale {full}; {verdicts}"
    )
    return text + (f"; partial ({part})" if part else "") + note


@dataclass(frozen=True)
class Page:
    """One table/figure of a paper: ``build(ctx) -> (Shown, markdown)`` writes ``<key>.md/.html`` (the report
    adds a link to the index, the claims and the provenance); a page without a builder shows ``reason`` as
    its status in the index (never invented numbers)."""

    paper: str
    item: str
    key: str = ""
    build: Callable[[Context], tuple[Shown, str]] | None = None
    reason: str = ""
    #: the paper's training budget behind the page's learning claims (None: the page decides none on runs)
    budget: Budget | None = None
