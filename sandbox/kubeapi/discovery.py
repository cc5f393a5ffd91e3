"""Discovery (/api, /apis, /api/v1, /apis/{g}/{v}, /version) and a minimal OpenAPI v2.

Only the legacy (unaggregated) discovery is served: kubectl asks for the aggregated form
first, gets plain ``application/json`` back and falls back, as it does against old servers.
The OpenAPI document declares each path's verbs with the ``fieldValidation`` parameter (so
kubectl uses server-side field validation) and each kind's
``x-kubernetes-group-version-kind``; schemas are open objects.
"""

from __future__ import annotations

from typing import Any

from sandbox.kubeapi.registry import Registry, ResourceDef

_PATCH = {"1.36": "1.36.2", "1.37": "1.37.0"}  # the release each --kube-version answers as
VERSION_INFO = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def version_info(reg: Registry) -> dict[str, Any]:
    """/version of the Kubernetes release the registry serves."""
    release = _PATCH[reg.kube_version]
    minor = release.split(".")[1]
    return {**VERSION_INFO, "minor": minor, "gitVersion": f"v{release}-sandbox"}


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    }


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(reg: Registry) -> dict[str, Any]:
    groups = [_group_entry(g, vs) for g, vs in sorted(reg.group_versions().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(reg: Registry, group: str) -> dict[str, Any] | None:
    vs = reg.group_versions().get(group)
    if not vs or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, vs)}


def resource_list(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    defs = [d for d in reg.all() if d.group == group and d.version == version]
    if not defs:
        return None
    resources: list[dict[str, Any]] = []
    for d in sorted(defs, key=lambda d: d.plural):
        resources.extend(d.discovery())
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def _definition_name(d: ResourceDef) -> str:
    group = d.group or "core"
    rev = ".".join(reversed(group.split("."))) if d.custom else f"io.k8s.api.{group}"
    if d.group.endswith(".k8s.io") and not d.custom:
        rev = "io.k8s.api." + d.group.removesuffix(".k8s.io")
    return f"{rev}.{d.version}.{d.kind}"


_FV = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
_DR = {"name": "dryRun", "in": "query", "schema": {"type": "string"}, "uniqueItems": True}


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_v3_root(reg: Registry) -> dict[str, Any]:
    """/openapi/v3: one entry per group-version."""
    gvs = {(d.group, d.version) for d in reg.all()}
    paths = {
        _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}"}
        for g, v in sorted(gvs)
    }
    return {"paths": paths}


def openapi_v3_gv(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    """/openapi/v3/{api/v1|apis/g/v}: paths with their verbs and open object schemas."""
    defs = [d for d in reg.all() if d.group == group and d.version == version]
    if not defs:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for d in defs:
        prefix = "/" + _gv_path(d.group, d.version)
        coll = (
            f"{prefix}/namespaces/{{namespace}}/{d.plural}"
            if d.namespaced
            else f"{prefix}/{d.plural}"
        )
        name = _definition_name(d)
        gvk = {"group": d.group, "version": d.version, "kind": d.kind}
        ref = {
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}
        }
        op = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [_FV, _DR],
            "responses": {"200": ref},
        }
        paths[coll] = {"post": op, "get": {"responses": {"200": ref}}}
        paths[f"{coll}/{{name}}"] = {
            "put": op,
            "patch": op,
            "get": {"responses": {"200": ref}},
            "delete": {"responses": {}},
        }
        if "status" in d.subresources:
            paths[f"{coll}/{{name}}/status"] = {"put": op, "patch": op}
        schema: dict[str, Any] = {"type": "object", "x-kubernetes-group-version-kind": [gvk]}
        if d.schema:
            schema = {**d.schema, "x-kubernetes-group-version-kind": [gvk]}
        schemas[name] = schema
    return {
        "openapi": "3.0.0",
        "info": {
            "title": "Kubernetes (slurm-bridge sandbox)",
            "version": version_info(reg)["gitVersion"],
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }
