"""The smaller command-line tools refuse bad arguments in one line naming the argument, exit 2, without a traceback
and without writing: ``python -m psbench.compression.perf_model --out`` under a file, ``python -m
psbench.tracking.temporal_efficiency`` on a store that does not exist (it created an empty ``mlflow.db`` in the
current dir) or a run id the store lacks (it said the run "has no metric"), ``python -m
psbench.calibration.free_run`` on a directory that is not a dist free run's (a traceback)."""

from __future__ import annotations

import pytest

from psbench.calibration import free_run
from psbench.compression import perf_model
from psbench.tracking import temporal_efficiency


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    return err[-1]


def test_perf_model_refuses_an_out_under_a_file(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as e:
        perf_model.main(["--out", str(blocker / "fig5")])
    assert e.value.code == 2
    assert f"--out='{blocker / 'fig5'}' is invalid: allowed a directory that can be written" in _one_line(capsys)


def test_temporal_efficiency_refuses_a_missing_store_without_creating_one(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PSBENCH_ROOT", raising=False)
    assert temporal_efficiency.main(["a", "b"]) == 2
    assert "--tracking-uri='sqlite:///" in _one_line(capsys) and not (tmp_path / "mlflow.db").exists()


def test_temporal_efficiency_refuses_a_run_the_store_lacks(capsys, psbench_root):
    uri = f"sqlite:///{psbench_root / 'mlflow.db'}"
    assert temporal_efficiency.main(["0123abcd", "b", "--tracking-uri", uri]) == 2
    assert _one_line(capsys) == (
        f"python -m psbench.tracking.temporal_efficiency: error: run '0123abcd' is invalid: allowed a run id of {uri}"
    )


def test_free_run_refuses_a_dir_that_is_not_a_dist_free_run(capsys, tmp_path):
    (tmp_path / "summary.json").write_text("{}")
    assert free_run.main([str(tmp_path)]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"python -m psbench.calibration.free_run: error: run_dir='{tmp_path}' is invalid: ")
    assert line.endswith("(it has no resolved_config.yaml, schedule.npz, dist_timing.npz)")


def test_temporal_efficiency_says_a_store_that_does_not_answer_not_a_bad_run_id(capsys, monkeypatch):
    import socket

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert temporal_efficiency.main(["a", "b", "--tracking-uri", f"http://127.0.0.1:{port}"]) == 2
    line = _one_line(capsys)
    assert "API request to" in line and "is invalid: allowed a run id" not in line
