"""excluded_nodes: the nodes some pod cannot use, by Slurm name; never required_nodes."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.translate.placement import NodeSet, excluded_nodes, pod_fits_node, slurm_node_name
from bridge.wellknown import LABEL_SLURM_NODENAME


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
    }


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def affinity(*terms: Any) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


GPU = node("gpu", {"type": "gpu", "cores": "64"})
CPU = node("cpu", {"type": "cpu", "cores": "8"})
TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("p", "n", "fits"),
    [
        pytest.param(pod(), CPU, True, id="no-constraints"),
        pytest.param(pod(), node("x", unschedulable=True), False, id="cordoned"),
        pytest.param(pod(nodeSelector={"type": "gpu"}), GPU, True, id="selector-match"),
        pytest.param(pod(nodeSelector={"type": "gpu"}), CPU, False, id="selector-mismatch"),
        pytest.param(pod(affinity=affinity(expr("type", "In", "gpu"))), GPU, True, id="in"),
        pytest.param(pod(affinity=affinity(expr("type", "NotIn", "gpu"))), GPU, False, id="notin"),
        pytest.param(pod(affinity=affinity(expr("type", "Exists"))), CPU, True, id="exists"),
        pytest.param(
            pod(affinity=affinity(expr("type", "DoesNotExist"))), CPU, False, id="does-not-exist"
        ),
        pytest.param(pod(affinity=affinity(expr("cores", "Gt", "16"))), GPU, True, id="gt"),
        pytest.param(pod(affinity=affinity(expr("cores", "Lt", "16"))), GPU, False, id="lt"),
        pytest.param(
            pod(affinity=affinity(expr("type", "Gt", "1"))), GPU, False, id="gt-non-integer-label"
        ),
        pytest.param(
            pod(affinity=affinity(expr("type", "In", "x"), expr("type", "In", "cpu"))),
            CPU,
            True,
            id="terms-are-ored",
        ),
        pytest.param(
            pod(
                affinity=affinity(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu"]}]}
                )
            ),
            CPU,
            True,
            id="match-fields-name",
        ),
        pytest.param(pod(affinity=affinity({})), CPU, False, id="empty-term-matches-nothing"),
        pytest.param(pod(), node("t", taints=[TAINT]), False, id="untolerated-taint"),
        pytest.param(
            pod(),
            node(
                "t",
                taints=[
                    {
                        "key": "slinky.slurm.net/managed-node",
                        "value": "slurm-bridge-scheduler",
                        "effect": "NoExecute",
                    }
                ],
            ),
            True,
            id="bridge-managed-node-taint-counts-as-tolerated",
        ),
        pytest.param(
            pod(),
            node("t", taints=[{**TAINT, "effect": "PreferNoSchedule"}]),
            True,
            id="prefer-no-schedule-ignored",
        ),
        pytest.param(
            pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml"}]),
            node("t", taints=[TAINT]),
            True,
            id="tolerated-equal",
        ),
        pytest.param(
            pod(tolerations=[{"key": "dedicated", "value": "other"}]),
            node("t", taints=[TAINT]),
            False,
            id="wrong-value",
        ),
        pytest.param(
            pod(tolerations=[{"operator": "Exists"}]),
            node("t", taints=[TAINT]),
            True,
            id="empty-key-exists-tolerates-all",
        ),
        pytest.param(
            pod(tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]),
            node("t", taints=[TAINT]),
            False,
            id="effect-must-match",
        ),
    ],
)
def test_pod_fits_node(p: dict[str, Any], n: dict[str, Any], fits: bool) -> None:
    assert pod_fits_node(p, n) is fits


def test_excluded_nodes_use_slurm_names_sorted() -> None:
    nodes = [node("k-b", {LABEL_SLURM_NODENAME: "s-b"}), node("k-a"), GPU]
    got = excluded_nodes([pod(nodeSelector={"type": "gpu"})], nodes, obj="Pod ns/p")
    assert got == ("k-a", "s-b")
    assert slurm_node_name(nodes[0]) == "s-b"


def test_a_node_is_excluded_when_any_pod_of_the_group_cannot_use_it() -> None:
    pods = [pod(), pod(nodeSelector={"type": "gpu"})]
    assert excluded_nodes(pods, [GPU, CPU], obj="g") == ("cpu",)


def test_every_node_excluded_is_an_error_with_a_reason() -> None:
    with pytest.raises(InvalidInput, match="no node fits") as e:
        excluded_nodes([pod(nodeSelector={"type": "tpu"})], [GPU, CPU], obj="PodGroup ns/g")
    assert e.value.obj == "PodGroup ns/g"


def test_no_known_nodes_excludes_nothing() -> None:
    assert excluded_nodes([pod()], [], obj="g") == ()


# NodeSet: excluded_nodes memoized per placement, dropped when a node's placement changes.
def _taint(key: str) -> dict[str, Any]:
    return {"key": key, "value": "x", "effect": "NoSchedule"}


def test_node_set_gives_what_excluded_nodes_gives_as_nodes_change() -> None:
    gpu = pod(nodeSelector={"gpu": "yes"})
    plain = pod()
    ns = NodeSet([node("a", labels={"gpu": "yes"}), node("b"), node("c")])

    def outcome(f: Any, *args: Any) -> Any:
        try:
            return f(*args, obj="x")
        except InvalidInput as e:
            return str(e)

    def check() -> None:
        for p in (gpu, plain):
            want = outcome(excluded_nodes, [p], list(ns.values()))
            assert outcome(ns.excluded, [p]) == want
            assert outcome(ns.excluded, [p, p]) == want  # asked again: the memo

    check()
    ns.put(node("b", labels={"gpu": "yes"}))  # a label
    check()
    ns.put(node("c", taints=[_taint("dedicated")]))  # a taint
    check()
    ns.put(node("a", labels={"gpu": "yes"}, unschedulable=True))  # cordoned
    check()
    ns.remove("b")
    check()
    ns.put(node("d", labels={LABEL_SLURM_NODENAME: "slurm-d", "gpu": "yes"}))
    check()
    assert ns.to_kube() == {"a": "a", "c": "c", "slurm-d": "d"}
    assert len(ns) == 3


def test_node_set_raises_for_each_group_when_no_node_fits() -> None:
    ns = NodeSet([node("a"), node("b")])
    for obj in ("Pod ns/one", "Pod ns/two"):
        with pytest.raises(InvalidInput) as e:
            ns.excluded([pod(nodeSelector={"gpu": "yes"})], obj=obj)
        assert e.value.obj == obj
