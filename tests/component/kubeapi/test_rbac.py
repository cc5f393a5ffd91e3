"""Authentication and RBAC authorization as kube-apiserver does them: 401 on a bad token,
``system:anonymous`` without one, ServiceAccount tokens from the TokenRequest API, RBAC's
rules and kube's 403 wording, the access reviews and DRA's synthetic claim-status checks."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import pod_body
from tests.component.kubeapi.webhook_server import call

RBAC = "/apis/rbac.authorization.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


async def _sa_token(srv: SandboxCluster, ns: str, name: str) -> str:
    status, _ = await call(srv, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {
        "metadata": {"name": name}})  # fmt: skip
    assert status == 201
    status, tr = await call(
        srv, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", {"spec": {}}
    )
    assert status == 201, tr
    assert tr["kind"] == "TokenRequest"
    return str(tr["status"]["token"])


async def _grant(
    srv: SandboxCluster, name: str, rules: list[dict[str, Any]], subject: dict[str, Any],
    namespace: str = "",
) -> None:  # fmt: skip
    """A (Cluster)Role ``name`` with ``rules``, bound to ``subject``."""
    kind = "Role" if namespace else "ClusterRole"
    where = f"{RBAC}/namespaces/{namespace}" if namespace else RBAC
    status, body = await call(
        srv, "POST", f"{where}/{kind.lower()}s", {"metadata": {"name": name}, "rules": rules}
    )
    assert status == 201, body
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [subject],
    }
    status, body = await call(srv, "POST", f"{where}/{kind.lower()}bindings", binding)
    assert status == 201, body


def _sa(ns: str, name: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "namespace": ns, "name": name}


async def test_an_unknown_bearer_token_is_401_unauthorized(srv: SandboxCluster) -> None:
    status, body = await call(srv, "GET", PODS, token="nobody-knows-this")
    assert status == 401
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    }  # fmt: skip


async def test_no_credentials_is_system_anonymous_who_may_read_only_public_info(
    srv: SandboxCluster,
) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        async with s.get(srv.url + "/version") as r:
            assert r.status == 200
        async with s.get(srv.url + PODS) as r:
            body = await r.json()
        assert r.status == 403
        assert body["message"] == (
            'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API '
            'group "" in the namespace "default"'
        )
        assert body["details"] == {"kind": "pods"}
        async with s.get(srv.url + "/apis") as r:
            body = await r.json()
        assert r.status == 403
        assert body["message"] == 'forbidden: User "system:anonymous" cannot get path "/apis"'


async def test_service_account_token_from_token_request_is_the_service_account(
    srv: SandboxCluster,
) -> None:
    token = await _sa_token(srv, "default", "bot")
    status, review = await call(
        srv, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token=token
    )
    assert status == 201
    info = review["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:bot"
    assert info["groups"] == [
        "system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"
    ]  # fmt: skip
    assert info["uid"]
    # the token is bound to the ServiceAccount: gone with it
    status, _ = await call(srv, "DELETE", "/api/v1/namespaces/default/serviceaccounts/bot")
    assert status == 200
    status, _ = await call(srv, "GET", "/api", token=token)
    assert status == 401


async def test_token_request_for_a_missing_service_account_is_404(srv: SandboxCluster) -> None:
    status, body = await call(
        srv, "POST", "/api/v1/namespaces/default/serviceaccounts/nope/token", {"spec": {}}
    )
    assert status == 404
    assert body["message"] == 'serviceaccounts "nope" not found'


async def test_forbidden_names_the_user_verb_resource_group_and_scope_like_kube(
    srv: SandboxCluster,
) -> None:
    token = await _sa_token(srv, "default", "bot")
    status, body = await call(srv, "GET", f"{PODS}/web-0", token=token)
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "web-0" is forbidden: User "system:serviceaccount:default:bot" cannot get '
        'resource "pods" in API group "" in the namespace "default"'
    )
    assert body["details"] == {"name": "web-0", "kind": "pods"}
    status, body = await call(
        srv, "POST", f"{PODS}/web-0/binding", {"target": {"name": "n"}}, token=token
    )
    assert 'cannot create resource "pods/binding" in API group ""' in body["message"]
    status, body = await call(srv, "GET", "/apis/resource.k8s.io/v1/resourceclaims", token=token)
    assert body["message"] == (
        'resourceclaims.resource.k8s.io is forbidden: User "system:serviceaccount:default:bot" '
        'cannot list resource "resourceclaims" in API group "resource.k8s.io" at the cluster '
        "scope"
    )
    assert body["details"] == {"group": "resource.k8s.io", "kind": "resourceclaims"}


async def test_role_binding_grants_verbs_on_resources_in_its_namespace_only(
    srv: SandboxCluster,
) -> None:
    token = await _sa_token(srv, "default", "bot")
    await _grant(
        srv, "pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        _sa("default", "bot"), namespace="default",
    )  # fmt: skip
    assert (await call(srv, "GET", PODS, token=token))[0] == 200
    assert (await call(srv, "GET", PODS + "?watch=1&timeoutSeconds=0", token=token))[0] == 403
    assert (await call(srv, "POST", PODS, pod_body("a"), token=token))[0] == 403
    assert (await call(srv, "GET", "/api/v1/namespaces/kube-system/pods", token=token))[0] == 403
    assert (await call(srv, "GET", "/api/v1/pods", token=token))[0] == 403  # all namespaces


async def test_subresources_wildcards_and_resource_names_match_like_rbac(
    srv: SandboxCluster,
) -> None:
    token = await _sa_token(srv, "default", "bot")
    assert (await call(srv, "POST", PODS, pod_body("a")))[0] == 201
    assert (await call(srv, "POST", PODS, pod_body("b")))[0] == 201
    await _grant(
        srv, "status-writer",
        [
            {"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]},
            {"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
        ],
        {"kind": "Group", "name": "system:serviceaccounts:default"},
    )  # fmt: skip
    patch = {"status": {"message": "hi"}}
    ok, _ = await call(srv, "PATCH", f"{PODS}/a/status", patch, token=token,
                       content_type="application/merge-patch+json")  # fmt: skip
    assert ok == 200
    no, _ = await call(srv, "PATCH", f"{PODS}/a", patch, token=token,
                       content_type="application/merge-patch+json")  # fmt: skip
    assert no == 403
    assert (await call(srv, "GET", f"{PODS}/a", token=token))[0] == 200
    assert (await call(srv, "GET", f"{PODS}/b", token=token))[0] == 403
    assert (await call(srv, "GET", f"{PODS}?fieldSelector=metadata.name%3Da", token=token))[
        0
    ] == 403  # a list is "list", not "get"


async def test_a_binding_to_a_missing_role_says_so_in_the_reason(srv: SandboxCluster) -> None:
    token = await _sa_token(srv, "default", "bot")
    binding = {
        "metadata": {"name": "dangling"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
        "subjects": [_sa("default", "bot")],
    }
    assert (await call(srv, "POST", f"{RBAC}/clusterrolebindings", binding))[0] == 201
    _, body = await call(srv, "GET", PODS, token=token)
    assert body["message"].endswith(
        ': RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'
    )


async def test_self_subject_access_review_answers_kubectl_auth_can_i(
    srv: SandboxCluster,
) -> None:
    token = await _sa_token(srv, "default", "bot")
    await _grant(
        srv, "pod-lister", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        _sa("default", "bot"),
    )  # fmt: skip
    ask = {"spec": {"resourceAttributes": {"namespace": "default", "verb": "list",
                                           "resource": "pods"}}}  # fmt: skip
    status, review = await call(srv, "POST", SSAR, ask, token=token)
    assert status == 201
    assert review["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "pod-lister" of ClusterRole "pod-lister" '
        'to ServiceAccount "bot/default"',
    }
    ask["spec"]["resourceAttributes"]["verb"] = "delete"
    _, review = await call(srv, "POST", SSAR, ask, token=token)
    assert review["status"] == {"allowed": False}
    # SubjectAccessReview: asking about someone else needs its own permission
    sar = {"spec": {"user": "system:serviceaccount:default:bot"} | ask["spec"]}
    url = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    assert (await call(srv, "POST", url, sar, token=token))[0] == 403
    status, review = await call(srv, "POST", url, sar)
    assert status == 201
    assert review["status"] == {"allowed": False}


async def test_resource_claim_allocation_needs_the_synthetic_binding_subresource(
    srv: SandboxCluster,
) -> None:
    """Kubernetes 1.36 (DRAResourceClaimGranularStatusAuthorization): resourceclaims/status
    alone no longer lets a scheduler write status.allocation."""
    token = await _sa_token(srv, "default", "sched")
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    claim = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}}
    assert (await call(srv, "POST", claims, claim))[0] == 201
    await _grant(
        srv, "claim-status",
        [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"],
          "verbs": ["patch"]}],
        _sa("default", "sched"),
    )  # fmt: skip
    patch = {"status": {"allocation": {"devices": {"results": []}}}}
    status, body = await call(srv, "PATCH", f"{claims}/c/status", patch, token=token,
                              content_type="application/merge-patch+json")  # fmt: skip
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'ResourceClaim.resource.k8s.io "c" is invalid: status.allocation: Forbidden: changing '
        'status.allocation or status.reservedFor requires resource="resourceclaims/binding", '
        'verb="patch" permission: resourceclaims.resource.k8s.io is forbidden: User '
        '"system:serviceaccount:default:sched" cannot patch resource "resourceclaims/binding" '
        'in API group "resource.k8s.io" at the cluster scope'
    )
    assert body["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    await _grant(
        srv, "claim-binding",
        [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"],
          "verbs": ["patch", "update"]}],
        _sa("default", "sched"),
    )  # fmt: skip
    status, body = await call(srv, "PATCH", f"{claims}/c/status", patch, token=token,
                              content_type="application/merge-patch+json")  # fmt: skip
    assert status == 200, body


async def test_a_namespace_object_is_in_its_own_namespace_and_url_prefixes_match(
    srv: SandboxCluster,
) -> None:
    """As kube's RequestInfo: GET /api/v1/namespaces/<ns> is in namespace <ns> (a
    RoleBinding there may grant it); nonResourceURLs ``/metrics/*`` is a prefix."""
    token = await _sa_token(srv, "default", "bot")
    await _grant(
        srv, "see-own-namespace",
        [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}],
        _sa("default", "bot"), namespace="default",
    )  # fmt: skip
    assert (await call(srv, "GET", "/api/v1/namespaces/default", token=token))[0] == 200
    assert (await call(srv, "GET", "/api/v1/namespaces/kube-system", token=token))[0] == 403
    await _grant(
        srv, "metrics-reader", [{"nonResourceURLs": ["/metrics/*"], "verbs": ["get"]}],
        _sa("default", "bot"),
    )  # fmt: skip
    ask = {"spec": {"nonResourceAttributes": {"path": "/metrics/cadvisor", "verb": "get"}}}
    _, review = await call(srv, "POST", SSAR, ask, token=token)
    assert review["status"]["allowed"] is True
    ask["spec"]["nonResourceAttributes"]["path"] = "/metrics"
    _, review = await call(srv, "POST", SSAR, ask, token=token)
    assert review["status"]["allowed"] is False
