"""A snapshot's job excludes only the nodes Slurm knows (:func:`scheduler.snapshot.known_excluded`):
the translation's own job when Slurm knows every node it excludes (no copy per pod), a copy
without the unknown ones otherwise; the same job either way."""

from __future__ import annotations

from bridge.models import JobSpec
from scheduler.snapshot import known_excluded

SPEC = JobSpec(name="p", min_nodes=1, tasks=1, excluded_nodes=("a", "b"), comment="c")


def test_a_job_whose_excluded_nodes_slurm_knows_is_kept_as_it_is() -> None:
    assert known_excluded(SPEC, {"a", "b", "c"}) is SPEC
    none = SPEC.model_copy(update={"excluded_nodes": ()})
    assert known_excluded(none, set()) is none


def test_a_node_slurm_does_not_know_is_dropped_and_nothing_else_changes() -> None:
    got = known_excluded(SPEC, {"b"})
    assert got.excluded_nodes == ("b",)
    assert got.model_dump(exclude={"excluded_nodes"}) == SPEC.model_dump(exclude={"excluded_nodes"})
    assert SPEC.excluded_nodes == ("a", "b")  # the translation's job is not changed
    assert known_excluded(SPEC, set()).excluded_nodes == ()
