"""REST API v0.0.45 (Slurm 26.05).

The job record's ``shared`` is deprecated here ("Ignored ... replaced by 'oversubscribe'
and 'exclusive'") and reads ``[]`` even for an exclusive job; the job description still
takes ``shared: ["none"]`` and honours it. ``job_resources.select_type`` switches to
``CR_*`` names; new job fields ``memory_update_delay``/``margin`` and ``container_type``
are not used by the bridge.
"""

from __future__ import annotations

from typing import ClassVar

from bridge.slurm.codec.base import Codec


class CodecV0045(Codec):
    version: ClassVar[str] = "v0.0.45"
    supports_partition_update: ClassVar[bool] = True
    reports_shared: ClassVar[bool] = False
