"""The NVIDIA MIG table (bridge/devices/mig.py ``NVIDIA_MIG_GPUS``): each profile carries the
compute and memory slices it consumes of its GPU's, as NVIDIA's MIG user guide lists
them; the benchmark's counter check (tests/bench/fit.py ``--mig``) sums these."""

from __future__ import annotations

import pytest

from bridge.devices.mig import NVIDIA_MIG_GPUS, NVIDIA_MIG_PROFILES, nvidia_mig_gpu
from bridge.errors import ConfigError

# NVIDIA's "Number of Instances Available" per profile (MIG user guide).
INSTANCES = {
    "A30-24GB": {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1},
    "A100-40GB": {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1},
    "A100-80GB": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1},
    "H200-141GB": {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1},
}


def test_how_many_instances_of_a_profile_fit_follows_from_its_counters() -> None:
    for model, counts in INSTANCES.items():
        gpu = nvidia_mig_gpu(model)
        for name, n in counts.items():
            p = gpu.profile(name)
            assert min(gpu.compute // p.compute, gpu.memory // p.memory) == n, (model, name)


def test_every_model_has_a_whole_gpu_profile_and_no_profile_exceeds_its_gpu() -> None:
    for gpu in NVIDIA_MIG_GPUS:
        assert max(p.compute for p in gpu.profiles) == gpu.compute, gpu.model
        assert max(p.memory for p in gpu.profiles) == gpu.memory, gpu.model
        for p in gpu.profiles:
            assert 1 <= p.compute <= gpu.compute
            assert 1 <= p.memory <= gpu.memory
            assert p.name.startswith(f"{p.compute}g."), (gpu.model, p.name)


def test_a_profile_name_may_mean_different_counters_on_different_models() -> None:
    assert nvidia_mig_gpu("A100-80GB").profile("1g.10gb").memory == 1
    assert nvidia_mig_gpu("A100-40GB").profile("1g.10gb").memory == 2


def test_the_profile_names_are_every_models_once_each() -> None:
    names = [p.name for g in NVIDIA_MIG_GPUS for p in g.profiles]
    assert sorted(NVIDIA_MIG_PROFILES) == sorted(set(names))
    assert len(NVIDIA_MIG_PROFILES) == len(set(NVIDIA_MIG_PROFILES))


def test_an_unknown_model_or_profile_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"'V100' is not a MIG GPU model \(A30-24GB"):
        nvidia_mig_gpu("V100")
    with pytest.raises(ConfigError, match=r"A30-24GB has no MIG profile '1g.10gb' \(1g.6gb"):
        nvidia_mig_gpu("A30-24GB").profile("1g.10gb")
