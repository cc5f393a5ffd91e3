"""DRA device selectors (CEL) evaluated against published devices (pure).

A DeviceClass's ``spec.selectors[].cel.expression`` and a request's
``exactly.selectors[].cel.expression`` see one variable, ``device``, as kube-scheduler's
allocator binds it: ``device.driver``, ``device.attributes["<domain>"].<name>`` (an
attribute without a domain belongs to the driver's), ``device.allowMultipleAllocations``.
The forms users write to pick a MIG slice work::

    device.driver == "gpu.nvidia.com"
    device.attributes["gpu.nvidia.com"].type == "mig"
    device.attributes["gpu.nvidia.com"].profile == "1g.10gb"
    device.attributes["gpu.nvidia.com"].profile in ["1g.10gb", "1g.20gb"]
    device.attributes["gpu.nvidia.com"].parentIndex == 0 && ...

Evaluation is :mod:`bridge.cel` (compiled once, cached; Kubernetes' CEL functions the
library lacks are refused at compile time). Refused too, with the field named: an
expression reading anything but ``device``, and one reading ``device.capacity``
(quantities and their comparison functions are not available here). An attribute a device
does not have is a runtime error in Kubernetes as here; such a device does not match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.cel import Expression, compile_expression
from bridge.errors import CelError, InvalidInput
from bridge.translate import kobj


@dataclass(frozen=True)
class Selector:
    """One compiled selector and the field it came from (for errors)."""

    field: str
    expression: Expression


def compile_selectors(
    selectors: Sequence[Any], where: str, label: str, obj: str
) -> tuple[Selector, ...]:
    """The CEL selectors ``label`` names (a DeviceClass's ``spec.selectors`` or a request's
    ``exactly.selectors``) compiled; InvalidInput at ``where`` naming
    ``<label>[i].cel.expression`` and the reason for one that cannot be evaluated here."""
    out = []
    for i, sel in enumerate(selectors):
        at = f"{label}[{i}].cel.expression"
        source = kobj.text(sel, "cel", "expression")
        if not source:
            raise InvalidInput(where, f"{at}: only CEL selectors are supported", obj)
        try:
            expr = compile_expression(source)
        except CelError as e:
            raise InvalidInput(where, f"{at}: CEL: {e.reason}", obj) from e
        reads = set(expr._reads)
        if reads - {"device"}:
            raise InvalidInput(
                where,
                f"{at}: CEL: only `device` may be read, not {sorted(reads - {'device'})}",
                obj,
            )
        if "device.capacity" in source.replace(" ", ""):
            raise InvalidInput(
                where,
                f"{at}: CEL: device.capacity (quantities) cannot be evaluated by the bridge: "
                "select by attributes (e.g. the MIG profile)",
                obj,
            )
        out.append(Selector(at, expr))
    return tuple(out)


def _value(raw: Any) -> Any:
    if isinstance(raw, Mapping):
        for kind in ("string", "int", "bool", "version"):
            if kind in raw:
                return raw[kind]
    return None


def device_variable(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` a selector sees, from a ResourceSlice's device entry."""
    attributes: dict[str, dict[str, Any]] = {driver: {}}
    for key, raw in kobj.mapping(device, "attributes").items():
        domain, _, name = key.rpartition("/")
        attributes.setdefault(domain or driver, {})[name] = _value(raw)
    return {
        "driver": driver,
        "attributes": attributes,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations")),
    }


def matches(selectors: Sequence[Selector], variable: Mapping[str, Any]) -> bool:
    """Whether the device passes every selector (a runtime error, such as an attribute
    the device lacks, is no match)."""
    for s in selectors:
        try:
            if not s.expression.evaluate_bool({"device": variable}):
                return False
        except CelError:
            return False
    return True
