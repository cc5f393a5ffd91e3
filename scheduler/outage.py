"""Whether slurmrestd answers: the scheduler's view of a Slurm outage.

While Slurm cannot be reached, nothing that needs Slurm is attempted (no blind submit
whose answer could be lost); pending pods say so instead of showing a stale Slurm reason:
``PodScheduled=False``, message ``Slurm REST API unreachable: <what failed>``. The text is
the error's own (endpoint, HTTP status, the exception type: never a credential).

This class only records; the cycle (:mod:`scheduler.cycle`) acts on the transitions it
reports: going down re-queues every group (so each pending pod learns of the outage),
coming back (a ``GET /ping/`` per tick of the poll loop while down,
:mod:`scheduler.polling`) re-queues every group with its backoff forgotten (so recovery
does not wait for a long retry delay built up during the outage). The decide step reads
:attr:`SlurmReachability.message` from the snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.errors import SlurmUnavailable

OUTAGE_PREFIX = "Slurm REST API unreachable: "


@dataclass
class SlurmReachability:
    down: SlurmUnavailable | None = None
    outages: int = 0  # how many times Slurm went away (logged with each new outage)

    @property
    def message(self) -> str:
        return f"{OUTAGE_PREFIX}{self.down}" if self.down is not None else ""

    def failed(self, error: SlurmUnavailable) -> bool:
        """Record a failed call; True when this starts an outage. The first error of an
        outage is kept, so the pods' message (and event) is written once per outage."""
        if self.down is not None:
            return False
        self.down = error
        self.outages += 1
        return True

    def answered(self) -> bool:
        """Record an answer from Slurm; True when this ends an outage."""
        ended = self.down is not None
        self.down = None
        return ended
