"""``python -m analysis`` refuses arguments it cannot build a report from in one line naming the option, exit 2,
before anything is written: a ``--root`` without a store (it made a report of "no runs" and a directory at the typo),
a tracking server that does not answer (minutes of retries, then a traceback), an ``--experiment`` the store does
not hold (a report of "no runs"), an ``--out`` or ``--docs`` under a file (a traceback)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.report import main  # noqa: E402

from report_store import ReportStore  # noqa: E402


def _refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("python -m analysis: error: "), err
    return err


def test_a_root_without_a_store_is_refused_and_nothing_is_made(capsys, tmp_path):
    typo = tmp_path / "runz"
    err = _refused(capsys, ["--root", str(typo)])
    assert f"--root='{typo}' is invalid: allowed a dir holding mlflow.db" in err
    assert not typo.exists()


def test_an_experiment_the_store_does_not_hold_is_refused_naming_those_it_holds(capsys, psbench_root, tmp_path):
    ReportStore(psbench_root)
    out = tmp_path / "reports"
    err = _refused(capsys, ["--root", str(psbench_root), "--experiment", "psbenhc", "--out", str(out)])
    assert "--experiment='psbenhc' is invalid: allowed one of the store's experiments: " in err and "psbench" in err
    assert not out.exists()


def test_a_tracking_server_that_does_not_answer_is_refused(capsys, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    err = _refused(capsys, ["--tracking-uri", uri, "--out", str(tmp_path / "reports")])
    assert f"--tracking-uri='{uri}' is invalid: allowed an MLflow store that answers (" in err
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("key", ["--out", "--docs"])
def test_an_out_or_docs_path_under_a_file_is_refused(capsys, psbench_root, tmp_path, key):
    ReportStore(psbench_root)
    blocker = tmp_path / "file"
    blocker.write_text("")
    bad = blocker / "x.md"
    argv = ["--root", str(psbench_root), "--out", str(tmp_path / "reports"), key, str(bad)]
    err = _refused(capsys, argv)
    assert f"{key}='{bad}' is invalid: allowed a path that can be written ({blocker} is a file)" in err


@pytest.mark.parametrize("form", ["sqlite", "file"])
def test_a_local_store_that_does_not_exist_is_refused_and_not_created(capsys, tmp_path, form):
    """MLflow makes a store at a mistyped sqlite path or file: dir when asked for its experiments; the check does
    not ask it."""
    typo = tmp_path / "typo" / ("mlflow.db" if form == "sqlite" else "mlruns")
    uri = f"sqlite:///{typo}" if form == "sqlite" else f"file:{typo}"
    err = _refused(capsys, ["--tracking-uri", uri, "--out", str(tmp_path / "reports")])
    assert f"--tracking-uri='{uri}' is invalid: allowed an existing store (no such " in err
    assert not (tmp_path / "typo").exists() and not (tmp_path / "reports").exists()


def test_a_docs_path_that_is_a_directory_is_refused_before_the_report(capsys, psbench_root, tmp_path):
    ReportStore(psbench_root)
    (tmp_path / "docsdir").mkdir()
    out = tmp_path / "reports"
    err = _refused(capsys, ["--root", str(psbench_root), "--out", str(out), "--docs", str(tmp_path / "docsdir")])
    assert f"--docs='{tmp_path / 'docsdir'}' is invalid: allowed a file path (it is a directory)" in err
    assert not out.exists()


def test_nothing_is_created_when_a_later_path_is_refused(capsys, psbench_root, tmp_path):
    ReportStore(psbench_root)
    (tmp_path / "file").write_text("")
    docs = tmp_path / "new" / "verdicts.md"
    _refused(capsys, ["--root", str(psbench_root), "--out", str(tmp_path / "file" / "x"), "--docs", str(docs)])
    assert not docs.parent.exists()
