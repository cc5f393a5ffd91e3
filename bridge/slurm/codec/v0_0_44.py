"""REST API v0.0.44 (Slurm 25.11+; the version upstream slurm-bridge speaks).

Same shapes as the base for everything we send and read; adds ``/new/node/`` over v0.0.43.
"""

from __future__ import annotations

from typing import ClassVar

from bridge.slurm.codec.base import Codec


class CodecV0044(Codec):
    version: ClassVar[str] = "v0.0.44"
