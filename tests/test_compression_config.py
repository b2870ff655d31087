"""The ``compression`` config group: every option validates and builds; bad input names the key; train() wiring."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from psbench import compression, validate
from psbench.cli import CONF_DIR
from psbench.errors import ConfigError
from psbench.train import train

CONF = CONF_DIR / "compression"


def test_option_files_codecs_and_validate_agree():
    files = {p.stem for p in CONF.glob("*.yaml")}
    declared = set(validate.GROUPS["compression"].options)
    assert files == set(compression.COMPRESSIONS) == set(compression.CODECS) == declared
    for name in compression.COMPRESSIONS:
        opts = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
        assert opts["name"] == name
        compression.build_codec(name, opts)


@pytest.mark.parametrize("name", ["qsgd", "terngrad"])
def test_options_validate(compose_cfg, name):
    validate.validate(compose_cfg(f"compression={name}"))


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (("compression.name=bogus",), "compression.name"),
        (("compression=terngrad", "compression.clip=0"), "compression.clip"),
        (("compression=terngrad", "compression.clip=-1"), "compression.clip"),
        (("compression=terngrad", "compression.wire=4bit"), "compression.wire"),
        (("compression=qsgd", "compression.levels=0"), "compression.levels"),
        (("compression=topk", "compression.k=0"), "compression.k"),
        (("compression=randomk", "compression.k=1.5"), "compression.k"),
        (("compression=terngrad", "compression.localize=maybe"), "compression.localize"),
        (("compression=none", "+compression.k=0.1"), "compression.k"),
        (("compression=terngrad", "protocol=downpour"), "compression.name"),
        (("compression=terngrad", "engine=dist"), "compression.share_scalers"),  # hardsync c = 4 on real processes
    ],
)
def test_bad_compression_config_names_the_key(compose_cfg, overrides, key):
    with pytest.raises(ConfigError) as e:
        validate.validate(compose_cfg(*overrides))
    assert e.value.key == key and key in str(e.value)


def test_terngrad_clip_null_is_noclip(compose_cfg):
    cfg = compose_cfg("compression=terngrad", "compression.clip=null")
    validate.validate(cfg)
    assert compression.build_codec("terngrad", OmegaConf.to_container(cfg.compression)).clip is None


def test_train_counts_exact_bytes_of_the_codec(compose_cfg, tmp_path):
    cfg = compose_cfg(
        "trainer.progress=none",
        "logger=none",
        "learners=4",
        "batch_size=16",
        "epochs=1",
        "trainer.max_updates=6",
        "compression=terngrad",
    )
    s = train(cfg, tmp_path)
    assert s["compression"] == "terngrad" and s["status"] == "finished"
    # the simulator's count (payload + 8-byte timestamp per push) is the strategy's measured payloads
    assert s["bytes_pushed"] == s["bytes_pushed_measured"] + 8 * s["gradients"]
    # localized pulls carry Σ of 4 ternary codes, integers in [-4, 4]: 4 bits per element vs 2 in a push
    per_pull = (s["bytes_pulled"] - 8 * s["pulls_skipped"]) / (s["pulls"] - s["pulls_skipped"])
    per_push = s["bytes_pushed"] / s["gradients"]
    assert per_pull == pytest.approx(2 * per_push, rel=0.05)
