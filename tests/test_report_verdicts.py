"""The verdict rule of analysis/verdicts.py and analysis/learning.py, on every page at once.

Three stores of hand-made runs (three seeds each, tagged and logged as psbench logs them) fill every page
that decides a claim about learning: one where no run learned (errors at chance), one where every run learned
but every difference a claim asserts is inside the noise (the seeds' spread plus the test set's), one whose
premise is vacuous (AGN Fig 7b needs Fig 7a's divergence). No page may decide a learning claim on them.
"""

from __future__ import annotations

import math
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.evidence import errors, stood_in  # noqa: E402
from analysis.learning import lower, majority  # noqa: E402
from analysis.pages import rudra_paper as RP  # noqa: E402
from analysis.pages import zhang_paper as ZP  # noqa: E402
from analysis.report import all_pages, build  # noqa: E402
from analysis.verdicts import FAILS, HOLDS, NOT_MEASURED, NOT_RESOLVABLE, Claim, tail  # noqa: E402

from report_store import ReportStore  # noqa: E402

SEEDS = (0, 1, 2)
#: pages whose claims the stores below cover: every page with learning claims and runs to make
LEARNING_PAGES = (
    "rudra_table2",
    "rudra_table3",
    "rudra_fig5",
    "rudra_fig6_7",
    "zhang_fig3",
    "terngrad_fig3",
    "terngrad_table1",
    "agn_table1",
    "agn_fig7",
    "agn_figs8_12",
    "ssp_fig2_3",
    "ssp_fig4_5",
)

Err = Callable[[str, int], float]  # (case, seed) -> test error


def _fill(root: Path, err: Err, acc: Callable[[str, int], list[float]], loss: Callable[[int], float]) -> None:
    """Every learning page's configurations, three seeds each: test errors ``err``, AGN training-accuracy
    curves ``acc`` (by optimizer and panel), SSP objective ``loss`` per seed."""
    s = ReportStore(root)
    sub = {"dataset": "cifar10_subset", "scale": "ci"}

    def run(tags: dict, case: str, **metrics: float) -> None:
        for seed in SEEDS:
            s.run({**tags, "case": case}, {"test_error": err(case, seed), **metrics}, seed=seed, params={"epochs": 1})

    for g, rows in RP.TABLE2.items():  # μλ ≈ 128's rows (the spread claim) and two of every other μλ
        for sig, mu, lam, _, t in rows if g == 128 else rows[:2]:
            run({"paper": "rudra", "table": "2", **sub}, RP.case_label(sig, mu, lam), sim_time_s=t)
    for sig, mu, lam, _, _, t in RP.TABLE3:
        if sig == 0:
            run({"paper": "rudra", "table": "3", **sub}, RP.case_label(sig, mu, lam), sim_time_s=t)
    for case in RP.FIG5:
        run({"paper": "rudra", "figure": "5", **sub}, case, ps_updates=10, epochs_done=1)
    f67 = [(0, 128, 1), (0, 4, 30), (0, 128, 30)] + [(lam, 4, lam) for lam in RP.LAMBDAS[1:]]
    for sig, mu, lam in f67:
        run(
            {"paper": "rudra", "figure": "6-7", **sub},
            RP.case_label(sig, mu, lam),
            sim_time_s=10.0 / lam,
            epochs_done=1,
        )
    for case in ZP.FIG3:
        run({"paper": "zhang", "figure": "3", **sub}, case, ps_updates=10, epochs_done=1)
    for grad in ("fp32", "terngrad", "noclip"):
        for n in (2, 64):
            run({"paper": "terngrad", "figure": "3", "scale": "ci", "dataset": "mnist"}, f"momentum_{grad}_n{n}")
        for n in (2, 16):
            run({"paper": "terngrad", "table": "1", **sub}, f"{grad}_n{n}")

    def curve(tags: dict, case: str, shape: str) -> None:
        for seed in SEEDS:
            a = acc(shape, seed)
            s.run(
                {**tags, "case": case, "scale": "ci", "dataset": "mnist"},
                {"test_error": 0.5},
                seed=seed,
                summary_step=len(a),
                histories={"train_accuracy": list(enumerate(a)), "sim_time_s": [(i, float(i)) for i in range(len(a))]},
            )

    for n in (10, 20):
        for h in (10,):
            for proto in ("agn", "aeasgd"):
                curve({"paper": "agn", "table": "1"}, f"{proto}_n{n}_H{h}", proto)
    for panel in ("7a", "7b"):
        for proto in ("agn", "aeasgd", "dynsgd"):
            curve({"paper": "agn", "figure": panel}, proto, f"{proto}_{panel}")
    for m in (1, 3, 6):
        for seed in SEEDS:
            steps = range(10, 210, 10)
            s.run(
                {"paper": "ssp", "figure": "2,4", "case": f"m{m}", "scale": "ci", "dataset_stand_in": "timit"},
                {"train_loss": loss(seed), "ps_updates": 200},
                seed=seed,
                histories={
                    "train_loss": [(i, loss(seed)) for i in steps],
                    "sim_time_s": [(i, i / (10.0 * m)) for i in steps],
                },
            )


def _claims(out: Path) -> dict[str, list[list[str]]]:
    """page key -> its claims' rows (claim, verdict, numbers) from claims.csv."""
    import csv

    keys = {(p.paper, p.item): p.key for p in all_pages() if p.build is not None}
    rows: dict[str, list[list[str]]] = {}
    with open(out / "claims.csv") as fh:
        for r in csv.DictReader(fh):
            rows.setdefault(keys[(r["paper"], r["table / figure"])], []).append(r)
    return rows


class Report(dict):
    """page key -> its claims (rows of claims.csv); ``out``: the report dir."""

    out: Path


def _report(root: Path, err: Err, acc, loss) -> Report:
    _fill(root, err, acc, loss)
    build(root, root / "reports")
    rep = Report(_claims(root / "reports"))
    rep.out = root / "reports"
    return rep


@pytest.fixture(scope="module")
def store(tmp_path_factory, mlflow_template_db):
    def make(name: str) -> Path:
        root = tmp_path_factory.mktemp(name)
        shutil.copy(mlflow_template_db, root / "mlflow.db")
        return root

    return make


@pytest.fixture(scope="module")
def at_chance(store):
    """No run learned: 10-class errors of 89.8–90.2 %, training accuracy 10 %, SSP objective ln(2001)."""
    return _report(
        store("at_chance"),
        lambda case, seed: 0.90 + 0.002 * (seed - 1),
        lambda case, seed: [0.10] * 8,
        lambda seed: math.log(2001),
    )


@pytest.fixture(scope="module")
def within_noise(store):
    """Every run learned, every configuration alike: errors 84 ± 0.2 % (1,017 or 10,000 test images), AGN curves
    equal but DynSGD's drop 0, 10 or 20 pp by seed, the SSP objective the same for every number of machines."""

    def acc(shape: str, seed: int) -> list[float]:
        if shape.startswith("dynsgd"):
            return [
                0.5,
                0.6,
                0.7,
                0.8,
                0.8,
                0.8 - 0.1 * seed,
                0.8 - 0.1 * seed,
                0.8 - 0.1 * seed,
                0.8 - 0.1 * seed,
                0.8 - 0.1 * seed,
            ]
        return [0.5, 0.6, 0.7, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8]

    return _report(
        store("within_noise"), lambda case, seed: 0.84 + 0.002 * (seed - 1), acc, lambda seed: 3.0 + 0.1 * (seed - 1)
    )


@pytest.mark.parametrize("key", LEARNING_PAGES)
def test_no_page_decides_a_learning_claim_on_runs_at_chance(at_chance, key):
    learning = [c for c in at_chance[key] if c["kind"] == "learning"]
    assert learning, key
    for c in learning:
        assert c["verdict"] == NOT_MEASURED, (key, c)
        assert re.search(
            r"did not learn|no reference run learned|premise|no runs|needs the paper.s budget", c["deciding numbers"]
        ), (key, c)


@pytest.mark.parametrize("key", LEARNING_PAGES)
def test_no_page_decides_a_learning_claim_inside_the_noise(within_noise, key):
    learning = [c for c in within_noise[key] if c["kind"] == "learning"]
    assert learning, key
    for c in learning:
        assert c["verdict"] in (NOT_RESOLVABLE, NOT_MEASURED), (key, c)
    # what makes them undecided here is the noise, not a missing run (SSP Figs 4–5's learning claims are its
    # missing ImageNet-63K runs: its speed-ups are timing claims, their premise is that 1 machine learned)
    assert key == "ssp_fig4_5" or any(c["verdict"] == NOT_RESOLVABLE for c in learning), key


def test_a_vacuous_premise_leaves_the_conditional_claim_not_measured(within_noise):
    """AGN Fig 7b "DynSGD diverges less with H = 3" needs divergence at H = 10; here 7a's is inside the noise."""
    f7 = {c["claim"]: c for c in within_noise["agn_fig7"]}
    a = next(c for k, c in f7.items() if k.startswith("Fig 7a: DynSGD shows divergent behaviour"))
    b = next(c for k, c in f7.items() if k.startswith("Fig 7b: with H = 3 DynSGD diverges less"))
    assert a["verdict"] == NOT_RESOLVABLE
    assert b["verdict"] == NOT_MEASURED and "its premise" in b["deciding numbers"]
    assert f'" is {NOT_RESOLVABLE}' in b["deciding numbers"]


def test_a_failed_premise_reads_does_not_hold():
    from analysis.verdicts import simulated

    premise = Claim("P", FAILS, "", False, "simulation")
    assert simulated("Q", True, "n", premise=premise).numbers.endswith('its premise "P" does not hold')


def test_the_index_counts_claims_per_paper_and_ours_apart(within_noise):
    index = (within_noise.out / "index.md").read_text()
    assert (
        "| paper | rests on | claims | holds | does not hold | not resolvable | undetermined within the model's "
        "error | pending | not measured | ours (not counted) |"
    ) in index
    # the decided TernGrad claims are Fig 5's (the performance model), counted as simulation, apart from the learning
    # claims of Fig 3 and Table 1 (early training); noclip is ours, twice (Fig 3, Table 1)
    assert re.search(r"\| TernGrad \| simulation \| \d+ \| 2 \| 2 \| \d+ \| 0 \| 0 \| \d+ \| 0 \|", index), index
    assert re.search(r"\| TernGrad \| early training \([^|]*\) \| \d+ \| 0 \| 0 \| \d+ \| 0 \| 0 \| \d+ \| 2 \|", index)
    assert (
        "| *ours, not counted:* [ci] TernGrad-noclip has a higher test error"
        in (within_noise.out / "claims.md").read_text()
    )


def test_the_rule_itself():
    a, b = errors("a", [0.30, 0.31, 0.29], "cifar10_subset"), errors("b", [0.40, 0.41, 0.39], "cifar10_subset")
    assert lower("", a, b).verdict == HOLDS and lower("", b, a).verdict == FAILS
    one = errors("a", [0.30], "cifar10_subset")
    assert lower("", one, b).verdict == NOT_MEASURED and "has 1 seed" in lower("", one, b).numbers
    near_b = errors("c", [0.305, 0.315, 0.295], "cifar10_subset")  # 0.5 pp apart on 1,017 images
    assert lower("", a, near_b).verdict == NOT_RESOLVABLE
    assert tail("", 0, 1_000, 1e-4).verdict == NOT_RESOLVABLE  # 0 of 1,000 cannot show P < 1e-4
    assert tail("", 0, 40_000, 1e-4).verdict == HOLDS
    assert tail("", 10, 100, 1e-4).verdict == FAILS
    assert majority("", {"x": [1.2, 1.3, 1.25]}, 1.0).verdict == HOLDS
    assert majority("", {"x": [1.2]}, 1.0).verdict == NOT_MEASURED


def test_one_seed_is_weighed_with_the_spread_its_configuration_has_elsewhere():
    """At the paper's budget one seed fits: the same configuration's spread at ``full`` (≥ 3 seeds) stands in for its
    own (:func:`stood_in`), so one seed decides a difference that beats a seed's noise and leaves one inside it
    open; never a spread of too few seeds, of runs at chance for a run that learned, nor over seeds of its own."""
    ds = "cifar10_jpeg"
    one, other = errors("a", [0.20], ds), errors("b", [0.90], ds)
    full = errors("a at full", [0.55, 0.57, 0.59], ds)  # std 2 pp
    a = stood_in(one, full, "full, 2 epochs")
    assert a is not None and a.spread == pytest.approx(0.02) and a.var == pytest.approx(0.02**2 + 0.2 * 0.8 / 10_000)
    assert str(a) == "a 20.00% (n=1) with the seeds' spread ± 2.00 pp of full, 2 epochs, 3 seeds"
    b = stood_in(other, errors("b at full", [0.90, 0.90, 0.90], ds), "full, 2 epochs")  # at chance there too
    assert lower("", a, b).verdict == HOLDS and "has 1 seed" not in lower("", a, b).numbers
    close = stood_in(errors("c", [0.21], ds), full, "full, 2 epochs")  # 1 pp apart, 2 SE ≈ 5.9 pp
    assert lower("", a, close).verdict == NOT_RESOLVABLE
    assert lower("", one, other).verdict == NOT_MEASURED  # nothing stood in: the rule's 3 seeds
    assert stood_in(one, errors("a at full", [0.55, 0.57], ds), "full") is one  # 2 seeds there: too few
    assert stood_in(one, errors("a at full", [0.90, 0.89, 0.90], ds), "full") is one  # learned here, not there
    three = errors("a", [0.20, 0.26, 0.22], ds)
    assert stood_in(three, full, "full") is three  # seeds enough of its own
    two = errors("a", [0.20, 0.26], ds)  # a spread of its own (4.2 pp), poor but its own: not replaced by 2 pp
    assert stood_in(two, full, "full") is two
    chance = errors("a", [0.90], ds)  # at chance here, learned there: that spread says nothing of this run
    assert stood_in(chance, full, "full") is chance
    assert stood_in(one, errors("a at full", [0.55, 0.57, 0.59], "cifar10_subset"), "full") is one  # other images


def test_a_prediction_band_against_a_claimed_range():
    """A cost-model prediction is a band (the choices left open, widened by the model's measured error): inside the
    claimed range it holds, wholly outside it fails, straddling an end it is undetermined within the model's error;
    one band outside fails the claim, a missing one leaves it not measured; the index counts it as not decided."""
    from analysis.page import Shown, status
    from analysis.verdicts import UNDETERMINED, band, in_range

    assert band(23.0, 25.0) == (23.0, 25.0)
    assert band(23.0, 25.0, (-0.1, 0.2)) == pytest.approx((20.7, 30.0))  # widened by the error, never shifted
    assert band(23.0, 25.0, (0.05, 0.2)) == pytest.approx((23.0, 30.0))
    c = in_range("22–28x", {"a": (23.0, 25.0)}, (22, 28), unit="x")
    assert (c.verdict, c.kind) == (HOLDS, "simulation") and "a [23, 25]x inside" in c.numbers
    c = in_range("22–28x", {"a": (23.0, 25.0), "b": band(24.0, 27.0, (0.0, 0.19))}, (22, 28), unit="x")
    assert c.verdict == UNDETERMINED and "b [24, 32.1]x straddles 28x" in c.numbers
    assert in_range("", {"a": (18.0, 31.0)}, (22, 28)).verdict == UNDETERMINED
    assert in_range("", {"a": (29.0, 31.0), "b": (18.0, 31.0)}, (22, 28)).verdict == FAILS
    assert in_range("", {"a": (1.15, 1.33)}, (1.4, 1.6)).verdict == FAILS
    assert in_range("", {"a": (23.0, 25.0)}, (22, math.inf)).verdict == HOLDS
    assert in_range("", {"a": (23.0, 25.0), "b": None}, (22, 28)).verdict == NOT_MEASURED
    c = in_range("", {"a": (1.2, 1.3)}, (1.4, 1.6), "then this", first="first this")
    assert c.numbers.startswith("first this. band vs the claimed 1.4 … 1.6: a [1.2, 1.3] outside. then this")
    decided = Claim("x", HOLDS, "", kind="simulation")
    assert (
        status(Shown({"ci": (3, 3)}, [decided, c._replace(verdict=UNDETERMINED)], command="c"))
        == "measured at scale ci; simulation: 1 of 2 claims hold, 1 not decided"
    )


def test_no_page_writes_a_verdict_itself():
    """Pages get verdicts only from the rule (analysis.verdicts, analysis.learning): no page names a verdict or builds
    a Claim."""
    for f in sorted((REPO / "analysis" / "pages").glob("*.py")):
        src = f.read_text()
        for word in (
            "HOLDS",
            "FAILS",
            "NOT_RESOLVABLE",
            "NOT_MEASURED",
            "UNDETERMINED",
            "Claim(",
            '"holds"',
            '"does not hold"',
            '"undetermined',
        ):
            assert word not in src, (f.name, word)
    assert isinstance(lower("", None, None), Claim)


def test_increasing_with_two_members_at_chance_is_not_measured_not_a_crash():
    """Zhang Fig 3 at ci, 3 seeds: n = 1 learned, n = 15 and n = 30 both at chance (90.95 %). The (15, 30) step
    cannot be decided (its lower member did not learn); the claim said "holds" or raised IndexError before."""
    from analysis.learning import increasing

    series = [
        errors("n=1", [0.68, 0.656, 0.698], "cifar10_subset"),
        errors("n=15", [0.9095] * 3, "cifar10_subset"),
        errors("n=30", [0.9095] * 3, "cifar10_subset"),
    ]
    c = increasing("final test error increasing in n", series)
    assert c.verdict == NOT_MEASURED
    assert "n=15 90.95% (n=3)" in c.numbers and "did not learn" in c.numbers
    series[1:] = [
        errors("n=15", [0.75, 0.76, 0.74], "cifar10_subset"),  # every step decidable: holds
        errors("n=30", [0.82, 0.83, 0.81], "cifar10_subset"),
    ]
    assert increasing("final test error increasing in n", series).verdict == HOLDS
