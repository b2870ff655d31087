"""The device a run asks Lightning for is one its accelerators take — checked on the CPU, through Lightning's own
``CUDAAccelerator.setup_device`` and torch's own ``torch.cuda.set_device`` argument check (only the driver call
underneath, ``torch._C._cuda_setDevice``, is replaced: it records the index instead of selecting a GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator

from psbench.errors import ConfigError
from psbench.strategy import executor, simulated


@pytest.fixture
def one_gpu(monkeypatch):
    """A machine that says it has one CUDA device, and the devices torch.cuda.set_device was asked to select."""
    selected: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch._C, "_cuda_setDevice", selected.append, raising=False)
    # Lightning asks the device's capability for its TF32 hint: a CPU build has none to give
    monkeypatch.setattr("lightning_fabric.accelerators.cuda._is_ampere_or_later", lambda device=None: False)
    return selected


def _cli_setup(accelerator, protocol="softsync", codecs=None):
    return SimpleNamespace(
        trainer=SimpleNamespace(accelerator=accelerator), protocol=SimpleNamespace(name=protocol), codecs=codecs
    )


@pytest.mark.parametrize("name", ["cuda", "auto"])
def test_the_cli_device_is_one_lightnings_cuda_accelerator_sets(one_gpu, name):
    dev = executor.device(_cli_setup(name))
    CUDAAccelerator().setup_device(dev)  # raised ValueError ("Expected a torch.device with a specified index")
    assert one_gpu == [0] and dev == torch.device("cuda", 0)


def test_the_lightning_api_device_is_one_lightnings_cuda_accelerator_sets(one_gpu):
    dev = simulated.device(CUDAAccelerator(), None)
    CUDAAccelerator().setup_device(dev)
    assert one_gpu == [0] and dev.index == 0


def test_both_doors_name_the_same_device_and_refuse_a_codec_off_the_cpu(one_gpu):
    assert executor.device(_cli_setup("cuda")) == simulated.device(CUDAAccelerator(), None)
    assert executor.device(_cli_setup(None)) == simulated.device(CPUAccelerator(), None) == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"^trainer.accelerator='cuda' is invalid: allowed cpu with a local-step"):
        executor.device(_cli_setup("cuda", protocol="agn"))
    with pytest.raises(ConfigError, match=r"^accelerator='cuda' is invalid: allowed cpu with a codec"):
        simulated.device(CUDAAccelerator(), {"name": "terngrad"})


def test_a_device_this_machine_lacks_is_one_line_naming_what_it_has(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"allowed one of auto, cpu \(no cuda device on this machine\)$"):
        executor.device(_cli_setup("cuda"))
    assert executor.device(_cli_setup("auto")) == torch.device("cpu")


def test_the_lightning_api_takes_the_gpu_the_trainers_devices_flag_names(one_gpu, monkeypatch, tmp_path):
    """``Trainer(accelerator="gpu", devices=[3], strategy=ParameterServerStrategy.simulated(...))`` trains on cuda:3,
    as Lightning's own single-device strategy would: the strategy took the current device (cuda:0) and trained there,
    beside whatever ran on GPU 0. A fake 4-GPU machine, Lightning's real accelerator connector and set_device."""
    import pytorch_lightning as pl

    from psbench import ParameterServerStrategy

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr("lightning_fabric.accelerators.cuda.num_cuda_devices", lambda: 4)
    strategy = ParameterServerStrategy.simulated("async", learners=2, progress="none")
    trainer = pl.Trainer(accelerator="gpu", devices=[3], strategy=strategy, logger=False, default_root_dir=tmp_path)
    strategy._lightning_module = SimpleNamespace(_trainer=trainer)  # what connect(model) leaves, for setup
    strategy.setup_environment()
    assert strategy.root_device == torch.device("cuda", 3) and one_gpu == [3]
    # devices="auto" (the default) names all four: the current device stays, as a sweep worker selected it
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    strategy = ParameterServerStrategy.simulated("async", learners=2, progress="none")
    trainer = pl.Trainer(accelerator="gpu", strategy=strategy, logger=False, default_root_dir=tmp_path)
    strategy._lightning_module = SimpleNamespace(_trainer=trainer)
    strategy.setup_environment()
    assert strategy.root_device == torch.device("cuda", 2) and one_gpu[-1] == 2
