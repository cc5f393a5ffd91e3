"""The scheduler's watch-fed DRA copies: slices follow their node, a claim never goes back
to an older version than one already kept."""

from typing import Any

from scheduler.dra import DraCache


def obj(name: str, rv: str, ns: str = "", **spec: Any) -> dict[str, Any]:
    meta = {"name": name, "resourceVersion": rv, **({"namespace": ns} if ns else {})}
    return {"metadata": meta, "spec": spec}


def test_a_slice_is_found_on_its_node_and_follows_a_change_of_node() -> None:
    c = DraCache()
    c.on_slice_event("ADDED", obj("s1", "1", nodeName="n1"))
    assert [s["metadata"]["name"] for s in c.slices_on("n1")] == ["s1"]
    c.on_slice_event("MODIFIED", obj("s1", "2", nodeName="n2"))
    assert c.slices_on("n1") == []
    assert [s["metadata"]["name"] for s in c.slices_on("n2")] == ["s1"]
    c.on_slice_event("DELETED", obj("s1", "3", nodeName="n2"))
    assert c.slices_on("n2") == []


def test_an_older_claim_event_does_not_undo_a_newer_write() -> None:
    c = DraCache()
    c.on_claim_event("ADDED", obj("c", "5", "ns"))
    c.on_claim_event("MODIFIED", obj("c", "4", "ns"))  # late event, older than kept
    assert c.claims[("ns", "c")]["metadata"]["resourceVersion"] == "5"
    c.on_claim_event("MODIFIED", obj("c", "6", "ns"))
    assert c.claims[("ns", "c")]["metadata"]["resourceVersion"] == "6"
    c.on_claim_event("DELETED", obj("c", "7", "ns"))
    assert ("ns", "c") not in c.claims


def test_device_classes_are_kept_by_name_until_deleted() -> None:
    c = DraCache()
    c.on_class_event("ADDED", obj("gpu.example.com", "1"))
    assert set(c.classes) == {"gpu.example.com"}
    c.on_class_event("DELETED", obj("gpu.example.com", "2"))
    assert c.classes == {}
