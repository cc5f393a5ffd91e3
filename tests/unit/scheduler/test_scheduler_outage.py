"""SlurmReachability: one outage = one message, transitions reported once."""

from __future__ import annotations

from bridge.errors import SlurmUnavailable
from scheduler.outage import OUTAGE_PREFIX, SlurmReachability


def _err(endpoint: str) -> SlurmUnavailable:
    return SlurmUnavailable(
        f"{endpoint}: cannot reach slurmrestd: ClientConnectorError", endpoint=endpoint
    )


def test_first_failure_starts_the_outage_and_later_ones_keep_its_message() -> None:
    r = SlurmReachability()
    assert r.message == ""
    assert r.failed(_err("jobs_state")) is True
    first = r.message
    assert first.startswith(OUTAGE_PREFIX)
    assert "jobs_state" in first
    assert r.failed(_err("ping")) is False
    assert r.message == first  # stable: pods are written (and evented) once per outage
    assert r.outages == 1


def test_an_answer_ends_the_outage_once_and_a_new_failure_starts_another() -> None:
    r = SlurmReachability()
    assert r.answered() is False  # nothing to end
    r.failed(_err("job_submit"))
    assert r.answered() is True
    assert r.answered() is False
    assert r.down is None
    assert r.message == ""
    assert r.failed(_err("job_get")) is True
    assert r.outages == 2
