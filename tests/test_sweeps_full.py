"""The CIFAR entry points' ``full`` scale (all 60,000 images, ``dataset=cifar10_jpeg``) and
``python -m sweeps cifar_jpeg_cost`` (the recipe on cifar10_subset's pixels and on their JPEG counterparts, paired).

Composes and validates every command on tiny files the tests write (any clone); builds both arms' data; no training.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf

from psbench.cli import CONF_DIR
from psbench.data import build_datamodule, sources
from psbench.data.checksum import KNOWN_MD5, md5_file
from psbench.data.options import CIFAR10_JPEG_NOTE
from psbench.tracking import run_tags
from test_cifar_jpeg_match import write_pair
from test_sweeps_seeds import _sweep_space

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweeps import entries  # noqa: E402
from sweeps.__main__ import main as sweep  # noqa: E402
from sweeps._runner import command  # noqa: E402

from sweep_entry import entry  # noqa: E402

cifar_jpeg_cost = entry("cifar_jpeg_cost")
rudra_table2, rudra_table3, rudra_fig5 = entry("rudra_table2"), entry("rudra_table3"), entry("rudra_fig5")
rudra_fig6_7, zhang_fig3, terngrad_table1 = entry("rudra_fig6_7"), entry("zhang_fig3"), entry("terngrad_table1")
MATCHED = entries.JPEG_MATCHED

FULL = {
    "rudra/table2": rudra_table2,
    "rudra/table3": rudra_table3,
    "rudra/fig5": rudra_fig5,
    "rudra/fig6_7": rudra_fig6_7,
    "zhang/fig3": zhang_fig3,
    "terngrad/table1": terngrad_table1,
}
PRESET = cifar_jpeg_cost.PRESET


@pytest.mark.parametrize("preset", sorted(FULL))
def test_full_scale_trains_on_all_of_cifar10_as_jpeg_with_three_seeds_and_says_so(
    preset, compose_preset, jpeg_data_dir, tmp_path
):
    mod = FULL[preset]
    over = mod.SCALES["full"]
    cfg = compose_preset(preset, *over, jpeg_data_dir)
    assert cfg.dataset.name == "cifar10_jpeg" and cfg.dataset.subset is None  # 50,000 / 10,000
    assert cfg.dataset.data_note == CIFAR10_JPEG_NOTE and cfg.tags.data_note.startswith("cifar10_jpeg_q75_")
    assert cfg.dataset.preprocess == ("per_image" if preset.startswith("terngrad") else "mean")  # the paper's layer
    cmd = command(mod.NAME, preset, over, "full")
    assert len(set(_sweep_space(tmp_path, cmd)["seed"].choices)) >= 3  # the verdict rule's seeds
    assert "``full``" in mod.__doc__ and "s/epoch" in mod.__doc__  # the budget and its measured arithmetic


def _cases() -> dict[str, list[str]]:
    from hydra_plugins.psbench_optuna_sweeper._search_space import case_overrides

    conf = yaml.safe_load((CONF_DIR / "experiment" / f"{PRESET}.yaml").read_text())
    return case_overrides(conf["hydra"]["sweeper"]["cases"])


def _tiny_arrays(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.integers(0, 256, (20, 3, 32, 32), dtype=np.uint8),
        y_train=np.arange(20) % 10,
        x_test=rng.integers(0, 256, (10, 3, 32, 32), dtype=np.uint8),
        y_test=np.arange(10) % 10,
    )


def test_jpeg_cost_runs_each_configuration_on_both_pixels_alike(compose_preset, tmp_path):
    """Two configurations × {original, jpeg_q75}; the arms of a configuration differ only in the data set (and
    the tag that says which), so a page can pair them by ``configuration``, ``pixels`` and seed."""
    _tiny_arrays(tmp_path / MATCHED)  # compose_cfg's paths.root_dir is tmp_path
    scale = cifar_jpeg_cost.SCALES["ci"]
    cmd = command("cifar_jpeg_cost", PRESET, scale, "ci")
    assert "hydra.sweeper.study_name=cifar_jpeg_cost_ci" in cmd
    assert sorted(_sweep_space(tmp_path, cmd)["seed"].choices) == [0, 1, 2, 3, 4]
    arms: dict[str, dict[str, dict]] = {}
    for over in _cases().values():
        cfg = compose_preset(PRESET, *scale, *over)
        c = OmegaConf.to_container(cfg, resolve=True)
        assert {"configuration", "pixels"} <= set(run_tags(c))  # MLflow tags that pair the runs
        arms.setdefault(c["tags"].pop("configuration"), {})[c["tags"].pop("pixels")] = c
        assert (cfg.learners, cfg.batch_size, cfg.epochs, cfg.optimizer.lr, list(cfg.optimizer.milestones)) == (
            30,
            4,
            6,
            0.001,
            [],
        )  # Zhang Fig 3's recipe at its ci budget
        assert cfg.dataset.preprocess == "mean" and "paper" not in run_tags(c)  # no paper's page picks these up
    assert set(arms) == {"hardsync", "s30_tau"} and all(set(a) == {"original", "jpeg_q75"} for a in arms.values())
    for a in arms.values():
        orig, jpeg = a["original"].pop("dataset"), a["jpeg_q75"].pop("dataset")
        assert a["original"] == a["jpeg_q75"]  # everything else alike
        assert orig["name"] == "cifar10_subset" and jpeg["name"] == "arrays"
        assert jpeg["path"] == str(tmp_path / MATCHED) and jpeg["data_note"] == CIFAR10_JPEG_NOTE
        assert orig["preprocess"] == jpeg["preprocess"] == "mean" and orig["subset"] is jpeg["subset"] is None
    assert arms["s30_tau"]["original"]["lr_policy"]["name"] == "per_gradient"


def test_jpeg_cost_writes_the_counterparts_once_and_both_arms_get_the_same_data_layer(tmp_path, monkeypatch):
    data = tmp_path / "data"
    sub = write_pair(data)  # a tiny subset and a zip holding its images' JPEGs among others
    for key in (sources.DATASET_FILES["cifar10_subset"][0], sources.DATASET_FILES["cifar10_jpeg"][0]):
        monkeypatch.setitem(KNOWN_MD5, key, md5_file(data / key))
    monkeypatch.setenv("PSBENCH_DATA", str(data))
    root = tmp_path / "root"
    out = root / MATCHED
    assert entries.cifar_jpeg_match(root) == 0 and out.is_file()
    written = out.stat().st_mtime_ns
    assert entries.cifar_jpeg_match(root) == 0 and out.stat().st_mtime_ns == written  # kept, not redone
    orig = build_datamodule("cifar10_subset", data, preprocess="mean")
    jpeg = build_datamodule("arrays", root, path=str(out), preprocess="mean")
    orig.setup()
    jpeg.setup()
    assert type(orig) is type(jpeg) and orig.input_shape == jpeg.input_shape
    assert torch.equal(orig.y_train, jpeg.y_train) and torch.equal(orig.y_test, jpeg.y_test)
    assert orig.y_train.tolist() == sub["y_train"].tolist()  # the subset's order
    # the same layer on both: 0–255 pixels minus the training set's per-pixel mean; they differ by the JPEG loss only
    assert 100 < float(orig.pixel_mean.mean()) < 200 and float((orig.pixel_mean - jpeg.pixel_mean).abs().max()) < 4
    assert 0 < float((orig.x_train - jpeg.x_train).abs().mean()) < 4


def test_jpeg_cost_refuses_another_scale_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PSBENCH_ROOT", str(tmp_path))
    assert sweep(["cifar_jpeg_cost", "scale=full"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "cifar_jpeg_cost: error: scale='full' is invalid: allowed one of ci"
    assert not (tmp_path / MATCHED).exists()
