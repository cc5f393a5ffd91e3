"""The Slurm client the components use: async, over slurmrestd's REST API (v0.0.43,
v0.0.44, v0.0.45).

:class:`SlurmClient` is the request path (:mod:`bridge.slurm.api`: session, JWT from
:mod:`bridge.slurm.token`, TLS from :mod:`bridge.slurm.tls`, timeouts, error
classification, retries of idempotent calls, API version negotiation) with the verbs:
reads (:mod:`bridge.slurm.fetching`), submit and allocate, never retried
(:mod:`bridge.slurm.submitting`), and the other writes (:mod:`bridge.slurm.updating`).
"""

from __future__ import annotations

from bridge.slurm.submitting import SlurmSubmitting
from bridge.slurm.updating import SlurmUpdating


class SlurmClient(SlurmUpdating, SlurmSubmitting):
    """slurmrestd client. Not thread-safe; safe to share between tasks of one loop.

    Build it with :meth:`from_config`; use it as an async context manager.
    """


__all__ = ["SlurmClient"]
