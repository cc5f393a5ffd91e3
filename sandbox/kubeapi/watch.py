"""Watch streams: the event logic of ``?watch=true``.

From a resourceVersion: only newer events (no replay); without one (or ``"0"``): synthetic
ADDED for the current state, then changes. Objects entering/leaving the selectors are
ADDED/DELETED for this watcher. BOOKMARKs every ``bookmark_interval`` seconds when asked.
A version older than the compaction point: one ERROR event carrying a 410 Expired Status.

WatchList (``sendInitialEvents=true&resourceVersionMatch=NotOlderThan``): ADDED for every
current object, then (with ``allowWatchBookmarks=true``) ONE BOOKMARK whose object carries
the annotation ``k8s.io/initial-events-end: "true"`` and the list's resourceVersion, then
the watch goes on. ``sendInitialEvents=false``: only changes after ``resourceVersion``
(or after now). :func:`validate_list_options` refuses the combinations kube-apiserver
refuses (422, ``ListOptions.meta.k8s.io "" is invalid: ...``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bridge.fastjson import clone
from sandbox.kubeapi.errors import ApiError, expired, invalid_fields
from sandbox.kubeapi.registry import ResourceDef
from sandbox.kubeapi.selectors import (
    FieldRequirement,
    Requirement,
    fields_match,
    labels_match,
)
from sandbox.kubeapi.store import Obj, Store, StoreEvent

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class WatchRequest:
    rd: ResourceDef
    namespace: str  # "" = all namespaces
    labels: list[Requirement]
    fields: list[FieldRequirement]
    resource_version: str | None
    timeout: float
    bookmarks: bool
    bookmark_interval: float
    send_initial: bool | None = None  # WatchList's sendInitialEvents


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
NOT_OLDER_THAN = "NotOlderThan"


def _forbidden(field: str, why: str) -> tuple[str, str, str]:
    return (field, "FieldValueForbidden", f"Forbidden: {why}")


def _unsupported_match(match: str, allowed: str) -> tuple[str, str, str]:
    return (
        "resourceVersionMatch",
        "FieldValueNotSupported",
        f'Unsupported value: "{match}": supported values: {allowed}',
    )


def validate_list_options(
    watch: bool,
    send_initial: str | None,
    match: str | None,
    resource_version: str | None,
    continue_token: str | None,
) -> None:
    """kube-apiserver's ValidateListOptions (WatchList enabled); ApiError 422 when bad."""
    errs: list[tuple[str, str, str]] = []
    rvm, match = "resourceVersionMatch", match or ""
    if continue_token and match:
        errs.append(_forbidden(rvm, "resourceVersionMatch is forbidden when continue is provided"))
    if watch:
        if send_initial is not None and match != NOT_OLDER_THAN:
            errs.append(
                _forbidden(
                    rvm, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                )
            )
        if match and send_initial is None:
            errs.append(
                _forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match and match != NOT_OLDER_THAN:
            errs.append(_unsupported_match(match, '"NotOlderThan"'))
    else:
        if match and not resource_version:
            errs.append(
                _forbidden(
                    rvm, "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        if match and match not in ("Exact", NOT_OLDER_THAN):
            errs.append(_unsupported_match(match, '"Exact", "NotOlderThan", ""'))
        if send_initial is not None:
            errs.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if errs:
        raise invalid_fields("ListOptions", "meta.k8s.io", "", errs)


def _ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _matches(req: WatchRequest, obj: Obj | None) -> bool:
    if obj is None:
        return False
    if req.rd.namespaced and req.namespace and _ns(obj) != req.namespace:
        return False
    return labels_match(req.labels, obj) and fields_match(req.fields, obj)


def translate(req: WatchRequest, ev: StoreEvent) -> str | None:
    """The event type this watcher sees for a store event (None = not visible)."""
    new_m = _matches(req, ev.obj)
    old_m = _matches(req, ev.old) if ev.old is not None else False
    if ev.type == "ADDED":
        return "ADDED" if new_m else None
    if ev.type == "DELETED":
        return "DELETED" if (new_m or old_m) else None
    if new_m and old_m:
        return "MODIFIED"
    if new_m:
        return "ADDED"
    if old_m:
        return "DELETED"
    return None


def _present(req: WatchRequest, obj: Obj, *, deep: bool = True) -> Obj:
    """``obj`` with its apiVersion and kind. ``deep=False``: a shallow copy, for an
    object that is only serialized (the stored one must never be changed)."""
    o = clone(obj) if deep else dict(obj)
    o["apiVersion"] = req.rd.api_version
    o["kind"] = req.rd.kind
    return o


def expired_event(rv: str) -> dict[str, Any]:
    err = expired(f"too old resource version: {rv}")
    return {"type": "ERROR", "object": err.status()}


async def run_watch(
    store: Store,
    req: WatchRequest,
    send: Send,
    transform: Callable[[Obj], Obj] | None = None,
) -> None:
    """Stream events to ``send`` until ``req.timeout`` passes or the client goes away."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.timeout
    rv_s = req.resource_version
    initial: list[dict[str, Any]] = []
    end_bookmark: dict[str, Any] | None = None
    past: list[StoreEvent]
    if req.send_initial is False and not (rv_s and rv_s != "0"):
        past, sub = [], store.subscribe(req.rd.key)  # only what happens from now on
    elif req.send_initial is True or not (rv_s and rv_s != "0"):
        current = store.list(
            req.rd.key,
            req.namespace if req.rd.namespaced else None,
            where=lambda o: _matches(req, o),
        )
        list_rv = store.resource_version
        sub = store.subscribe(req.rd.key)
        past = []
        for obj in current:  # copies already
            initial.append({"type": "ADDED", "object": _present(req, obj, deep=False)})
        if req.send_initial and req.bookmarks:
            end_bookmark = {
                "type": "BOOKMARK",
                "object": {
                    "kind": req.rd.kind,
                    "apiVersion": req.rd.api_version,
                    "metadata": {
                        "resourceVersion": str(list_rv),
                        "annotations": {INITIAL_EVENTS_END: "true"},
                    },
                },
            }
    else:
        try:
            rv = int(rv_s)
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"invalid resource version: {rv_s}") from e
        if rv < store.compacted:
            await send(expired_event(rv_s))
            return
        past, sub = store.subscribe_since(req.rd.key, rv)

    def out(obj: Obj) -> Obj:
        # Sent as soon as it is built (send encodes before it awaits): no deep copy
        # unless a transform gets it.
        if transform is None:
            return _present(req, obj, deep=False)
        return transform(_present(req, obj))

    try:
        for first in initial:
            first["object"] = transform(first["object"]) if transform else first["object"]
            await send(first)
        if end_bookmark is not None:
            await send(end_bookmark)
        for ev in past:
            t = translate(req, ev)
            if t:
                await send({"type": t, "object": out(ev.obj)})
        next_bookmark = loop.time() + req.bookmark_interval
        while True:
            now = loop.time()
            if now >= deadline:
                return
            wait = deadline - now
            if req.bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            try:
                ev = await asyncio.wait_for(sub.queue.get(), timeout=wait)
            except TimeoutError:
                if req.bookmarks and loop.time() >= next_bookmark:
                    await send(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": req.rd.kind,
                                "apiVersion": req.rd.api_version,
                                "metadata": {"resourceVersion": str(store.resource_version)},
                            },
                        }
                    )
                    next_bookmark = loop.time() + req.bookmark_interval
                continue
            t = translate(req, ev)
            if t:
                await send({"type": t, "object": out(ev.obj)})
    finally:
        store.unsubscribe(sub)
