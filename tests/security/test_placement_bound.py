"""Issue #39, deliverable 6 (the class: tenant text on the scheduler's loop). A pod's
placement (nodeSelector, node affinity, tolerations) is tested against every node. Its
values and tolerations were scanned per node and per taint: one pod of 50,000 tolerations
and a NotIn of 100,000 values held the loop 89 s against 1,000 nodes. Now they are read
once into sets, whatever their number, and the requirements tested per node are at most
PLACEMENT_REQUIREMENTS_MAX (more is refused naming the field)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.translate.placement import (
    PLACEMENT_REQUIREMENTS_MAX,
    _Tolerations,
    excluded_nodes,
    tolerates,
)


class Counted(list[Any]):
    """A list that counts how often it is read through."""

    reads = 0

    def __iter__(self) -> Any:
        type(self).reads += 1
        return super().__iter__()


class Values(Counted):
    reads = 0


class Tolerations(Counted):
    reads = 0


def nodes(n: int) -> list[dict[str, Any]]:
    taint = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    return [
        {
            "metadata": {"name": f"n{i}", "labels": {"zone": f"z{i % 10}"}},
            "spec": {"taints": [taint]},
        }
        for i in range(n)
    ]


def affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    terms = [{"matchExpressions": list(expressions)}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def test_a_pods_values_and_tolerations_are_read_once_however_many_nodes() -> None:
    values = Values(f"v{i}" for i in range(1000))
    tolerations = Tolerations([{"key": f"k{i}", "operator": "Exists"} for i in range(1000)])
    tolerations.append({"key": "gpu", "operator": "Exists"})
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "tolerations": tolerations,
            "affinity": affinity({"key": "zone", "operator": "NotIn", "values": values}),
        },
    }
    assert excluded_nodes([pod], nodes(200), obj="p") == ()
    assert (Values.reads, Tolerations.reads) == (1, 1)  # not once per node, per taint


def test_more_node_requirements_than_tested_per_node_are_refused_naming_the_field() -> None:
    expressions = [
        {"key": f"k{i}", "operator": "DoesNotExist"} for i in range(PLACEMENT_REQUIREMENTS_MAX)
    ]
    spec: dict[str, Any] = {
        "nodeSelector": {"zone": "z1"},
        "affinity": affinity(*expressions),
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
    }
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    with pytest.raises(InvalidInput) as e:
        excluded_nodes([pod], nodes(3), obj="Pod ns/p")
    field = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    assert field in str(e.value)
    assert f"{PLACEMENT_REQUIREMENTS_MAX + 1} node requirements" in str(e.value)
    spec.pop("nodeSelector")  # at the bound: tested, and every node fits
    assert excluded_nodes([pod], nodes(10), obj="Pod ns/p") == ()


_WORD = st.sampled_from(["", "a", "b"])
_TOLERATION = st.fixed_dictionaries(
    {},
    optional={
        "key": _WORD,
        "value": _WORD,
        "effect": st.sampled_from(["", "NoSchedule", "NoExecute"]),
        "operator": st.sampled_from(["", "Exists", "Equal", "Other"]),
    },
)
_TAINT = st.fixed_dictionaries(
    {"key": _WORD, "value": _WORD, "effect": st.sampled_from(["NoSchedule", "NoExecute"])}
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOLERATION, max_size=4), _TAINT)
def test_indexed_tolerations_tolerate_exactly_what_kubernetes_rule_does(
    tolerations: list[dict[str, str]], taint: dict[str, str]
) -> None:
    assert _Tolerations(tolerations).tolerate(taint) == tolerates(tolerations, taint)
