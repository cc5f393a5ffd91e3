"""The one path every write takes: defaulting, mutating webhooks, validation, validating
webhooks, then the store (:class:`ObjectApi`). HTTP handlers, the namespace controller,
the garbage collector and the fake kubelet all write through :class:`Writes`, each as its
own user, so webhooks see every CREATE, UPDATE (PUT and every PATCH type) and DELETE.

Like kube-apiserver: mutating webhooks see a CREATE before the name is generated and the
uid set (validating ones after); an UPDATE's webhooks see the object with the change
applied and ``oldObject``; a DELETE's mutating webhooks see neither object and its
validating webhooks the current object as ``oldObject``; ``pods/binding`` is a CREATE of a
``Binding`` on subresource ``binding``. Between admission and the write nothing else may
change the object: an update that raced is answered 409 when the client sent a
resourceVersion, and admitted again (up to 3 times) when it did not, as the real server
retries its guaranteed update.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from bridge.fastjson import clone
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.identity import ADMIN, UserInfo
from sandbox.kubeapi.registry import ResourceDef
from sandbox.kubeapi.store import Obj
from sandbox.kubeapi.verbs import ObjectApi
from sandbox.kubeapi.webhook_client import AdmissionRequest, WebhookCaller

_UPDATE_ATTEMPTS = 3


def options(kind: str, query: Mapping[str, str], extra: Mapping[str, Any] | None = None) -> Obj:
    """The ``options`` object of an AdmissionReview (``CreateOptions``...) for a request
    with query parameters ``query``."""
    out: Obj = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    out.update(extra or {})
    if query.get("dryRun"):
        out["dryRun"] = [query["dryRun"]]
    for f in ("fieldManager", "fieldValidation"):
        if query.get(f):
            out[f] = query[f]
    if kind == "PatchOptions" and query.get("force") in ("true", "1"):
        out["force"] = True
    return out


def _before_create(draft: Obj, body: Any) -> Obj:
    """What mutating webhooks see of a create: defaulted, but no uid, creation time or
    generated name yet (kube-apiserver sets those after mutating admission)."""
    obj = clone(draft)
    md = obj["metadata"]
    for f in ("uid", "creationTimestamp", "resourceVersion"):
        md.pop(f, None)
    if not ((body or {}).get("metadata") or {}).get("name"):
        md.pop("name", None)
    return obj


class Writes:
    """Admitted writes on :class:`ObjectApi` (see the module docstring)."""

    def __init__(self, api: ObjectApi, hooks: WebhookCaller) -> None:
        self.api = api
        self.hooks = hooks

    async def create(
        self,
        rd: ResourceDef,
        namespace: str,
        body: Any,
        *,
        user: UserInfo = ADMIN,
        dry_run: bool = False,
        opts: Obj | None = None,
    ) -> Obj:
        if not self.hooks.active():
            return self.api.create(rd, namespace, body, dry_run=dry_run)
        draft = self.api.create(rd, namespace, body, dry_run=True)
        first = _before_create(draft, body)
        req = AdmissionRequest(
            rd,
            "CREATE",
            namespace,
            str(first["metadata"].get("name") or ""),
            user,
            obj=first,
            dry_run=dry_run,
            options=opts or options("CreateOptions", {}),
        )
        mutated = await self.hooks.mutate(req) or first
        final = self.api.create(rd, namespace, mutated, dry_run=True)
        await self.hooks.validate(replace(req, obj=final, name=final["metadata"]["name"]))
        return self.api.create(rd, namespace, final, dry_run=dry_run, keep_identity=True)

    async def update(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        user: UserInfo = ADMIN,
        dry_run: bool = False,
        opts: Obj | None = None,
    ) -> Obj:
        """PUT."""
        has_rv = bool(
            isinstance(body, dict) and (body.get("metadata") or {}).get("resourceVersion")
        )

        def compute(dry: bool) -> Obj:
            return self.api.update(rd, namespace, name, body, subresource=subresource, dry_run=dry)

        return await self._update(
            rd, namespace, name, subresource, compute, user, dry_run, has_rv,
            opts or options("UpdateOptions", {}),
        )  # fmt: skip

    async def patch(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str = "",
        user: UserInfo = ADMIN,
        dry_run: bool = False,
        opts: Obj | None = None,
    ) -> Obj:
        """PATCH (every patch type): an UPDATE for admission, with PatchOptions."""

        def compute(dry: bool) -> Obj:
            return self.api.patch(
                rd, namespace, name, content_type, patch, subresource=subresource, dry_run=dry
            )

        has_rv = isinstance(patch, dict) and bool(
            (patch.get("metadata") or {}).get("resourceVersion")
        )
        return await self._update(
            rd, namespace, name, subresource, compute, user, dry_run, has_rv,
            opts or options("PatchOptions", {}),
        )  # fmt: skip

    async def _update(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        subresource: str,
        compute: Callable[[bool], Obj],
        user: UserInfo,
        dry_run: bool,
        has_rv: bool,
        opts: Obj,
    ) -> Obj:
        if not self.hooks.active():
            return compute(dry_run)
        for attempt in range(_UPDATE_ATTEMPTS):
            old = self.api.get(rd, namespace, name)
            new = compute(True)
            req = AdmissionRequest(
                rd,
                "UPDATE",
                namespace,
                name,
                user,
                obj=new,
                old=old,
                subresource=subresource,
                dry_run=dry_run,
                options=opts,
            )
            mutated = clone(await self.hooks.mutate(req) or new)
            mutated.setdefault("metadata", {})["resourceVersion"] = old["metadata"][
                "resourceVersion"
            ]
            final = self.api.update(
                rd, namespace, name, mutated, subresource=subresource, dry_run=True
            )
            await self.hooks.validate(replace(req, obj=final))
            try:
                return self.api.update(
                    rd, namespace, name, mutated, subresource=subresource, dry_run=dry_run
                )
            except ApiError as e:
                if e.code != 409 or has_rv or attempt == _UPDATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def delete(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        delete_options: Obj | None = None,
        *,
        user: UserInfo = ADMIN,
        dry_run: bool = False,
    ) -> Obj:
        opts = delete_options or {}
        if self.hooks.active():
            old = self.api.get(rd, namespace, name)
            review_opts = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
            review_opts.update({k: v for k, v in opts.items() if k not in ("kind", "apiVersion")})
            req = AdmissionRequest(
                rd, "DELETE", namespace, name, user, dry_run=dry_run, options=review_opts
            )
            await self.hooks.mutate(req)
            await self.hooks.validate(replace(req, old=old))
        return self.api.delete(rd, namespace, name, opts, dry_run=dry_run)

    async def bind(self, namespace: str, name: str, binding: Any, *, user: UserInfo = ADMIN) -> Obj:
        """``pods/binding``: a CREATE of a Binding on the pod's subresource."""
        if self.hooks.active() and isinstance(binding, dict):
            rd = self.api.resolve("", "v1", "pods")
            obj = clone(binding)
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", "Binding")
            obj.setdefault("metadata", {}).setdefault("namespace", namespace)
            req = AdmissionRequest(
                rd,
                "CREATE",
                namespace,
                name,
                user,
                obj=obj,
                subresource="binding",
                kind="Binding",
                options=options("CreateOptions", {}),
            )
            binding = await self.hooks.mutate(req) or obj
            await self.hooks.validate(replace(req, obj=binding))
        return self.api.bind(namespace, name, binding)

    async def connect(
        self,
        namespace: str,
        name: str,
        subresource: str,
        connect_options: Obj,
        *,
        user: UserInfo = ADMIN,
    ) -> None:
        """``pods/exec|attach|portforward``: CONNECT admission (the object is the
        Pod*Options); raises when a webhook refuses. The caller then answers."""
        rd = self.api.resolve("", "v1", "pods")
        self.api.get(rd, namespace, name)  # 404 first, like the real server
        if not self.hooks.active():
            return
        req = AdmissionRequest(
            rd,
            "CONNECT",
            namespace,
            name,
            user,
            obj=connect_options,
            subresource=subresource,
            kind=str(connect_options.get("kind", "")),
        )
        await self.hooks.mutate(req)
        await self.hooks.validate(req)
