"""validate(): every composed config that ships is valid; each bad value names its key."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from data_files import make_imagenet
from psbench import validate as v
from psbench.cli import CONF_DIR
from psbench.console import group_options
from psbench.errors import ConfigError


def test_default_config_is_valid(compose_cfg, tmp_path):
    cfg = compose_cfg()
    v.validate(cfg)
    assert (tmp_path / "run").is_dir()  # the output dir is created and probed
    assert cfg.learners == 4 and cfg.batch_size == 32 and cfg.protocol.name == "hardsync"
    assert cfg.dataset.name == "digits" and cfg.model.name == "mlp"
    assert cfg.logger.tracking_uri == f"sqlite:///{tmp_path}/mlflow.db"


@pytest.mark.parametrize("preset", group_options("experiment"))
def test_every_experiment_preset_composes_and_validates(compose_cfg, preset, tmp_path):
    cfg = compose_cfg(f"experiment={preset}")
    if cfg.dataset.name == "imagenet":  # needs the folders: a generated one (tests/test_imagenet.py: refused without)
        make_imagenet(tmp_path / "data", per_class=1, val_per_class=1)
        cfg = compose_cfg(f"experiment={preset}", f"paths.data_dir={tmp_path / 'data'}")
    v.validate(cfg)
    assert cfg.tags.experiment == preset


def test_rudra_fig5_preset_is_the_paper_setting(compose_cfg):
    cfg = compose_cfg("experiment=rudra/fig5_30softsync")
    # Rudra §5.1 Fig 5 caption: λ = 30, μ = 128; 30-softsync with α0/⟨σ⟩; §4.2 baseline
    assert (cfg.learners, cfg.batch_size, cfg.epochs) == (30, 128, 140)
    assert (cfg.protocol.name, cfg.protocol.n, cfg.lr_policy.name) == ("softsync", 30, "mean_staleness")
    assert (cfg.optimizer.lr, cfg.optimizer.momentum) == (0.001, 0.9)
    assert list(cfg.optimizer.milestones) == [120, 130]
    assert (cfg.model.name, cfg.dataset.name, cfg.hardware.name) == ("cifar_cnn", "cifar10", "p775")


def test_preset_overrides_top_level_keys_and_cli_overrides_preset(compose_cfg):
    cfg = compose_cfg("experiment=quickstart", "learners=6")
    assert cfg.learners == 6 and cfg.protocol.name == "softsync"


def _agree(path: str, node: dict, keys, required_only: bool = True) -> None:
    """Every key of an option file is declared; every required declared key is in the file."""
    from psbench.schema import Key

    for k, value in node.items():
        assert k in keys, f"{path}.{k} is in conf/ but not declared"
        if isinstance(keys[k], dict):
            _agree(f"{path}.{k}", value, keys[k])
    for k, key in keys.items():
        assert k in node or (isinstance(key, Key) and not key.required), f"{path}.{k} is declared but not in conf/"


@pytest.mark.parametrize("group", list(v.GROUPS))
def test_the_declared_schema_and_conf_agree(group):
    """One declaration per group (psbench.schema.Group next to its code): its options are conf/<group>/*.yaml,
    and their keys are the files' keys — nothing is kept twice by hand."""
    spec = v.GROUPS[group]
    assert sorted(group_options(group)) == sorted(spec.options)
    for option in spec.options:
        node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / group / f"{option}.yaml"), resolve=False)
        if spec.named:
            assert node.pop("name") == option
        _agree(f"{group}={option}", node, spec.options[option])


def test_the_top_level_keys_and_groups_are_declared():
    top = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"), resolve=False)
    defaults = [next(iter(d)) if isinstance(d, dict) else d for d in top.pop("defaults")]
    assert [d for d in defaults if d in v.GROUPS] == list(v.GROUPS)  # every group is composed, in this order
    assert set(defaults) - set(v.GROUPS) == {"hydra", "_self_", "experiment", "hparams_search"}
    _agree("config", top, v.TOP)


@pytest.mark.parametrize(
    "group",
    [
        "model",
        "dataset",
        "protocol",
        "lr_policy",
        "optimizer",
        "compression",
        "topology",
        "hardware",
        "engine",
        "logger",
    ],
)
def test_each_option_file_is_named_after_itself(group):
    for option in group_options(group):
        node = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
        assert node.name == option


@pytest.mark.parametrize("profile", ["laptop", "p775"])
def test_hardware_files_equal_the_cost_model_profiles(profile):
    from psbench.cluster.cost import PROFILES

    hw = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "hardware" / f"{profile}.yaml"))
    flat = {**hw.pop("compute"), **hw}
    for key, value in PROFILES[profile].items():
        assert flat[key] == pytest.approx(value), key


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["learners=0"], "learners"),
        (["learners=2.5"], "learners"),
        (["batch_size=-1"], "batch_size"),
        (["epochs=0"], "epochs"),
        (["seed=1.5"], "seed"),
        (["schedule_only=maybe"], "schedule_only"),
        (["protocol=softsync", "protocol.n=0"], "protocol.n"),
        (["protocol=softsync", "protocol.n=5", "learners=4"], "protocol.n"),
        (["protocol=ssp", "protocol.staleness_bound=-1"], "protocol.staleness_bound"),
        (["protocol=hardsync", "+protocol.n=2"], "protocol.n"),
        (["protocol=async", "+protocol.staleness_bound=2"], "protocol.staleness_bound"),
        (["protocol.name=gossip"], "protocol.name"),
        (["lr_policy.name=cosine"], "lr_policy.name"),
        (["lr_policy=sqrt_scaling", "lr_policy.reference_batch=0"], "lr_policy.reference_batch"),
        (["lr_policy=per_gradient", "lr_policy.zero_staleness=0"], "lr_policy.zero_staleness"),
        (["lr_policy=exponential", "lr_policy.decay=1.5"], "lr_policy.decay"),
        (["lr_policy=constant", "+lr_policy.decay=0.5"], "lr_policy.decay"),
        (["optimizer.name=lbfgs"], "optimizer.name"),
        (["optimizer.lr=0"], "optimizer.lr"),
        (["optimizer.momentum=1.0"], "optimizer.momentum"),
        (["optimizer.momentum=-0.1"], "optimizer.momentum"),
        (["optimizer.milestones=[130,120]"], "optimizer.milestones"),
        (["topology.name=ring"], "topology.name"),
        (["topology.learners_per_node=0"], "topology.learners_per_node"),
        (["topology.nodes=0"], "topology.nodes"),
        (["topology.nodes=two"], "topology.nodes"),
        (["hardware.bandwidth_Bps=0"], "hardware.bandwidth_Bps"),
        (["hardware.latency_s=-1e-6"], "hardware.latency_s"),
        (["hardware.jitter_cv=-0.1"], "hardware.jitter_cv"),
        (["hardware.ps_jitter_cv=-0.1"], "hardware.ps_jitter_cv"),
        (["optimizer.poly_power=-1"], "optimizer.poly_power"),
        (["optimizer.poly_power=0.5", "optimizer.poly_epochs=0"], "optimizer.poly_epochs"),
        (["hardware.stragglers.fraction=1.5"], "hardware.stragglers.fraction"),
        (["hardware.stragglers.slowdown=0.5"], "hardware.stragglers.slowdown"),
        (["hardware.heavy_tail=1.0"], "hardware.heavy_tail"),
        (["dataset.name=svhn"], "dataset.name"),
        (["dataset=synthetic", "dataset.num_classes=1"], "dataset.num_classes"),
        (["model.name=resnet"], "model.name"),
        (["engine.name=ray"], "engine.name"),
        (["compression.name=zip"], "compression.name"),
        (["trainer.progress=fancy"], "trainer.progress"),
        (["trainer.max_updates=0"], "trainer.max_updates"),
        (["trainer.checkpoint_every=-1"], "trainer.checkpoint_every"),
        (["trainer.stop_after_updates=0"], "trainer.stop_after_updates"),
        (["trainer.save_weights=maybe"], "trainer.save_weights"),
        (["resume=''"], "resume"),
        (["engine=dist", "resume=auto"], "resume"),
        (["protocol=ssp", "lr_policy=nominal_staleness"], "lr_policy"),  # α0/n needs the protocol's n
    ],
)
def test_bad_value_names_its_key(compose_cfg, overrides, key):
    cfg = compose_cfg(*overrides)
    with pytest.raises(ConfigError) as info:
        v.validate(cfg)
    assert info.value.key == key
    line = str(info.value)
    assert line.startswith(f"{key}=") and "allowed" in line and "\n" not in line


@pytest.mark.parametrize(
    "overrides",
    [
        ["protocol=softsync", "protocol.n=4", "learners=4"],  # n = λ is async
        ["protocol=softsync", "protocol.n=1", "learners=1"],
        ["protocol=ssp", "protocol.staleness_bound=0"],  # s = 0 behaves as hardsync
        ["hardware.stragglers.fraction=1.0", "hardware.stragglers.slowdown=1.0"],
        ["optimizer=adagrad"],
        ["optimizer=adam"],
        ["hardware=p775"],
        ["lr_policy=per_gradient"],
        ["lr_policy=exponential"],
        ["lr_policy=dynsgd"],
        ["dataset=synthetic"],
        ["topology=rudra_adv_star"],
        ["logger=none"],
        ["topology.nodes=8", "learners=30"],
        ["trainer.max_updates=1"],
        ["epochs=0.5"],
        ["trainer.checkpoint_every=0"],
        ["trainer.stop_after_updates=1"],
        ["resume=auto"],
    ],
)
def test_boundary_values_are_accepted(compose_cfg, overrides):
    v.validate(compose_cfg(*overrides))


def test_unwritable_output_dir_names_the_key(compose_cfg, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    # a path under a regular file cannot be created, even by root (chmod would not stop root)
    cfg = compose_cfg(f"paths.output_dir={blocker / 'run'}")
    with pytest.raises(ConfigError) as info:
        v.validate(cfg)
    assert info.value.key == "paths.output_dir"
    assert "writable directory" in str(info.value)


def test_check_writable_dir_leaves_nothing_behind(tmp_path):
    target = tmp_path / "new" / "dir"
    assert v.check_writable_dir("k", target) == target
    assert target.is_dir() and list(target.iterdir()) == []


@pytest.mark.parametrize("group", list(v.GROUPS))
def test_an_unknown_key_in_any_group_names_the_allowed_keys(compose_cfg, group):
    cfg = compose_cfg(f"+{group}.zzz_typo=1")
    with pytest.raises(ConfigError) as info:
        v.validate(cfg)
    assert info.value.key == f"{group}.zzz_typo"
    option = cfg[group].get("name", "default")
    for key in v.GROUPS[group].options[option]:
        assert key in info.value.allowed


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["+extra=1"], "extra"),
        (["tags=5"], "tags"),
        (["resume=/no/such/run/dir"], "resume"),
        (["seed=4294967296"], "seed"),
        (["epochs=inf"], "epochs"),
        (["model.hidden=[0]"], "model.hidden"),
        (["model.hidden=wide"], "model.hidden"),
        (["model=alexnet", "model.groups=3"], "model.groups"),
        (["model=cifar_cnn", "model.init=xavier"], "model.init"),
        (["dataset.subset=0"], "dataset.subset"),
        (["dataset.download=maybe"], "dataset.download"),
        (["+dataset.verify=1"], "dataset.verify"),
        (["optimizer.weight_decay=1e39"], "optimizer.weight_decay"),
        (["optimizer.lr=nan"], "optimizer.lr"),
        (["optimizer=adam", "optimizer.betas=[0.9]"], "optimizer.betas"),
        (["optimizer=adagrad", "+optimizer.momentum=0.9"], "optimizer.momentum"),
        (["optimizer.gamma=0"], "optimizer.gamma"),
        (["compression=signsgd", "compression.scale=l2"], "compression.scale"),
        (["compression=qsgd", "compression.error_feedback=1"], "compression.error_feedback"),
        (["hardware.calibrate=1"], "hardware.calibrate"),
        (["+hardware.stragglers.share=0.5"], "hardware.stragglers.share"),
        (["hardware.compute=fast"], "hardware.compute"),
        (["engine=dist", "engine.port=70000"], "engine.port"),
        (["engine=dist", "engine.mode=async"], "engine.mode"),
        (["engine=dist", "engine.timeout_s=0"], "engine.timeout_s"),
        (["engine=dist", "engine.max_learners=300"], "engine.max_learners"),
        (["engine=dist", "engine.learner_delay_s={0: -1}"], "engine.learner_delay_s"),
        (["engine=dist", "engine.learner_delay_s={9: 0.1}"], "engine.learner_delay_s.9"),
        (["engine=dist", "engine.backend=nccl"], "engine.backend"),
        (["engine=dist", "topology=rudra_adv"], "topology.name"),
        (["trainer.deterministic=1"], "trainer.deterministic"),
        (["trainer.num_threads=0"], "trainer.num_threads"),
        (["trainer.checkpoint_every=-1"], "trainer.checkpoint_every"),
        (["trainer.save_weights=yes"], "trainer.save_weights"),
        (["logger.tracking_uri=/tmp/mlruns"], "logger.tracking_uri"),
        (["logger.tracking_uri=sqlite://relative.db"], "logger.tracking_uri"),
        (["logger.lock_timeout_s=0"], "logger.lock_timeout_s"),
        (["logger.run_name=''"], "logger.run_name"),
    ],
)
def test_wrong_type_or_range_in_any_group_names_its_key(compose_cfg, overrides, key):
    with pytest.raises(ConfigError) as info:
        v.validate(compose_cfg(*overrides))
    assert info.value.key == key
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["+optimizer.nesterov=true"],
        ["trainer.batching=loop"],
        ["trainer.gradient_clip_val=0.5"],
        ["trainer.gradient_clip_val=0"],
        ["trainer.checkpoint_every=100", "trainer.save_weights=false"],
        ["resume=auto"],
        ["seed=4294967295"],
        ["+tags.note=baseline"],
        ["+dataset.verify=false"],
        ["dataset=synthetic", "+dataset.noise=0.5"],
        ["model=lenet", "+model.init=caffe"],
        ["optimizer.lr=3.4e38"],
        ["logger.tracking_uri=http://127.0.0.1:5000"],
        ["logger.run_name=mine"],
        ["engine=dist", "engine.learner_delay_s={0: 0.05}"],
    ],
)
def test_declared_optional_keys_and_boundaries_are_accepted(compose_cfg, overrides):
    v.validate(compose_cfg(*overrides))


def test_resume_names_an_existing_run_dir(compose_cfg, tmp_path):
    v.validate(compose_cfg(f"resume={tmp_path}"))


def test_validation_imports_no_torch():
    """The schema declarations are torch-free, so bad input is refused in about a second."""
    import subprocess
    import sys

    code = "import sys, psbench.validate, psbench.cli; print(sorted({'torch', 'pytorch_lightning'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
