"""The report never claims more than it shows.

A page's status in the index comes from one rule (:func:`analysis.page.status`) over the configurations its
runs cover and its claims' verdicts: an ad-hoc run of a preset (no ``scale`` tag), or one configuration of a
scale, never makes a page "reproduced". Every page links back to the index and prints its runs' provenance;
every measured cell shows n; curves never end on the run summary's copy of a metric.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.page import Context, Shown, status  # noqa: E402
from analysis.pages import rudra_paper, zhang  # noqa: E402
from analysis.report import all_pages, build  # noqa: E402
from analysis.runs import history, load_runs  # noqa: E402
from analysis.verdicts import FAILS, HOLDS, NOT_MEASURED, NOT_RESOLVABLE, Claim  # noqa: E402

from report_store import ReportStore  # noqa: E402

#: per page: the tags an ad-hoc run of its preset carries and one configuration (case) of the table
AD_HOC = {
    "rudra_table1": ({"paper": "rudra", "table": "1"}, "rudra_base"),
    "rudra_table2": ({"paper": "rudra", "table": "2"}, rudra_paper.case_label(1, 4, 30)),
    "rudra_table3": ({"paper": "rudra", "table": "3"}, rudra_paper.case_label(0, 8, 30)),
    "rudra_table4": ({"paper": "rudra", "table": "4"}, "base-hardsync"),
    "rudra_fig4": ({"paper": "rudra", "figure": "4"}, "n1"),
    "rudra_fig5": ({"paper": "rudra", "figure": "5"}, "s30_alpha0"),
    "rudra_fig6_7": ({"paper": "rudra", "figure": "6-7"}, rudra_paper.case_label(0, 4, 1)),
    "rudra_fig8": ({"paper": "rudra", "figure": "8"}, rudra_paper.case_label(0, 4, 1)),
    "zhang_fig1": ({"paper": "zhang", "figure": "1"}, "n1"),
    "zhang_fig2": ({"paper": "zhang", "figure": "2"}, zhang.fig2_case("cifar", 4, "hardsync", 1)),
    "zhang_fig3": ({"paper": "zhang", "figure": "3"}, "hardsync"),
    "terngrad_fig3": ({"paper": "terngrad", "figure": "3"}, "momentum_fp32_n2"),
    "terngrad_table1": ({"paper": "terngrad", "table": "1"}, "fp32_n2"),
    "agn_table1": ({"paper": "agn", "table": "1"}, "agn_n10_H10"),
    "agn_fig7": ({"paper": "agn", "figure": "7a"}, "agn"),
    "agn_fig2": ({"paper": "agn", "figure": "2"}, "downpour_n10_H1"),
    "agn_fig4": ({"paper": "agn", "figure": "4"}, "downpour_n10_H1"),
    "agn_figs8_12": ({"paper": "agn", "table": "1"}, "aeasgd_n10_H10"),
    "ssp_fig2_3": ({"paper": "ssp", "figure": "2,4", "dataset_stand_in": "timit"}, "m1"),
    "ssp_fig4_5": ({"paper": "ssp", "figure": "3,5", "dataset_stand_in": "imagenet63k"}, "m1"),
}
#: pages with no runs to make: their status is what they are (analytic, data not available), never "reproduced"
NO_RUNS_TO_MAKE = {"terngrad_tables2_3", "terngrad_fig5", "terngrad_fig2", "agn_fig6", "ssp_table1", "ssp_fig6"}
#: the papers' files and the name the index gives each
PAPERS = {
    "rudra-accuracy-runtime-tradeoff.md": "Rudra",
    "staleness-aware-async-sgd.md": "staleness-aware ASGD",
    "terngrad.md": "TernGrad",
    "accumulated-gradient-normalization.md": "AGN",
    "ssp-dnn.md": "SSP",
}
BUILT = [p.key for p in all_pages() if p.build is not None]


def _ad_hoc_store(root: Path, scale: str | None) -> None:
    """One run per page, logged as psbench logs a training run (per-update histories, then its summary)."""
    s = ReportStore(root)
    steps = range(10)
    for tags, case in AD_HOC.values():
        s.run(
            {**tags, "case": case, **({"scale": scale} if scale else {})},
            {
                "test_error": 0.3,
                "train_loss": 0.5,
                "sim_time_s": 10.0,
                "samples": 100,
                "ps_updates": 10,
                "epochs_done": 1.0,
                "staleness_mean": 1.0,
                "comm_overlap": 0.5,
            },
            histories={
                "train_loss": [(i, 2.0 - 0.1 * i) for i in steps],
                "sim_time_s": [(i, i) for i in steps],
                "train_accuracy": [(i, 0.5 + 0.04 * i) for i in steps],
                "test_error": [(i, 0.5 - 0.02 * i) for i in steps],
            },
            summary={"staleness_hist": {"0": 5, "1": 5}, "sim_time_s": 10.0, "epochs_done": 1.0},
        )


@pytest.fixture(scope="module", params=[None, "ci"], ids=["no_scale_tag", "one_configuration_at_ci"])
def ad_hoc(request, tmp_path_factory, mlflow_template_db):
    root = tmp_path_factory.mktemp("ad_hoc")
    shutil.copy(mlflow_template_db, root / "mlflow.db")
    _ad_hoc_store(root, request.param)
    return request.param, build(root, root / "reports"), root / "reports"


def test_every_page_with_a_builder_has_an_ad_hoc_run_here():
    assert set(BUILT) == set(AD_HOC) | NO_RUNS_TO_MAKE


@pytest.mark.parametrize("key", BUILT)
def test_an_ad_hoc_preset_run_never_makes_a_page_reproduced(ad_hoc, key):
    scale, statuses, out = ad_hoc
    st = statuses[key]
    assert "reproduced" not in st, st
    if key in NO_RUNS_TO_MAKE:
        return
    if scale is None:  # a run without a scale tag counts for no scale
        assert st.startswith("no runs ("), st
        assert "without a scale tag" in (out / f"{key}.md").read_text()
    else:  # one configuration of the table at ci (two where a page reads two presets' runs: Table 3, SSP)
        assert st.startswith(("partial (1 of ", "partial (2 of ")), st
        assert "configurations at scale ci)" in st
    index = (out / "index.md").read_text()
    assert f"({key}.html) | {st} |" in index  # the index shows exactly the page's status


def test_status_rule():
    decided = [Claim("a", HOLDS, ""), Claim("b", FAILS, "")]
    assert status(Shown({"ci": (3, 3)}, decided, command="c")) == (
        "reproduced at scale ci: at the paper's budget: 1 of 2 claims hold"
    )
    assert (
        status(Shown({"ci": (3, 3)}, [*decided, Claim("c", NOT_MEASURED, "")], command="c"))
        == "measured at scale ci; at the paper's budget: 1 of 2 claims hold; 1 not measured (no runs)"
    )
    assert (
        status(Shown({"ci": (3, 3)}, [*decided, Claim("c", NOT_RESOLVABLE, "")], command="c"))
        == "measured at scale ci; at the paper's budget: 1 of 3 claims hold, 1 not decided"
    )  # inside the noise is not a decision
    assert (
        status(Shown({"ci": (3, 3)}, [*decided, Claim("ours", HOLDS, "", ours=True)], command="c"))
        == "reproduced at scale ci: at the paper's budget: 1 of 2 claims hold"
    )  # a claim the paper did not make is not counted
    assert status(Shown({"ci": (3, 3)}, [], command="c")) == "measured at scale ci; no claims decided"
    assert status(Shown({"ci": (2, 3)}, decided, command="c")) == "partial (2 of 3 configurations at scale ci)"
    assert status(Shown({"ci": (0, 3)}, decided, command="python x.py")) == "no runs (python x.py)"
    assert status(Shown({}, decided, command="python x.py", note="simulation")) == "no runs (python x.py); simulation"
    assert (
        status(Shown({"small": (3, 3), "ci": (1, 3)}, decided, command="c"))
        == "reproduced at scale small: at the paper's budget: 1 of 2 claims hold; partial (1 of 3 configurations at "
        "scale ci)"
    )
    assert status(Shown(claims=decided, note="analytic")) == "analytic: at the paper's budget: 1 of 2 claims hold"


def test_a_complete_scale_with_decided_claims_is_reproduced_and_cells_show_n(psbench_root, tmp_path):
    s = ReportStore(psbench_root)
    for case, overlap in (("rudra_base", 0.1), ("rudra_adv", 0.5), ("rudra_adv_star", 0.995)):
        for seed in (0, 1, 2):
            s.run(
                {"paper": "rudra", "table": "1", "case": case, "scale": "ci"},
                {"comm_overlap": overlap + seed / 1000},
                seed=seed,
            )
    st = build(psbench_root, tmp_path)["rudra_table1"]
    assert st == "reproduced at scale ci: simulation: 4 of 4 claims hold; simulation (schedule only)"
    assert "| rudra_adv_star | 99.56 | 99.60 ± 0.10 (n=3) | 3 |" in (tmp_path / "rudra_table1.md").read_text()


def test_pages_link_to_the_index_and_show_their_runs_provenance(psbench_root, tmp_path):
    s = ReportStore(psbench_root)
    prov = {
        "psbench.git_commit": "abc1234def5678",
        "psbench.git_dirty": "false",
        "psbench.version": "0.1.0",
        "psbench.torch_version": "2.13.0",
        "psbench.lightning_version": "2.6.0",
        "psbench.mlflow_version": "3.17.0",
        "psbench.host": "box",
        "psbench.threads": "2",
    }
    tags = {"paper": "rudra", "figure": "4", "scale": "paper"}
    s.run({**tags, "case": "n1", **prov}, {"staleness_mean": 1.0})
    s.run({**tags, "case": "n2", **prov}, {"staleness_mean": 2.0})
    s.run({**tags, "case": "n30", **prov, "psbench.git_dirty": "true"}, {"staleness_mean": 30.0})
    s.run({"paper": "rudra", "figure": "4", "case": "n30"}, {"staleness_mean": 30.0}, seed=1)  # old, ad hoc
    build(psbench_root, tmp_path)
    md = (tmp_path / "rudra_fig4.md").read_text()
    assert md.startswith("[← index: every table and figure](index.html)\n")
    assert "## Provenance\n\n- runs: 4 (1 without a scale tag: not counted in any scale)\n" in md
    assert "- commit: abc1234 (2 runs), abc1234-dirty (1 run), unknown (1 run)\n" in md
    assert "- torch: 2.13.0 (3 runs), unknown (1 run)\n" in md and "- threads: 2 (3 runs), unknown (1 run)\n" in md
    for key in BUILT:  # every page, with runs or not
        page = (tmp_path / f"{key}.html").read_text()
        assert '<a href="index.html">← index: every table and figure</a>' in page, key
        assert "<h2>Provenance</h2>" in page, key


@pytest.mark.parametrize(
    ("summary_step", "legacy"),
    [(None, True), (0, True), (None, False)],
    ids=["legacy_summary_at_the_last_step", "legacy_summary_at_step_0", "summary_metrics"],
)
def test_curves_end_on_the_last_training_value_not_the_summary_copy(psbench_root, tmp_path, summary_step, legacy):
    """Older psbench logged the summary (train_loss = a run total, 3.08 here) under the per-update keys: at
    step 0, later at the last update's step; psbench now logs it as summary/<key>. No copy is a point of the
    curve."""
    s = ReportStore(psbench_root)
    loss = [(i, 3.0 / (1 + i)) for i in range(0, 110, 10)]  # ends at 0.27
    s.run(
        {"paper": "zhang", "figure": "3", "case": "hardsync", "scale": "ci"},
        {"train_loss": 3.08, "test_error": 0.4, "sim_time_s": 999.0, "ps_updates": 100, "epochs_done": 2.0},
        summary_step=summary_step,
        legacy=legacy,
        histories={
            "train_loss": loss,
            "sim_time_s": [(i, 0.1 * i) for i, _ in loss],
            "test_error": [(50, 0.5), (100, 0.4)],
        },
    )
    run = load_runs(s.uri)[0]
    assert history(s.uri, run, "train_loss") == loss
    assert history(s.uri, run, "sim_time_s")[-1] == (100, 10.0)
    curves = zhang.fig3_curves(Context([run], tmp_path, s.uri), [run])["hardsync"]
    assert curves["train_loss"][-1] == (2.0, pytest.approx(3.0 / 101))  # epoch 2: the training value
    assert curves["train_loss"][0] == (0.0, 3.0)  # a genuine step-0 point stays
    assert curves["test_error"] == [(1.0, 0.5), (2.0, 0.4)]


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy_summary_copy", "summary_metrics"])
def test_the_ssp_final_objective_and_its_claim_ignore_the_summary_copy(psbench_root, tmp_path, legacy):
    """The SSP pages smooth the objective over its last 10 points; a summary copy of train_loss (3.08, a run
    total) kept as the last point raised 6 machines' objective at the common time above 1 machine's and
    flipped "more machines converge faster"."""
    s = ReportStore(psbench_root)
    for m in (1, 6):
        for seed in (0, 1, 2):
            steps = range(1, 201)
            s.run(
                {"paper": "ssp", "figure": "2,4", "case": f"m{m}", "scale": "ci", "dataset_stand_in": "timit"},
                {"train_loss": 3.08, "sim_time_s": 200.0 / m, "ps_updates": 200, "epochs_done": 1.0},
                seed=seed,
                legacy=legacy,
                histories={
                    "train_loss": [(i, 0.27 + 3 / (1 + i) + 1e-3 * seed) for i in steps],
                    "sim_time_s": [(i, i / m) for i in steps],
                },
            )
    build(psbench_root, tmp_path)
    md = (tmp_path / "ssp_fig2_3.md").read_text()
    # final objective = the last 10 training values, smoothed (with the copy: 0.5657, and the claim fails)
    assert "| 6 | 0.2863 ± 0.0010 (n=3) | 33.3333 ± 0.0000 (n=3) | 0.2863 ± 0.0010 (n=3) |" in md
    assert (
        "strictly decreasing in machines) | holds | early training (1 of 10 epochs) | 6 machines "
        "0.2863 (n=3), 1 machine 0.3737 (n=3)" in md
    )


def _items(item: str) -> set[tuple[str, int]]:
    """("Figure"|"Table", number) of an index item: "Fig 4", "Figs 6–7", "Tables 2–3", "Figs 1, 3, 5"."""
    kind = "Table" if item.startswith("Table") else "Figure"
    out: set[tuple[str, int]] = set()
    for part in item.split(" ", 1)[1].split(","):
        a, _, b = part.strip().partition("–")
        out |= {(kind, n) for n in range(int(a), int(b or a) + 1)}
    return out


def test_the_index_lists_every_table_and_figure_of_the_five_papers(tmp_path):
    papers = REPO.parent / "shared" / "papers"
    if not papers.is_dir():
        papers = Path("/work/shared/papers")
    build(tmp_path, tmp_path / "r")
    index = (tmp_path / "r" / "index.md").read_text()
    listed: dict[str, set] = {}
    for page in all_pages():
        listed.setdefault(page.paper, set()).update(_items(page.item))
        assert f"| {page.paper} | " in index and page.item in index, page
    for name, paper in PAPERS.items():
        captions = set(re.findall(r"^(?:\*\*)?(Figure|Table) (\d+)[:.]", (papers / name).read_text(), re.M))
        want = {(k, int(n)) for k, n in captions}
        assert want and want <= listed[paper], (paper, sorted(want - listed[paper]))
    # figures without runs say why, or what command would make them, and decide nothing
    assert "| Rudra | Fig 9 | needs data not available here (ImageNet" in index
    assert "| TernGrad | Fig 4 | needs data not available here (ImageNet" in index
    for key in ("agn_fig2", "agn_fig4"):
        md = (tmp_path / "r" / f"{key}.md").read_text()
        assert "psbench -m experiment=agn/table1 protocol=downpour" in md and "| not measured | — | no runs (" in md


def test_html_renders_emphasis_code_and_aligns_text_left_numbers_right():
    from analysis.render import md_to_html

    page = md_to_html(
        "t",
        "**Ours: synthetic** and *ours* with `a*b*c` [i](index.html), Rudra-adv* vs adv*\n\n"
        "| claim | ours % |\n|---|---|\n| text | 18.10 ± 0.01 (n=3) |\n\n    psbench -m x=1,2\n",
    )
    assert "<strong>Ours: synthetic</strong> and <em>ours</em> with <code>a*b*c</code>" in page
    assert '<a href="index.html">i</a>, Rudra-adv* vs adv*' in page  # a star inside a word is no emphasis
    assert "**" not in page and "`" not in page
    assert '<tr><td>text</td><td class="num">18.10 ± 0.01 (n=3)</td></tr>' in page
    assert "td,th{border:1px solid #999;padding:2px 8px;text-align:left" in page
    assert "<pre>psbench -m x=1,2</pre>" in page


def test_a_pipe_inside_a_cell_stays_in_its_cell_in_markdown_and_html():
    """A header such as ``|ours − 17.9 %| pp`` is one cell: it split the CIFAR pages' reference table into 11
    header cells above 7 values, each value under the wrong header."""
    from analysis.render import _row_cells, md_table, md_to_html

    md = md_table(["paper", "|ours − 17.9 %| pp", "tolerance = 3 + |cost|"], [["Rudra", "1.69", "`a|b`"]])
    header, _, row = md.splitlines()
    assert len(_row_cells(header)) == len(_row_cells(row)) == 3
    assert header.count(r"\|") == 4  # Markdown (GFM, Python-Markdown) reads an escaped pipe as text
    page = md_to_html("t", md)
    assert "<th>|ours − 17.9 %| pp</th><th>tolerance = 3 + |cost|</th>" in page
    assert '<td class="num">1.69</td><td><code>a|b</code></td></tr>' in page
