"""The hetjob rule, "the state of a hetjob is its first ended component", lives once on
the Slurm job model (bridge.slurm.models.het_shown): the scheduler's view of a hetjob,
the controller's poll and its job view all tell the state of the same component."""

from __future__ import annotations

import itertools

import pytest

from bridge.slurm.models import JobState, SlurmJob, het_shown
from controller.poller import _het_state, job_view
from scheduler.decide import JobPart, het_state

STATES = ("RUNNING", "PENDING", "FAILED", "CANCELLED", "UNKNOWN", "SUSPENDED")


def _job(states: tuple[str, ...]) -> SlurmJob:
    comps = [
        SlurmJob(
            job_id=10 + i, name="g", state=JobState(primary=s), het_job_id=10, het_job_offset=i
        )
        for i, s in enumerate(states)
    ]
    return comps[0].model_copy(update={"het_components": tuple(comps[1:])})


@pytest.mark.parametrize("states", list(itertools.product(STATES, repeat=3)))
def test_every_view_of_a_hetjob_tells_the_state_of_the_same_component(
    states: tuple[str, str, str],
) -> None:
    shown = het_shown(states)
    parts = tuple(JobPart(10 + i, i, s) for i, s in enumerate(states))
    assert het_state(parts).offset == shown
    polled = {10 + i: JobState(primary=s) for i, s in enumerate(states)}
    told = _het_state(10, polled, {10: (11, 12)})
    view = job_view(_job(states))
    if not polled[10 + shown].active:  # the gang ends with that component
        assert told == polled[10 + shown]
        assert view.state == states[shown]
        assert view.component == f"10+{shown}"
    else:
        assert told == polled[10]
        assert view.component == ""


def test_a_component_in_a_state_slurm_does_not_name_ends_the_gang_first() -> None:
    # UNKNOWN (no base state Slurm names) is not active: the controller ends the gang on
    # it, so the scheduler shows it too, not a later FAILED one
    assert het_shown(("RUNNING", "UNKNOWN", "FAILED")) == 1
    assert (
        het_state(
            tuple(JobPart(10 + i, i, s) for i, s in enumerate(("RUNNING", "UNKNOWN", "FAILED")))
        ).offset
        == 1
    )
