"""Fill a scheduler's watch caches as its watches' initial lists would (scheduler.app),
for a :class:`~scheduler.cycle.Scheduler` a test builds and drives by hand, without its
loops: every workload kind's objects at the version served, and the DRA objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import RESOURCE_CLAIMS
from bridge.workloads import kind_of_object, object_apis
from scheduler.app import served_version
from scheduler.cycle import Scheduler
from scheduler.dra import (
    CLAIM_TEMPLATES,
    DEVICE_CLASSES,
    RESOURCE_SLICES,
    DraAllocator,
    DraCache,
)
from scheduler.related import api_key, kept


def hold(sched: Scheduler, objects: Iterable[Mapping[str, Any]]) -> None:
    """``objects`` (each with its apiVersion and kind) held as the kinds' watches would."""
    for obj in objects:
        kind = kind_of_object(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        assert kind is not None, obj
        sched.on_related_event(kind.api, "ADDED", kept(dict(obj)))


async def list_into(sched: Scheduler, kube: KubeClient) -> None:
    """List what the scheduler's watches keep into its caches."""
    for api in object_apis():
        res = await served_version(kube, api)
        sched.state.related.served[api_key(api)] = res
        if res is None:
            continue
        for obj in (await kube.list(res)).items:
            sched.on_related_event(api, "ADDED", kept(obj))
    await list_dra_into(sched.dra, kube)


async def list_dra_into(dra: DraAllocator, kube: KubeClient) -> None:
    """Fill ``dra``'s caches afresh from the API server, as its watches' lists would."""
    cache = dra.cache = DraCache()
    feeds = (
        (DEVICE_CLASSES, cache.on_class_event),
        (RESOURCE_SLICES, cache.on_slice_event),
        (RESOURCE_CLAIMS, cache.on_claim_event),
        (CLAIM_TEMPLATES, cache.on_template_event),
    )
    for res, feed in feeds:
        try:
            listed = await kube.list(res)
        except KubeNotFound:
            continue
        for obj in listed.items:
            feed("ADDED", obj)
        cache.listed(res)


class ListingDraAllocator(DraAllocator):
    """A DraAllocator a test drives by hand, without the scheduler's watches: its caches
    are listed afresh before each allocation, as the watches have caught up by the time
    the scheduler binds (the snapshot reads only the caches)."""

    async def allocate(self, *args: Any, **kwargs: Any) -> int:
        await list_dra_into(self, self.kube)
        return await super().allocate(*args, **kwargs)
