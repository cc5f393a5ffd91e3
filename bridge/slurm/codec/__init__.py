"""Pure, per-version codecs for slurmrestd (no I/O: import-linter enforces it)."""

from __future__ import annotations

from bridge.errors import ConfigError
from bridge.slurm.codec.base import Codec
from bridge.slurm.codec.v0_0_43 import CodecV0043
from bridge.slurm.codec.v0_0_44 import CodecV0044
from bridge.slurm.codec.v0_0_45 import CodecV0045

# Newest first: "auto" picks the first one the server serves.
CODECS: tuple[type[Codec], ...] = (CodecV0045, CodecV0044, CodecV0043)
SUPPORTED_VERSIONS = tuple(c.version for c in CODECS)


def codec_for(version: str) -> Codec:
    """The codec of one REST API version, or ConfigError naming slurmApiVersion."""
    for cls in CODECS:
        if cls.version == version:
            return cls()
    raise ConfigError("slurmApiVersion", f"unsupported {version!r}; know {SUPPORTED_VERSIONS}")


__all__ = ["CODECS", "SUPPORTED_VERSIONS", "Codec", "codec_for"]
