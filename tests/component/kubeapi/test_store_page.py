"""Store.page: one page of a list, in key order, copied; the rest only counted."""

from __future__ import annotations

from sandbox.kubeapi.store import Store

KEY = ("", "configmaps")


def filled() -> Store:
    store = Store()
    for ns in ("a", "b"):
        for i in range(4):
            obj = {"metadata": {"namespace": ns, "name": f"cm-{i}"}, "data": {"i": str(i)}}
            store.put(KEY, obj, created=True)
    return store


def test_a_page_is_the_next_objects_in_key_order_and_counts_the_rest() -> None:
    store = filled()
    items, more = store.page(KEY, None, lambda o: True, after=("a", "cm-2"), limit=3)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items] == [
        ("a", "cm-3"),
        ("b", "cm-0"),
        ("b", "cm-1"),
    ]
    assert more == 2


def test_a_page_filters_by_namespace_and_predicate_and_copies() -> None:
    store = filled()
    items, more = store.page(KEY, "b", lambda o: o["data"]["i"] in ("1", "3"))
    assert [o["metadata"]["name"] for o in items] == ["cm-1", "cm-3"]
    assert more == 0
    items[0]["data"]["i"] = "changed"
    assert store.get(KEY, "b", "cm-1") == {
        "metadata": {"namespace": "b", "name": "cm-1", "resourceVersion": "6"},
        "data": {"i": "1"},
    }


def test_pages_see_objects_added_and_removed_between_them() -> None:
    # the keys' order is kept between pages and redone when one is added or removed
    store = filled()
    first, _ = store.page(KEY, None, lambda o: True, limit=2)
    assert [o["metadata"]["name"] for o in first] == ["cm-0", "cm-1"]
    store.put(KEY, {"metadata": {"namespace": "a", "name": "cm-10"}}, created=True)
    store.remove(KEY, "a", "cm-2")
    rest, more = store.page(KEY, "a", lambda o: True, after=("a", "cm-1"))
    assert [o["metadata"]["name"] for o in rest] == ["cm-10", "cm-3"]
    assert more == 0
    assert store.page(KEY, "c", lambda o: True) == ([], 0)  # past every namespace
