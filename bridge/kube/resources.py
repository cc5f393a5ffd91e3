"""The Kubernetes resources the bridge touches, and how their URL paths are built.

Pure: no I/O. The adapter (:mod:`bridge.kube.client`) speaks to the API server by path so
that built-in and custom resources go through the same request, timeout and error code.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

# An object exactly as the API server sent it (parsed JSON). The pure translation layer
# consumes these; no typed model of kubernetes_asyncio ever leaves the adapter.
KubeObject = dict[str, Any]


# what quote(..., safe="") leaves as it is (RFC 3986's unreserved characters)
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*").fullmatch


def _segment(text: str) -> str:
    """``text`` quoted as one path segment. A Kubernetes name or namespace (DNS-1123)
    never needs quoting: it is checked, not quoted (3 requests a pod; quote() was ~2% of
    the scheduler's CPU profiled)."""
    return text if _UNRESERVED(text) else quote(text, safe="")


@dataclass(frozen=True)
class Resource:
    """One API resource: ``group`` is empty for the core group."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    # Built-in types accept strategic merge patches; custom resources answer 415.
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """``/api/v1/namespaces/ns/pods/name/status`` and friends."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{_segment(namespace)}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{_segment(name)}"
            if subresource:
                base += f"/{subresource}"
        return base

    def describe(self, namespace: str | None, name: str) -> str:
        """``Pod default/web-0`` for messages."""
        return f"{self.kind} {namespace}/{name}" if namespace else f"{self.kind} {name}"


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True)
PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, False)
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True, False)
LEADERWORKERSETS = Resource(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, False
)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
# KEP-5055 device taints, GA (served) from Kubernetes 1.37: watched only where discovery
# lists it (KubeClient.serves)
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False)


def object_key(obj: KubeObject) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects): the cache key."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    name = meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


def resource_version(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def interned(value: Any) -> Any:
    """``value`` (decoded JSON) with every string in it interned, in place: the values that
    repeat across objects (namespace, image, phase ...) are then one string each, not one
    per object (a pod from a watch event: 6.8 KB, interned 2.7 KB). Dict keys are shared
    already: :mod:`bridge.fastjson` (orjson) decodes each key once. In place because a
    copy of every dict and list cost a third more CPU on every watch event."""
    t = type(value)
    if t is str:
        return sys.intern(value)
    if t is dict:
        for k, v in value.items():
            tv = type(v)
            if tv is str:
                value[k] = sys.intern(v)
            elif tv is dict or tv is list:
                interned(v)
    elif t is list:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str:
                value[i] = sys.intern(v)
            elif tv is dict or tv is list:
                interned(v)
    return value


def slim(obj: KubeObject) -> KubeObject:
    """``obj`` without what no component reads and the API server may make large:
    ``metadata.managedFields``, kubectl's last-applied annotation (a copy of the whole
    object), a node's ``status.images``; the rest :func:`interned`. Used as a Watcher's
    ``keep`` for the caches that hold every object of a kind (pods, nodes)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        notes = meta.get("annotations")
        if isinstance(notes, dict):
            notes.pop(LAST_APPLIED, None)
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("images", None)
    return dict(interned(obj))


def format_time(dt: datetime) -> str:
    """A ``metav1.Time``: RFC 3339 in UTC, whole seconds, ``Z`` suffix."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(dt: datetime) -> str:
    """A ``metav1.MicroTime``: exactly 6 fractional digits and ``Z``.

    The API server rejects ``+00:00`` offsets in MicroTime fields with 400 (Leases).
    """
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    """Parse a Time or MicroTime as the server sends it (``Z`` or an offset)."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
