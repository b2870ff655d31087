"""``dataset=imagenet``: ILSVRC-2012 folders streamed in the schedule's sample order.

Every test writes a tiny data set in the real layout (class folders of JPEGs of random sizes, written with
Pillow; validation as class folders or flat with ``LOC_val_solution.csv``) and reads it back for real.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from data_files import WNIDS, make_imagenet
from psbench.cluster import ComputeModel, CostModel, Topology
from psbench.data import build_datamodule
from psbench.data.imagenet import INDEX_FILE, MEAN_BGR, build_index, load_resized
from psbench.data.options import IMAGENET_CROPS, imagenet_crop
from psbench.errors import ConfigError
from psbench.lr import LRPolicy
from psbench.ps import Protocol, Schedule, Simulator
from psbench.ps.samples import SampleStream
from psbench.strategy import UpdateBatches


def schedule(proto: Protocol, mu: int, gradients: int, seed: int = 0) -> Schedule:
    cost = CostModel(compute=ComputeModel(1e-3, 1e-4), message_bytes=40_000, jitter_cv=0.2)
    return Schedule.collect(Simulator(proto, cost, Topology(), mu, gradients, seed).run())


def reference(path: Path, resize: int, crop: int, top: int, left: int, mirror: bool) -> torch.Tensor:
    """A crop computed straight from Pillow: BGR, mean subtracted, [3, crop, crop]."""
    with Image.open(path) as im:
        w, h = im.size
        s = resize / min(w, h)
        im = im.convert("RGB").resize((max(resize, round(w * s)), max(resize, round(h * s))), Image.Resampling.BILINEAR)
    a = np.asarray(im)[top : top + crop, left : left + crop, ::-1].astype(np.float32) - np.array(MEAN_BGR, np.float32)
    if mirror:
        a = a[:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))


def module(data_dir: Path, crop: int = 24, resize: int = 32, seed: int = 0, **kw):
    dm = build_datamodule("imagenet", data_dir, seed=seed, crop=crop, resize=resize, **kw)
    dm.prepare_data()
    dm.setup("fit")
    return dm


# ----------------------------------------------------------------------------- layouts and the index
def test_both_validation_layouts_give_the_same_labels_in_sorted_wnid_order(tmp_path):
    folders = build_index(make_imagenet(tmp_path / "a").parent)
    flat = build_index(make_imagenet(tmp_path / "b", flat_val=True).parent)
    assert folders.wnids == flat.wnids == tuple(sorted(WNIDS))
    assert (folders.val_layout, flat.val_layout) == ("folders", "flat")
    assert folders.train == flat.train and len(folders.train) == 18
    assert [f.split("/")[1] for f in folders.train] == [WNIDS[y] for y in folders.train_labels]
    assert folders.val_labels.tolist() == flat.val_labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert [Path(f).name for f in folders.val] == [Path(f).name for f in flat.val]


def test_the_index_is_built_once_and_rebuilt_when_a_class_folder_changes(tmp_path):
    root = make_imagenet(tmp_path)
    build_index(tmp_path)
    cached = json.loads((root / INDEX_FILE).read_text())
    assert cached["train"][:2] == [f"train/{WNIDS[0]}/{WNIDS[0]}_0.JPEG", f"train/{WNIDS[0]}/{WNIDS[0]}_1.JPEG"]
    (root / INDEX_FILE).write_text(json.dumps({**cached, "train": ["train/x/planted.JPEG"] * 18}))
    assert build_index(tmp_path).train[0] == "train/x/planted.JPEG"  # read from the index, not re-walked
    (root / "train" / WNIDS[1] / "extra.JPEG").write_bytes(
        (root / "train" / WNIDS[1] / f"{WNIDS[1]}_0.JPEG").read_bytes()
    )
    fresh = build_index(tmp_path)
    assert len(fresh.train) == 19 and f"train/{WNIDS[1]}/extra.JPEG" in fresh.train


def test_classes_and_subset_keep_the_first_wnids_and_files(tmp_path):
    make_imagenet(tmp_path)
    dm = module(tmp_path, classes=2)
    assert (dm.num_classes, dm.num_train, dm.num_test) == (2, 12, 4)
    assert module(tmp_path, subset=5).num_train == 5


# ----------------------------------------------------------------------------- the sample stream's order
@pytest.mark.parametrize("flat_val", [False, True])
def test_update_batches_read_the_streams_samples_with_their_crops(tmp_path, flat_val):
    make_imagenet(tmp_path, flat_val=flat_val)
    dm = module(tmp_path, seed=3, prefetch=8)
    mu, lam = 4, 3
    sched = schedule(Protocol("softsync", lam, n=1), mu, 12)
    batches = UpdateBatches(sched, dm.x_train, dm.y_train, mu, LRPolicy(), mu, lam, 3)
    stream = SampleStream(dm.num_train, 3)
    files = dm.index.train
    for i in range(sched.num_updates):
        rows = sched.rows(i)
        x, y = batches.samples(rows)
        starts = sched.sample_start[rows].tolist()
        positions = [p + j for p in starts for j in range(mu)]
        idx = torch.cat([stream.indices(p, mu) for p in starts]).tolist()
        assert y.tolist() == [WNIDS.index(files[k].split("/")[1]) for k in idx]  # the files' own labels
        assert x.shape == (len(idx), 3, 24, 24)
        for row, (k, p) in enumerate(zip(idx, positions, strict=True)):
            rng = np.random.default_rng((3, p))
            h, w = load_resized(tmp_path / "imagenet" / files[k], 32).shape[:2]
            top, left, mirror = int(rng.integers(0, h - 23)), int(rng.integers(0, w - 23)), bool(rng.integers(0, 2))
            assert torch.equal(x[row], reference(tmp_path / "imagenet" / files[k], 32, 24, top, left, mirror))
    grouped = batches[sched.num_updates - 1].groups  # the per-update items read the same samples
    last = sched.rows(sched.num_updates - 1)
    x_last, _ = batches.samples(last)
    assert sum(len(g.x) for g in grouped) == len(x_last)


def test_evaluation_reads_centre_crops_in_file_order(tmp_path):
    make_imagenet(tmp_path)
    dm = module(tmp_path, crop=24, resize=32)
    x = dm.x_test[0:6]
    for k, f in enumerate(dm.index.val):
        h, w = load_resized(tmp_path / "imagenet" / f, 32).shape[:2]
        assert torch.equal(x[k], reference(tmp_path / "imagenet" / f, 32, 24, (h - 24) // 2, (w - 24) // 2, False))
    ((xb, yb),) = list(dm.val_dataloader())[:1]
    assert torch.equal(yb, dm.y_test[:100]) and torch.equal(xb, dm.x_test[0 : len(yb)])


def test_papers_crops_per_model(tmp_path):
    assert (
        (imagenet_crop(None, "alexnet"), imagenet_crop(None, "googlenet"), imagenet_crop(None, "vgg_a"))
        == (227, 224, 224)
        == tuple(IMAGENET_CROPS.values())
    )
    assert imagenet_crop(32, "mlp") == 32
    with pytest.raises(ConfigError, match=r"dataset.crop=None .*model=mlp"):
        imagenet_crop(None, "mlp")
    make_imagenet(tmp_path, per_class=1, val_per_class=1, size=(150, 400))
    dm = module(tmp_path, crop=227, resize=256)
    x = dm.x_train.take(torch.tensor([0, 1]), torch.tensor([0, 1]))
    assert x.shape == (2, 3, 227, 227) and dm.x_test[0:1].shape == (1, 3, 227, 227)
    assert dm.input_shape == (3, 227, 227)


# ----------------------------------------------------------------------------- augmentation
def test_training_crops_are_seeded_by_position_and_vary_across_epochs(tmp_path):
    make_imagenet(tmp_path, size=(60, 90))
    n = 18
    idx = torch.arange(n)
    a = module(tmp_path, seed=5).x_train.take(idx, idx)
    b = module(tmp_path, seed=5).x_train.take(idx, idx)
    assert torch.equal(a, b)  # a fresh module, the same seed: the same crops and mirrors
    next_epoch = module(tmp_path, seed=5).x_train.take(idx, idx + n)
    other_seed = module(tmp_path, seed=6).x_train.take(idx, idx)
    differs = lambda u, v: sum(not torch.equal(u[k], v[k]) for k in range(n))  # noqa: E731
    assert differs(a, next_epoch) >= n // 2 and differs(a, other_seed) >= n // 2


# ----------------------------------------------------------------------------- bounded memory
def _stream_peak(data_dir: Path, reads: int) -> tuple[int, int, int]:
    """Peak traced bytes of setting the module up and reading ``reads`` samples of its stream."""
    build_index(data_dir)  # the index file exists already, as from an earlier run
    tracemalloc.start()
    dm = module(data_dir, crop=24, resize=32, prefetch=16, threads=2)
    x, stream = dm.x_train, SampleStream(dm.num_train, 0)
    for p in range(0, reads, 8):
        x.take(stream.indices(p, 8), torch.arange(p, p + 8))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, x.peak_ahead, x.decoded


def test_memory_is_bounded_by_the_prefetch_window_not_the_data_set(tmp_path):
    make_imagenet(tmp_path / "small", per_class=10, val_per_class=1)
    make_imagenet(tmp_path / "large", per_class=100, val_per_class=1)
    small, window_s, _ = _stream_peak(tmp_path / "small", 96)
    large, window_l, decoded_l = _stream_peak(tmp_path / "large", 96)
    assert window_s <= 16 and window_l <= 16  # never more decoded crops waiting than the window
    assert decoded_l <= 96 + 16 + 8  # what was read plus at most one window ahead: nothing else is decoded
    assert large < 1.5 * small + 256 * 1024, (small, large)  # 10× the files, the same peak


# ----------------------------------------------------------------------------- the command
IMAGENET_RUN = [
    "dataset=imagenet",
    "model=cifar_cnn",
    "dataset.crop=32",
    "dataset.resize=36",
    "optimizer.lr=0.0001",
    "protocol=softsync",
    "protocol.n=1",
    "learners=3",
    "batch_size=4",
    "epochs=2",
    "trainer.progress=none",
]


def test_psbench_trains_on_a_generated_imagenet_folder(tmp_path, psbench_root, run_psbench, mlflow_runs):
    """A small crop override (32 of 36) and the CIFAR CNN stand in for AlexNet's 227 of 256: the pipeline is the
    same, a conv net included (on the CPU its look-ahead and evaluation run channels_last)."""
    make_imagenet(tmp_path, flat_val=True)
    proc = run_psbench(
        *IMAGENET_RUN, f"paths.data_dir={tmp_path}", f"hydra.run.dir={psbench_root / 'run'}", root=psbench_root
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((psbench_root / "run" / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["samples_trained"] == 2 * 18 // 4 * 4
    assert 0.0 <= summary["test_error"] <= 1.0
    assert [r["status"] for r in mlflow_runs(psbench_root)] == ["FINISHED"]


@pytest.mark.slow
def test_imagenet_runs_are_deterministic(tmp_path, psbench_root, run_psbench):
    make_imagenet(tmp_path)
    sha = []
    for k in range(2):
        proc = run_psbench(
            *IMAGENET_RUN, f"paths.data_dir={tmp_path}", f"hydra.run.dir={psbench_root / f'run{k}'}", root=psbench_root
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        sha.append(json.loads((psbench_root / f"run{k}" / "summary.json").read_text())["weights_sha256"])
    assert sha[0] == sha[1]


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        ([], ["paths.data_dir=", "missing", "imagenet/train/<wnid>/*.JPEG"]),
        (["model=mlp"], ["dataset.crop=None", "model=mlp"]),
    ],
)
def test_missing_data_or_crop_is_one_line_before_any_run(
    tmp_path, psbench_root, run_psbench, mlflow_runs, extra, needles
):
    proc = run_psbench(
        "dataset=imagenet", "model=alexnet", *extra, f"paths.data_dir={tmp_path / 'none'}", root=psbench_root
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("psbench: error: "), proc.stderr
    assert all(n in lines[0] for n in needles), lines[0]
    assert mlflow_runs(psbench_root) == []


def test_the_dist_engine_and_local_steps_are_refused_with_imagenet(tmp_path, compose_cfg):
    from psbench.validate import validate

    make_imagenet(tmp_path, per_class=1, val_per_class=1)
    base = ["dataset=imagenet", "model=alexnet", f"paths.data_dir={tmp_path}"]
    validate(compose_cfg(*base))
    with pytest.raises(ConfigError, match=r"engine.name='dist'.*sim with dataset=imagenet"):
        validate(compose_cfg(*base, "engine=dist"))
    with pytest.raises(ConfigError, match=r"protocol.name='downpour'.*without local steps"):
        validate(compose_cfg(*base, "protocol=downpour"))
    with pytest.raises(ConfigError, match=r"dataset.crop=300.*dataset.resize"):
        validate(compose_cfg(*base, "dataset.crop=300"))


# ----------------------------------------------------------------------------- the papers' presets
@pytest.mark.parametrize(
    ("preset", "mu", "lam", "epochs"), [("rudra/table4_error", 16, 18, 30), ("zhang/fig4", 16, 18, 35)]
)
def test_imagenet_presets_train_alexnet_on_227_crops_or_say_what_is_missing(
    compose_preset, tmp_path, preset, mu, lam, epochs
):
    with pytest.raises(ConfigError, match=r"paths.data_dir=.*missing .*imagenet/train/<wnid>/\*.JPEG"):
        compose_preset(preset, f"paths.data_dir={tmp_path}")
    make_imagenet(tmp_path, per_class=1, val_per_class=1)
    cfg = compose_preset(preset, f"paths.data_dir={tmp_path}")
    assert (cfg.dataset.name, cfg.model.name, cfg.batch_size, cfg.learners, cfg.epochs) == (
        "imagenet",
        "alexnet",
        mu,
        lam,
        epochs,
    )
    assert imagenet_crop(cfg.dataset.crop, cfg.model.name) == 227 and cfg.dataset.resize == 256
    assert list(cfg.dataset.mean) == list(MEAN_BGR) and (cfg.optimizer.lr, cfg.optimizer.momentum) == (0.01, 0.9)
