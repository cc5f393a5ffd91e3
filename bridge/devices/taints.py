"""DRA device taints and tolerations (KEP-5055, GA in Kubernetes 1.37), pure.

A device is tainted by its ResourceSlice (``spec.devices[].taints``, the driver's) and by
every DeviceTaintRule (``resource.k8s.io/v1``, an admin's) whose ``spec.deviceSelector``
matches it (``driver``, ``pool``, ``device``: each set one must equal; the empty selector
matches every device, no selector none). Taints add up; a key may come with several
effects, and each taint must be tolerated on its own (a ``NoExecute`` toleration does not
tolerate a ``NoSchedule`` taint of the same key).

A claim's request tolerates a taint by Kubernetes' toleration rule (the same as for node
taints: :func:`bridge.translate.placement.tolerates`): the toleration's ``effect`` empty or
equal, its ``key`` empty (with ``Exists``) or equal, and ``Exists`` or an equal ``value``.

- ``NoSchedule`` and ``NoExecute``: never allocated to a request that does not tolerate
  the taint (:func:`untolerated`);
- ``NoExecute`` on an allocated device: the pods using the claim are evicted, unless the
  request tolerates it; a toleration with ``tolerationSeconds`` only until
  ``timeAdded + tolerationSeconds`` (:func:`eviction`);
- ``None`` (and any effect this code does not know): informational only.

:func:`with_rules` merges the rules into copies of the slices, as kube-scheduler's
ResourceSlice tracker does, so the allocator reads one place: the devices' ``taints``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bridge import kobj
from bridge.translate.placement import tolerates

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
BLOCKING = (NO_SCHEDULE, NO_EXECUTE)  # what keeps a device from being allocated
# DisruptionTarget reason of a pod evicted for a device taint (kube-controller-manager's
# device taint eviction controller)
EVICTION_REASON = "DeletionByDeviceTaintManager"


def describe(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as kubectl shows taints."""
    value = kobj.text(taint, "value")
    key = kobj.text(taint, "key") + (f"={value}" if value else "")
    return f"{key}:{kobj.text(taint, 'effect')}"


def rule_matches(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """Does a DeviceTaintRule select the device ``driver``/``pool``/``device``?"""
    sel = kobj.get(rule, "spec", "deviceSelector")
    if not isinstance(sel, Mapping):
        return False  # without a selector, no device is matched
    for field, have in (("driver", driver), ("pool", pool), ("device", device)):
        want = sel.get(field)
        if want is not None and want != have:
            return False
    return True


def rule_taints(
    rules: Iterable[Mapping[str, Any]], driver: str, pool: str, device: str
) -> list[Mapping[str, Any]]:
    """The taints the rules put on one device."""
    return [
        kobj.mapping(r, "spec", "taint") for r in rules if rule_matches(r, driver, pool, device)
    ]


def with_rules(
    slices: Sequence[dict[str, Any]], rules: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The slices with every rule's taint added to the devices it matches (copies where a
    rule matches; the slices themselves are never changed)."""
    if not rules:
        return list(slices)
    out: list[dict[str, Any]] = []
    for s in slices:
        driver = kobj.text(s, "spec", "driver")
        pool = kobj.text(s, "spec", "pool", "name")
        devices = kobj.sequence(s, "spec", "devices")
        added = [rule_taints(rules, driver, pool, kobj.text(d, "name")) for d in devices]
        if not any(added):
            out.append(s)
            continue
        copied = copy.deepcopy(s)
        for d, extra in zip(copied["spec"]["devices"], added, strict=True):
            if extra:
                d["taints"] = [*(d.get("taints") or []), *(dict(t) for t in extra)]
        out.append(copied)
    return out


def device_taints(device: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in kobj.sequence(device, "taints") if isinstance(t, Mapping)]


def split_tainted(
    slices: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """The slices without their devices tainted NoSchedule/NoExecute (what nothing
    tolerating no taint may be given: the node's GRES condition counts these as
    unavailable), and those devices as ``name (key=value:Effect)``."""
    out: list[dict[str, Any]] = []
    tainted: list[str] = []
    for s in slices:
        devices = kobj.sequence(s, "spec", "devices")
        blocked = [untolerated(device_taints(d), ()) for d in devices]
        if not any(blocked):
            out.append(s)
            continue
        tainted += [
            f"{kobj.text(d, 'name')} ({describe(b[0])})"
            for d, b in zip(devices, blocked, strict=True)
            if b
        ]
        kept = [d for d, b in zip(devices, blocked, strict=True) if not b]
        out.append({**s, "spec": {**s["spec"], "devices": kept}})
    return out, tainted


def untolerated(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Sequence[Any],
    effects: Sequence[str] = BLOCKING,
) -> list[Mapping[str, Any]]:
    """The taints of ``effects`` that no toleration tolerates (for allocation:
    ``tolerationSeconds`` does not matter)."""
    return [
        t for t in taints if kobj.text(t, "effect") in effects and not tolerates(tolerations, t)
    ]


@dataclass(frozen=True)
class Eviction:
    """What a device's ``NoExecute`` taints mean for the pods using it: ``now`` the
    taints that evict them now (none: they stay), ``due`` when a toleration with
    ``tolerationSeconds`` runs out next (None: never)."""

    now: tuple[Mapping[str, Any], ...] = ()
    due: datetime | None = None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def eviction(
    taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Any], now: datetime
) -> Eviction:
    """Which ``NoExecute`` taints evict now: those no toleration tolerates, and those whose
    tolerations all carry ``tolerationSeconds`` that ran out (counted from the taint's
    ``timeAdded``; zero or less: at once). A toleration without ``tolerationSeconds``
    tolerates forever."""
    evict: list[Mapping[str, Any]] = []
    due: datetime | None = None
    for t in taints:
        if kobj.text(t, "effect") != NO_EXECUTE:
            continue
        matching = [tol for tol in tolerations if tolerates([tol], t)]
        if not matching:
            evict.append(t)
            continue
        limits = [kobj.get(tol, "tolerationSeconds") for tol in matching]
        seconds = [n for n in limits if isinstance(n, int) and not isinstance(n, bool)]
        if len(seconds) < len(limits):
            continue  # a toleration without tolerationSeconds: tolerated forever
        added = _time(t.get("timeAdded")) or now
        until = added + timedelta(seconds=max(0, *seconds))
        if until <= now:
            evict.append(t)
        elif due is None or until < due:
            due = until
    return Eviction(tuple(evict), due)


def request_tolerations(claim: Mapping[str, Any], request: str) -> Sequence[Any]:
    """The tolerations of the claim's request ``request`` (``req`` or, for a
    ``firstAvailable`` choice, ``req/sub``)."""
    main, _, sub = request.partition("/")
    for r in kobj.sequence(claim, "spec", "devices", "requests"):
        if kobj.text(r, "name") != main:
            continue
        if not sub:
            return kobj.sequence(r, "exactly", "tolerations")
        for choice in kobj.sequence(r, "firstAvailable"):
            if kobj.text(choice, "name") == sub:
                return kobj.sequence(choice, "tolerations")
    return ()


@dataclass(frozen=True)
class Held:
    """A device a claim's allocation holds (``driver/pool/device``), its taints (its
    slice's and the rules'), and the tolerations of the request it was given for."""

    device: str
    request: str
    taints: tuple[Mapping[str, Any], ...]
    tolerations: Sequence[Any]


def held_devices(
    claim: Mapping[str, Any],
    slices: Sequence[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]] = (),
) -> list[Held]:
    """The devices ``claim`` is allocated, with their taints from ``slices`` (the node's)
    and ``rules`` (a device whose slice is gone still gets the rules' taints)."""
    out: list[Held] = []
    for r in kobj.sequence(claim, "status", "allocation", "devices", "results"):
        driver, pool, device = kobj.text(r, "driver"), kobj.text(r, "pool"), kobj.text(r, "device")
        taints: list[Mapping[str, Any]] = []
        for s in slices:
            if kobj.text(s, "spec", "driver") == driver and (
                kobj.text(s, "spec", "pool", "name") == pool
            ):
                taints += [
                    t
                    for d in kobj.sequence(s, "spec", "devices")
                    if kobj.text(d, "name") == device
                    for t in device_taints(d)
                ]
        taints += rule_taints(rules, driver, pool, device)
        request = kobj.text(r, "request")
        out.append(
            Held(
                f"{driver}/{pool}/{device}",
                request,
                tuple(taints),
                request_tolerations(claim, request),
            )
        )
    return out
