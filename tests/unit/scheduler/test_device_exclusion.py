"""A device mismatch never loops (issue #40, deliverable 5): the job given back names the
node, the group's next jobs exclude it (every hetjob component too) while its
ResourceSlices stay as they were, and a change of the slices lifts it."""

from __future__ import annotations

import copy

from bridge.devices.allocation import slices_fingerprint
from bridge.models import JobSpec
from sandbox.controllers import dra_driver
from scheduler.giveback import REASON_DEVICE_MISMATCH, BindFailures
from scheduler.snapshot import with_nodes_excluded

SPEC = JobSpec(name="p", min_nodes=1, tasks=1, excluded_nodes=("a",))


def test_a_mismatch_give_back_names_the_node_and_its_slices_then() -> None:
    slices = dra_driver.mig_slices("n1", 1)
    give = BindFailures(3, 60).give_back_now(
        7, "claims", REASON_DEVICE_MISMATCH, "disagree", node="n1",
        fingerprint=slices_fingerprint(slices),
    )  # fmt: skip
    assert (give.node, give.reason) == ("n1", "SlurmDevicesMismatch")
    assert give.fingerprint == slices_fingerprint(list(reversed(slices)))


def test_the_fingerprint_changes_with_the_devices_not_with_their_order() -> None:
    slices = dra_driver.mig_slices("n1", 1)
    same = slices_fingerprint(list(reversed(slices)))
    assert slices_fingerprint(slices) == same
    changed = copy.deepcopy(slices)
    changed[0]["spec"]["devices"].pop()
    assert slices_fingerprint(changed) != same
    three = (dra_driver.placements("1g.10gb", 19, (0, 1, 2)),)
    assert slices_fingerprint(dra_driver.mig_slices("n1", 1, profiles=three)) != same


def test_excluded_nodes_are_added_once_to_the_job_and_every_hetjob_component() -> None:
    het = SPEC.model_copy(update={"het_components": (SPEC, SPEC.model_copy(update={"name": "w"}))})
    got = with_nodes_excluded(het, ["b", "a"])
    assert [c.excluded_nodes for c in got.components] == [("a", "b")] * 3
    assert with_nodes_excluded(SPEC, []) is SPEC
