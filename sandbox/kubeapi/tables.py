"""meta.k8s.io/v1 forms of a list: Table output, what ``kubectl get`` asks for
(``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), and PartialObjectMetadataList,
what client-go's metadata informers ask for (``as=PartialObjectMetadataList``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sandbox.kubeapi.registry import ResourceDef

Obj = dict[str, Any]


def _col(name: str, type_: str = "string", priority: int = 0, fmt: str = "") -> Obj:
    c: Obj = {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}
    return c


def _age(obj: Obj, now: datetime) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=now.tzinfo)
    except ValueError:
        return "<unknown>"
    s = max(int((now - then).total_seconds()), 0)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _pod_row(p: Obj) -> list[Any]:
    spec, status = p.get("spec") or {}, p.get("status") or {}
    cs = status.get("containerStatuses") or []
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in cs)
    phase = status.get("reason") or status.get("phase") or "Unknown"
    for c in cs:
        state = c.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            phase = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason"):
            phase = state["terminated"]["reason"]
    if (p.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        restarts,
        None,
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _node_row(n: Obj) -> list[Any]:
    conds = (n.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    st = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (n.get("spec") or {}).get("unschedulable"):
        st += ",SchedulingDisabled"
    roles = sorted(
        k.split("/", 1)[1]
        for k in ((n.get("metadata") or {}).get("labels") or {})
        if k.startswith("node-role.kubernetes.io/")
    )
    ver = ((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [st, ",".join(roles) or "<none>", None, ver]


def _jsonpath(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def table(
    rd: ResourceDef,
    objs: list[Obj],
    now: datetime,
    list_meta: Obj | None,
    include_object: str = "Metadata",
) -> Obj:
    """A Table for ``objs``; the AGE cell (``None`` in the row builders) is filled here."""
    name = _col("Name", fmt="name")
    age = _col("Age")
    builder: Callable[[Obj], list[Any]]
    if rd.key == ("", "pods"):
        cols = [
            name,
            _col("Ready"),
            _col("Status"),
            _col("Restarts", "string"),
            age,
            _col("IP", priority=1),
            _col("Node", priority=1),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ]
        builder = _pod_row
    elif rd.key == ("", "nodes"):
        cols = [name, _col("Status"), _col("Roles"), age, _col("Version")]
        builder = _node_row
    elif rd.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        cols = [name, _col("Created At", fmt="date-time")]

        def builder_crd_def(o: Obj) -> list[Any]:
            return [(o.get("metadata") or {}).get("creationTimestamp", "")]

        builder = builder_crd_def
    elif rd.key == ("", "namespaces"):
        cols = [name, _col("Status"), age]

        def builder_ns(o: Obj) -> list[Any]:
            return [(o.get("status") or {}).get("phase", ""), None]

        builder = builder_ns
    elif rd.columns:
        extra = [c for c in rd.columns if c.get("name", "").lower() != "age"]
        cols = (
            [name]
            + [_col(c["name"], c.get("type", "string"), c.get("priority", 0)) for c in extra]
            + [age]
        )

        def builder_crd(o: Obj) -> list[Any]:
            return [*(_jsonpath(o, c.get("jsonPath", "")) for c in extra), None]

        builder = builder_crd
    else:
        cols = [name, age]

        def builder_plain(o: Obj) -> list[Any]:
            return [None]

        builder = builder_plain

    rows = []
    for o in objs:
        cells = [o["metadata"]["name"], *builder(o)]
        cells = [_age(o, now) if c is None else c for c in cells]
        row: Obj = {"cells": cells}
        if include_object == "Object":
            row["object"] = o
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata") or {},
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta or {}),
        "columnDefinitions": cols,
        "rows": rows,
    }


def wants_table(accept: str) -> bool:
    """True when the first acceptable media type is a meta.k8s.io Table."""
    return _wants(accept, "Table")


def wants_metadata_list(accept: str) -> bool:
    """True when the first acceptable media type is a meta.k8s.io PartialObjectMetadataList
    (client-go's metadata informers: the objects' metadata only)."""
    return _wants(accept, "PartialObjectMetadataList")


def _wants(accept: str, kind: str) -> bool:
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")[1:]}
        if f"as={kind}" in params and "g=meta.k8s.io" in params:
            return True
        if part.strip().startswith("application/json") and "as=" not in part:
            return False
    return False


def metadata_list(lst: Obj) -> Obj:
    """A list answer as kube-apiserver's PartialObjectMetadataList: each item's metadata
    only, with the list's own metadata (resourceVersion, continue)."""
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": lst["metadata"],
        "items": [
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata") or {},
            }
            for o in lst["items"]
        ],
    }
