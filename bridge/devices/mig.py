"""NVIDIA's MIG table (pure data): the MIG-capable GPU models, the profiles cut from each
and the counters every profile's instance consumes of its GPU's (NVIDIA's MIG user guide,
"Supported MIG Profiles"). The config's default ``gresMapping`` names its profiles
(:data:`bridge.config.DEFAULT_GRES_MAPPING`); the sandbox's DRA driver publishes its
counters, the MIG benchmarks and tests enumerate its layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.errors import ConfigError


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one GPU model and the counters its instance consumes of the
    GPU's: compute slices (GPCs, each 1/7 of the SMs; 1/4 on A30) and memory slices (1/8
    of the memory; 1/4 on A30); where it may be placed (``starts``: the first memory slice
    of each placement, which spans ``memory`` slices) and NVML's GPU-instance profile id.
    NVIDIA's MIG user guide, "Supported MIG Profiles" (``nvidia-smi mig -lgipp``)."""

    name: str
    compute: int
    memory: int
    starts: tuple[int, ...] = (0,)
    profile_id: int = 0

    def placements(self) -> tuple[tuple[int, ...], ...]:
        """The memory slices of each placement: ``((0,), (1,), ...)`` for a 1g."""
        return tuple(tuple(range(s, s + self.memory)) for s in self.starts)


@dataclass(frozen=True)
class MigGpu:
    """A MIG-capable GPU model: its counters and the profiles cut from them."""

    model: str
    compute: int
    memory: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile:
        """``name``'s counters on this model (ConfigError naming it when it has none)."""
        for p in self.profiles:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles)
        raise ConfigError("mig_profile", f"{self.model} has no MIG profile {name!r} ({known})")


_P = tuple[str, int, int, tuple[int, ...], int]


def _gpu(model: str, compute: int, memory: int, *profiles: _P) -> MigGpu:
    return MigGpu(model, compute, memory, tuple(MigProfile(*p) for p in profiles))


def _seven(
    model: str, one: str, one_double: str, two: str, three: str, four: str, seven: str
) -> MigGpu:
    """A GPU of 7 compute and 8 memory slices (A100, H100, H200, B200): the same
    placements on every one of them, the names after its memory."""
    return _gpu(
        model, 7, 8,
        (one, 1, 1, (0, 1, 2, 3, 4, 5, 6), 19),
        (one_double, 1, 2, (0, 2, 4, 6), 15),
        (two, 2, 2, (0, 2, 4), 14),
        (three, 3, 4, (0, 4), 9),
        (four, 4, 4, (0,), 5),
        (seven, 7, 8, (0,), 0),
    )  # fmt: skip


# NVIDIA's MIG-capable GPUs as the device plugin's mixed strategy names their profiles
# (nvidia.com/mig-<profile>), each profile with the (compute, memory) slices it takes of
# the GPU's, its placements (first memory slice) and GPU-instance profile id. A name can
# mean different counters on different models (1g.10gb is 1/8 of an 80 GB GPU's memory,
# 2/8 of a 40 GB one's). "+me" variants are left to gresMapping.
NVIDIA_MIG_GPUS: tuple[MigGpu, ...] = (
    _gpu("A30-24GB", 4, 4, ("1g.6gb", 1, 1, (0, 1, 2, 3), 14), ("2g.12gb", 2, 2, (0, 2), 5),
         ("4g.24gb", 4, 4, (0,), 0)),
    _seven("A100-40GB", "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    _seven("A100-80GB", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    _seven("H100-80GB", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    _seven("H100-94GB", "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    _seven("H100-96GB", "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    _seven("H200-141GB", "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    _seven("B200-180GB", "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
)  # fmt: skip
# Every profile name of those models, once, in table order.
NVIDIA_MIG_PROFILES: tuple[str, ...] = tuple(
    dict.fromkeys(p.name for g in NVIDIA_MIG_GPUS for p in g.profiles)
)


def nvidia_mig_gpu(model: str) -> MigGpu:
    """The MIG table's GPU ``model`` (ConfigError naming the known ones otherwise)."""
    for g in NVIDIA_MIG_GPUS:
        if g.model == model:
            return g
    known = ", ".join(g.model for g in NVIDIA_MIG_GPUS)
    raise ConfigError("mig_gpu", f"{model!r} is not a MIG GPU model ({known})")
