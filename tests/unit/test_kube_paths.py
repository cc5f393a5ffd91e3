"""A request path's name and namespace are quoted as one segment each; the unquoted fast
path for DNS-1123 names gives exactly what quoting gives, and kobj's direct reads of
name, namespace and uid give what the generic reader gives."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from bridge.kube.resources import EVENTS, NODES, PODS
from bridge.translate import kobj


@given(st.text(max_size=30), st.text(max_size=30))
def test_a_path_segment_is_what_quoting_gives(namespace: str, name: str) -> None:
    ns = quote(namespace, safe="")
    want = f"/api/v1/namespaces/{ns}/pods/{quote(name, safe='')}" if namespace else None
    if want is not None:
        assert PODS.path(namespace, name) == want
    assert NODES.path(None, name) == f"/api/v1/nodes/{quote(name, safe='')}"


def test_usual_names_are_kept_as_they_are() -> None:
    assert (
        PODS.path("team-a", "web-0.x", "binding")
        == "/api/v1/namespaces/team-a/pods/web-0.x/binding"
    )
    assert EVENTS.path("a b", "c/d") == "/api/v1/namespaces/a%20b/events/c%2Fd"


META = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.dictionaries(
        st.sampled_from(["name", "namespace", "uid", "x"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.text(max_size=2))),
    ),
)


@given(st.one_of(st.dictionaries(st.sampled_from(["metadata", "spec"]), META), st.lists(st.none())))
def test_kobj_reads_metadata_text_as_the_generic_reader_does(obj: Any) -> None:
    for key, read in (("name", kobj.name), ("namespace", kobj.namespace), ("uid", kobj.uid)):
        assert read(obj) == kobj.text(obj, "metadata", key)
