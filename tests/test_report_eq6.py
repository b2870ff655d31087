"""Rudra Eq 6 both ways on the Table 2 page (issue 39, item 2): each row's error and LR per sample under α0 over the
measured ⟨σ⟩ (Table 2's study) and under α0/n (``experiment=reference/rudra_table2_nominal``), what the paper's text
supports, the μλ ≈ 128 spread's reason re-decided from the two readings by the verdict rule, the 1-softsync anomaly,
and the α0/n rows at the paper's budget (``paper_jpeg``) — from hand-made runs tagged as psbench tags them.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.page import Context  # noqa: E402
from analysis.pages import rudra, rudra_eq6, rudra_figs  # noqa: E402
from analysis.pages import rudra_paper as RP  # noqa: E402
from analysis.report import render  # noqa: E402
from analysis.runs import Run, load_runs  # noqa: E402
from analysis.verdicts import NOT_RESOLVABLE  # noqa: E402

from psbench.ps.schedule import Contribution, Schedule, Update  # noqa: E402
from report_store import ReportStore  # noqa: E402
from test_report_full import SEEDS, T2_NOTE, T2_ROWS, _table2_full  # noqa: E402

PAPER_140 = "at the paper's budget (140 epochs)"


def _params(sig: int, mu: int, lam: int) -> dict[str, str]:
    return {"learners": str(lam), "batch_size": str(mu), "protocol.n": str(sig), "lr_policy.min_staleness": "1.0"}


def _measured_sigma(sig: int, lam: int) -> float:
    """The mean staleness psbench measures: λ − 1 for λ-softsync, about 1 for 1-softsync."""
    return float(lam - 1) if sig == lam else 1.0


def _store(root: Path, nominal: dict[str, float], *, schedule: bool = True) -> ReportStore:
    """Table 2 at full (:func:`test_report_full._table2_full`, no twins) with each row's params and mean staleness,
    (2,64,2)'s seed-0 run with a schedule whose updates' σ are 2, 1, 1, 1; the α0/n study ending at ``nominal``
    (the μλ ≈ 128 rows; the others as Table 2's), and Table 3's hardsync (0,4,30) at 52 %; the rows without
    staleness 0.5 pp below their rows."""
    s = ReportStore(root)
    _table2_full(s, {k: v - 0.005 for k, v in T2_ROWS.items()})  # and the rows without staleness, 0.5 pp below
    tags = {"scale": "full", "dataset": "cifar10_jpeg", "data_note": T2_NOTE}
    # the measured reading's runs carry their params and mean staleness
    for r in load_runs(s.uri):
        if r.tags.get("experiment") == rudra.NO_STALENESS:
            continue
        sig, mu, lam = RP.parse_case(r.tags["case"])
        for k, v in _params(sig, mu, lam).items():
            if k not in r.params:
                s.c.log_param(r.run_id, k, v)
        s.c.log_metric(r.run_id, "staleness_mean", _measured_sigma(sig, lam))
        if schedule and r.tags["case"] == "s2_mu64_lam2" and r.params["seed"] == "0":
            ups = [Update(i, float(i), [Contribution(0, i - sg, i, 0, 0.0, 0.0)]) for i, sg in enumerate((2, 1, 1, 1))]
            f = root / "sched" / "schedule.npz"
            f.parent.mkdir(exist_ok=True)
            Schedule.collect(ups).save(f)
            s.c.log_artifact(r.run_id, str(f))
    for g, rows in RP.TABLE2.items():
        for sig, mu, lam, *_ in rows:
            case = RP.case_label(sig, mu, lam)
            e = nominal.get(case, 0.55 + 0.05 * math.log2(g / 128))
            for seed in SEEDS:
                s.run(
                    {**tags, "experiment": rudra_eq6.NOMINAL, "case": case},
                    {"test_error": e + 0.002 * (seed - 1), "staleness_mean": _measured_sigma(sig, lam)},
                    seed=seed,
                    params={"epochs": 2, **_params(sig, mu, lam)},
                )
    for seed in SEEDS:
        s.run(
            {**tags, "paper": "rudra", "table": "3", "case": RP.case_label(0, 4, 30)},
            {"test_error": 0.520 + 0.002 * (seed - 1)},
            seed=seed,
            params={"epochs": 2, "learners": "30", "batch_size": "4", "protocol.n": "0"},
        )
    return s


def _page(root: Path, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    return render(rudra.rudra_table2, Context(load_runs(uri), out, uri, load_runs(uri, status="RUNNING")))[1]


def _row(md: str, start: str) -> list[str]:
    line = next(x for x in md.splitlines() if x.startswith(start))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_both_readings_side_by_side_and_the_spread_is_the_reading_of_eq6(psbench_root, tmp_path):
    """Under α0 over the measured ⟨σ⟩ the μλ ≈ 128 rows spread 5.2 pp; under α0/n they end within 0.5 pp: the rule
    finds the spread claim failing on the first and not on the second, so the reason is psbench's reading of Eq 6."""
    alike = {c: 0.540 + 0.001 * i for i, c in enumerate(T2_ROWS)}  # 0.5 pp apart under α0/n
    _store(psbench_root, alike)
    md = _page(psbench_root, tmp_path / "r")
    eq6 = md[md.index("### Eq 6 both ways (scale = full)") :]
    # which reading the text supports, and why, cited
    assert "**Which reading the paper's text supports: α = α0/n.**" in eq6
    assert '"σ ∈ {0, 1, …, 2n} and ⟨σ⟩ = n for our implementation of the n-softsync protocol"' in eq6
    assert "α = α0/⟨σ⟩ = α0/n" in eq6 and '"⟨σ⟩ = λ"' in eq6 and "§5.3" in eq6
    # each row: ⟨σ⟩ against n and λ − 1, each reading's LR per sample and error, the difference with its 2 SE
    # (2,64,2): the schedule's σ 2, 1, 1, 1 give 1/σ = 0.5, 1, 1, 1 → 0.875 × 128/64 = 1.75 on seed 0, ≈ 2.00 on seeds
    # 1, 2 (mean staleness 1): mean 1.92, approximate; α0/n: 1/2 × 128/64 = 1.00
    assert _row(eq6, "| ≈ 128 | (2,64,2) |") == [
        "≈ 128",
        "(2,64,2)",
        "17.96",
        "1.00",
        "2",
        "1",
        "≈ 1.92",
        "54.50 (n=3)",
        "1.00",
        "54.50 (n=3)",
        "+0.00 ± 1.45",
    ]
    assert _row(eq6, "| ≈ 128 | (18,8,18) |")[3:10] == [
        "17.00",
        "18",
        "17",
        "≈ 0.94",
        "59.20 (n=3)",
        "0.89",
        "54.20 (n=3)",
    ]
    assert _row(eq6, "| ≈ 128 | (1,4,30) |")[6] == "≈ 1.07" and _row(eq6, "| ≈ 128 | (1,4,30) |")[8] == "1.07"
    assert "Rank correlation (Spearman) of the μλ ≈ 128 rows' error with their LR per sample: α0/⟨σ⟩ " in eq6
    # the Table 2 claim's reason, re-decided through the rule
    claim = next(line for line in md.splitlines() if "for μλ ≈ 128 the test error hardly depends on σ" in line)
    assert "| does not hold | early training (2 of 140 epochs) |" in claim
    assert "why: psbench's reading of Eq 6, not σ: dividing α0 by each update's measured ⟨σ⟩" in claim
    assert "under α = α0/n, the LR the paper's text gives them, they spread 0.50 pp (2 SE " in claim
    assert "not resolvable by the same rule" in claim
    # the α0/n reading's own claim: shown with its verdict, ours (not counted)
    ours = next(line for line in md.splitlines() if "under α0/n (Eq 6 as written): for μλ ≈ 128" in line)
    assert ours.startswith("| *ours, not counted:* under α0/n") and "| not resolvable |" in ours


def test_when_alpha0_over_n_spreads_too_the_reading_is_not_the_whole_reason(psbench_root, tmp_path):
    _store(psbench_root, dict(T2_ROWS), schedule=False)  # under α0/n the same 5.2 pp spread
    md = _page(psbench_root, tmp_path / "r")
    claim = next(line for line in md.splitlines() if "for μλ ≈ 128 the test error hardly depends on σ" in line)
    assert "why: not the reading of Eq 6 alone: under α = α0/n (Eq 6 as written) the rows still spread 5.20 pp" in claim
    assert "the rest is not yet found" in claim
    assert "≈ 2.00" in _row(md[md.index("### Eq 6 both ways") :], "| ≈ 128 | (2,64,2) |")[6]  # no schedule: ≈


def test_the_one_softsync_anomaly_is_measured_and_left_open(psbench_root, tmp_path):
    """(1,4,30) ends 7.7 pp above hardsync (0,4,30) under both readings, with the same LR per sample either way: the
    page says the reading does not explain it, and the rule's "within 1 pp" (ours) does not hold, its reason not yet
    found: open."""
    _store(psbench_root, dict(T2_ROWS), schedule=False)
    md = _page(psbench_root, tmp_path / "r")
    sec = md[md.index("### The 1-softsync anomaly") :]
    assert "Here it ends +7.70 pp from hardsync (0,4,30) (2 SE " in sec
    assert "Both readings of Eq 6 give it the same LR per sample (1.07 and 1.07 × α0/128" in sec
    assert "| (1,4,30), α0/⟨σ⟩ (Table 2's study) | 59.70 (n=3) | 1.07 |" in sec
    assert "| (0,4,30) hardsync (Table 3's study) | 52.00 (n=3) | — |" in sec
    claim = next(line for line in md.splitlines() if "1-softsync (1,4,30) ends within 1 pp of hardsync" in line)
    assert claim.startswith("| *ours, not counted:* 1-softsync (1,4,30)") and "| does not hold |" in claim
    assert "why it does not hold on all of CIFAR-10 is not yet found" in claim


#: the claim the two rows at ``paper_jpeg`` bear on
CLAIM = "[paper_jpeg] under α0/n, (1,4,30) and (30,4,30) (the μλ ≈ 128 pair an earlier `full` study put furthest apart)"


def test_the_alpha0_over_n_rows_at_the_papers_budget_run_pending_then_one_seed(psbench_root, tmp_path):
    s = _store(psbench_root, dict(T2_ROWS), schedule=False)
    tags = {"scale": "paper_jpeg", "dataset": "cifar10_jpeg", "experiment": rudra_eq6.NOMINAL}
    note = "cifar10_jpeg_q75; cifar10_jpeg_q75_140_epochs"
    s.run(
        {**tags, "case": "s1_mu4_lam30", "data_note": note},
        {"test_error": 0.185, "ps_updates": 100, "epochs_done": 140},
        params={"epochs": 140},
        histories={"test_error": [(100, 0.185)]},
    )
    s.run(
        {**tags, "case": "s30_mu4_lam30", "data_note": note},
        params={"epochs": 140},
        histories={"test_error": [(999, 0.70)], "epoch": [(999, 2.0)]},
        status="RUNNING",
    )
    md = _page(psbench_root, tmp_path / "r")
    block = md[md.index("## scale = paper_jpeg") :]
    done = "| (1,4,30) α0/n | 18.09 % | 18.50 (n=1, 10,000 test images) | finished; MLflow run "
    assert re.search(re.escape(done) + r"[0-9a-f]{8} \| ± 0\.20 pp \(std of 3 seeds", block), block
    assert "| (30,4,30) α0/n | 18.41 % | — | running: update 1,000 of " in block and "not final" in block
    # the pair was chosen from an earlier full study: this store's puts (1,4,30) and (2,64,2) furthest apart
    assert (
        "This store's `full` study under α0/n puts (1,4,30) 59.70 % (n=3) and (2,64,2) 54.50 % (n=3) furthest apart; "
        "the two trained here were chosen from an earlier `full` study (2e6595d: (1,4,30) 59.71 %, (30,4,30) "
        "55.68 %) and end here at (1,4,30) 59.70 % (n=3) and (30,4,30) 56.40 % (n=3)." in block
    ), block
    claim = next(line for line in md.splitlines() if CLAIM in line)
    assert f"| pending (1 of 2 runs) | {PAPER_140} |" in claim
    # the paper's numbers of these two rows (Table 2), not of its six rows' range
    assert "end within 1 pp (the paper: 18.09 % and 18.41 %; its six rows 17.96–18.92 %)" in claim
    # their curves beside the paper's numbers: the finished run's and the running one's (dashed, not final)
    assert "![test error vs epoch, the paper's 140-epoch errors beside](rudra_table2_paper_jpeg.png)" in md
    assert (tmp_path / "r" / "rudra_table2_paper_jpeg.png").stat().st_size > 0
    # once both have finished: one seed each, decided with the full study's spread of each row standing in for its
    # own (named beside each number), labelled at the paper's budget; 0.50 pp apart, but one seed's noise and the
    # test set's leave "within 1 pp" open
    s.run(
        {**tags, "case": "s30_mu4_lam30", "data_note": note},
        {"test_error": 0.19, "ps_updates": 100, "epochs_done": 140},
        params={"epochs": 140},
    )
    md = _page(psbench_root, tmp_path / "r2")
    claim = next(line for line in md.splitlines() if CLAIM in line)
    assert f"| {NOT_RESOLVABLE} | {PAPER_140} |" in claim, claim
    assert "(1,4,30) α0/n 18.50% (n=1) with the seeds' spread ± 0.20 pp of full, 2 epochs, 3 seeds" in claim, claim
    assert "spread 0.50 pp, 2 SE " in claim and "has 1 seed" not in claim, claim


def test_the_papers_budget_pair_is_checked_against_this_stores_full_study(psbench_root, tmp_path):
    """The page says whether this store's α0/n ``full`` study puts the two rows trained at ``paper_jpeg`` furthest
    apart of the six μλ ≈ 128 rows, or how many rows it has so far."""
    s = _store(psbench_root, {**T2_ROWS, "s30_mu4_lam30": 0.54}, schedule=False)
    s.run(
        {"scale": "paper_jpeg", "dataset": "cifar10_jpeg", "experiment": rudra_eq6.NOMINAL, "case": "s1_mu4_lam30"},
        params={"epochs": 140},
        histories={"test_error": [(999, 0.70)], "epoch": [(999, 2.0)]},
        status="RUNNING",
    )
    block = _page(psbench_root, tmp_path / "r")
    block = block[block.index("## scale = paper_jpeg") :]
    agrees = "This store's `full` study under α0/n agrees: (1,4,30) 59.70 % (n=3) and (30,4,30) 54.00 % (n=3) are "
    assert agrees + "its furthest apart." in block, block
    from analysis.pages.rudra import _furthest_apart

    even = _store(tmp_path / "even", {c: 0.55 for c in T2_ROWS}, schedule=False)  # all six alike: a tie agrees
    runs = [r for r in load_runs(even.uri) if r.tags.get("experiment") == rudra_eq6.NOMINAL]
    tie = _furthest_apart([r for r in runs if r.tags.get("scale") == "full"])
    assert tie.startswith("This store's `full` study under α0/n agrees: (1,4,30) 55.") and "(30,4,30) 5" in tie
    assert _furthest_apart([]) == (
        "This store's `full` study under α0/n has 0 of the 6 rows: which two it puts furthest apart is not known yet."
    )


def test_two_studies_of_one_table_no_paper_claims_are_kept_apart(psbench_root):
    """Table 2's rows without staleness and its rows under α0/n both have no paper tag and Table 2's case labels, at
    the same scale and seeds: the store keeps both (the preset tells them apart), the latest run of each."""
    s = ReportStore(psbench_root)
    for exp in (rudra.NO_STALENESS, rudra_eq6.NOMINAL, rudra_eq6.NOMINAL):
        s.run({"experiment": exp, "scale": "full", "case": "s2_mu64_lam2"}, {"test_error": 0.5}, seed=0)
    runs = load_runs(s.uri)
    assert sorted(r.tags["experiment"] for r in runs) == sorted([rudra.NO_STALENESS, rudra_eq6.NOMINAL])


def test_the_lr_per_sample_of_each_reading(tmp_path):
    run = Run("r", {}, _params(4, 32, 4), {"staleness_mean": 3.0}, 0)
    assert rudra_eq6.lr_nominal(run) == 1.0  # 1/4 × 128/(1 · 32)
    ctx = Context([], tmp_path, f"sqlite:///{tmp_path / 'nowhere.db'}")
    assert rudra_eq6.lr_measured(ctx, run) == (128 / 96, True)  # 1/3 × 128/32, from the mean staleness
    assert rudra_eq6.lr_nominal(Run("r", {}, _params(1, 4, 30), {}, 0)) == 128 / 120
    assert rudra_eq6.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0 and rudra_eq6.spearman([1, 2], [2, 1]) is None


def test_fig4_prints_sigma_against_n_and_lambda_minus_1_at_lambda_2_4_10_30(psbench_root, tmp_path):
    """Fig 4's staleness check at λ ∈ {2, 4, 10, 30}: at λ = 30, λ − 1 ≈ n hides the offset; at λ = 2, 4 the
    λ-softsync ⟨σ⟩ is λ − 1, not n, and the claim "⟨σ⟩ ≈ n" does not hold there, with that measured reason."""
    from analysis.report import build

    s = ReportStore(psbench_root)
    tags = {"paper": "rudra", "figure": "4", "scale": "paper"}
    for case, (lam, n) in rudra_figs.FIG4_CASES.items():
        mean = n * (lam - 1) / lam  # what psbench's schedule gives (measured: 0.50, 1.00, 0.75, 2.99, 0.89, 8.94, …)
        hist = {str(round(mean)): 1_000_000}
        s.run(
            {**tags, "case": case}, {"staleness_mean": mean, "staleness_max": 2 * n}, summary={"staleness_hist": hist}
        )
    build(psbench_root, tmp_path / "r")
    md = (tmp_path / "r" / "rudra_fig4.md").read_text()
    # λ, protocol, paper ⟨σ⟩, ours ⟨σ⟩, n, λ − 1, n(λ − 1)/λ
    for lam, proto, ours, n in (
        (2, "2-softsync (λ-softsync)", "1.00", 2),
        (4, "4-softsync (λ-softsync)", "3.00", 4),
        (10, "10-softsync (λ-softsync)", "9.00", 10),
        (30, "30-softsync (λ-softsync)", "29.00", 30),
    ):
        assert f"| {lam} | {proto} | ≈ {n} | {ours} (n=1) | {n} | {lam - 1} | {ours} | ≤ {2 * n} |" in md, lam
    assert "| 2 | 1-softsync | ≈ 1 | 0.50 (n=1) | 1 | 1 | 0.50 | ≤ 2 |" in md
    claim = next(line for line in md.splitlines() if line.startswith("| 2-softsync, λ = 2: ⟨σ⟩ ≈ n (within 20 %)"))
    assert "| does not hold | simulation | ⟨σ⟩ = 1.00, n = 2, λ − 1 = 1; why: ⟨σ⟩ is n(λ − 1)/λ = 1.00 here" in claim
    assert "| 30-softsync: ⟨σ⟩ ≈ n (within 20 %) | holds | simulation | ⟨σ⟩ = 29.00, n = 30, λ − 1 = 29 |" in md
    assert "| 10-softsync, λ = 10: ⟨σ⟩ ≈ n (within 20 %) | holds |" in md  # 9.0: within 20 % of 10
