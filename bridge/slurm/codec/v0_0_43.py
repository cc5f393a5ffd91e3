"""REST API v0.0.43 (Slurm 25.05+; served by 26.05).

Differs from the shared base only in what the server offers: no ``/new/node/`` (dynamic
external nodes need v0.0.44+), and ``EXTERNAL`` is missing from its node-state enum
(26.05 still sends it; decoding is unchanged). ``step_id``/``submit_line`` are absent
from its job record; we read neither.
"""

from __future__ import annotations

from typing import ClassVar

from bridge.slurm.codec.base import Codec


class CodecV0043(Codec):
    version: ClassVar[str] = "v0.0.43"
    supports_new_node: ClassVar[bool] = False
