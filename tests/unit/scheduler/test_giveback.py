"""The give-back bound (scheduler.giveback): a running job whose binding steps keep
failing is given back after N counted failures or T seconds since the first."""

from __future__ import annotations

from scheduler.giveback import BindFailures


def test_gives_back_on_the_nth_failure_naming_the_step_and_the_error() -> None:
    f = BindFailures(max_attempts=3, max_seconds=600)
    assert f.failed(7, "bind", "HTTP 404", now=0.0) is None
    assert f.failed(7, "bind", "HTTP 404", now=1.0) is None
    give = f.failed(7, "bind", 'pods "p" not found', now=2.0)
    assert give is not None
    assert (give.job_id, give.step, give.reason) == (7, "bind", "BindingFailed")
    assert give.message == (
        "Slurm job 7 given back to Slurm (cancelled, the group queued again): binding the "
        'pods failed 3 times in 2 s: pods "p" not found'
    )
    assert len(f) == 0  # forgotten once given back


def test_gives_back_after_the_time_bound_even_with_few_failures() -> None:
    f = BindFailures(max_attempts=100, max_seconds=60)
    assert f.failed(1, "assign", "node n1 is gone", now=10.0) is None
    give = f.failed(1, "assign", "node n1 is gone", now=70.0)
    assert give is not None
    assert give.reason == "NodeAssignmentFailed"


def test_waiting_on_someone_else_counts_toward_time_only() -> None:
    f = BindFailures(max_attempts=2, max_seconds=30)
    for t in range(5):
        assert f.failed(1, "claims", "claims not created yet", now=float(t), counts=False) is None
    give = f.failed(1, "claims", "claims not created yet", now=31.0, counts=False)
    assert give is not None
    assert give.reason == "ClaimAllocationFailed"


def test_success_resets_the_count_and_jobs_are_counted_apart() -> None:
    f = BindFailures(max_attempts=2, max_seconds=600)
    assert f.failed(1, "link", "409", now=0.0) is None
    f.succeeded(1)
    assert f.failed(1, "link", "409", now=1.0) is None  # counting from zero again
    assert f.failed(2, "link", "409", now=1.0) is None  # another job: its own count
    assert f.failed(1, "link", "409", now=2.0) is not None
