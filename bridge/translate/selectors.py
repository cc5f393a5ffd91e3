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

**Cost** (tenant text runs on the scheduler's loop): as the API server does, an
expression longer than :data:`MAX_LENGTH` or whose estimated cost
(:meth:`bridge.cel.Expression.cost` over :data:`DEVICE`, the sizes Kubernetes declares)
exceeds :data:`MAX_COST` is refused. Matching the cluster's devices is counted by a
:class:`Budget`: each device bound costs :data:`BIND_COST`, each selector evaluated its
estimated cost; over :data:`BUDGET` is a refusal naming the selector being evaluated.
Compiling a request's selector costs :data:`LEX_COST` a character and :data:`TOKEN_COST` a
token (charged before it is compiled, whether or not it is kept). Devices that agree on
everything the selectors read (:attr:`bridge.cel.Expression.paths`) are evaluated once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.cel import Bindings, Expression, compile_expression, compiled, count_tokens
from bridge.celcost import Shape
from bridge.errors import CelError, InvalidInput
from bridge.translate import kobj

# Kubernetes' limits for a selector (k8s.io/api/resource/v1): the longest expression, and
# the most its estimated cost (the API server's check) and one evaluation's (the
# allocator's runtime limit) may be: CELSelectorExpressionMaxLength, ...MaxCost
MAX_LENGTH = 10 * 1024
MAX_COST = 1_000_000
# The bridge's: what compiling and matching the selectors of one group's DRA requests
# (one translation or one allocation) may cost, in the same units. A unit is some 50 ns
# of the loop: an evaluation with the device bound is under a microsecond plus its
# estimated cost (a matches() call, leaving the library for RE2, ~2.5 us: celcost's
# REGEX_CALL); binding a device (the library converting what the selectors read of it)
# ~10-20 us: BIND_COST. So one group holds the loop some 15 ms at most on a quiet core
# before it is refused (docs/benchmarks.md, "CEL selectors on the loop").
BUDGET = 300_000
BIND_COST = 400
EVAL_COST = 10  # each evaluation, on top of its estimated cost
# compiling a request's selector, charged before it is compiled (kept or not): a character
# (reading it into tokens, ~1.5 us each at worst), then a token (parsing, the library's
# compile: up to ~13 us each, for a list literal of numbers)
LEX_COST = 25
TOKEN_COST = 200

# the sizes Kubernetes declares for `device` (k8s.io/dynamic-resource-allocation/cel):
# DriverNameMaxLength, ResourceSliceMaxAttributesAndCapacitiesPerDevice (domains and
# names per device), DeviceAttributeMaxValueLength (and 1.36's list attributes' values)
_VALUE = Shape(64, elem=Shape(64))
DEVICE = Shape(
    fields={
        "driver": Shape(63),
        "allowMultipleAllocations": Shape(1),
        "attributes": Shape(32, elem=Shape(32, elem=_VALUE)),
        "capacity": Shape(32, elem=Shape(32, elem=Shape(1))),
    }
)
_SHAPES = {"device": DEVICE}


@dataclass(frozen=True)
class Selector:
    """One compiled selector and the field it came from (for errors): its estimated cost
    per evaluation and the parts of ``device`` it reads (:attr:`bridge.cel.Expression.paths`)."""

    field: str
    expression: Expression
    cost: int = 0
    reads: tuple[tuple[str, ...], ...] = ((),)


class OverBudget(Exception):
    """Compiling or matching ran past the budget on ``selector`` (an index into the
    selectors compiled or matched)."""

    def __init__(self, selector: int) -> None:
        super().__init__(selector)
        self.selector = selector


def over_budget_reason(field: str) -> str:
    """The refusal of a request whose selectors cost more than :data:`BUDGET`."""
    return (
        f"{field}: CEL: compiling the group's selectors and matching them against the "
        f"cluster's devices costs more than the bridge's budget of {BUDGET} units: simplify "
        "the selectors (shorter, fewer matches(), a more selective first selector) or use "
        "fewer distinct ones in one group"
    )


class Budget:
    """What compiling and matching selectors may still cost (CEL cost units): a count,
    never a clock."""

    def __init__(self, limit: int = BUDGET) -> None:
        self.limit = limit
        self.spent = 0

    @property
    def left(self) -> int:
        return self.limit - self.spent

    def charge(self, cost: int, selector: int) -> None:
        if self.spent + cost > self.limit:
            raise OverBudget(selector)
        self.spent += cost


def costliest(selectors: Sequence[Selector]) -> int:
    """The index of the selector whose evaluation costs most (what a refusal names when
    the budget runs out on the work they cause together)."""
    return max(range(len(selectors)), key=lambda i: selectors[i].cost, default=0)


_MISSING = object()


def projection(variable: Mapping[str, Any], paths: Sequence[tuple[str, ...]]) -> tuple[Any, ...]:
    """What of ``variable`` the ``paths`` read (hashable): the key under which devices
    evaluate alike."""
    out: list[Any] = []
    for path in paths:
        value: Any = variable
        for part in path:
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
            if value is _MISSING:
                break
        out.append(_frozen(value))
    return tuple(out)


def narrowed(variable: Mapping[str, Any], paths: Sequence[tuple[str, ...]]) -> Mapping[str, Any]:
    """``variable`` with only what ``paths`` read (binding it for the library costs with
    its size): selectors that read only those evaluate on it as on the whole."""
    if () in paths:
        return variable
    out: dict[str, Any] = {}
    for path in paths:
        if any(path[:n] in paths for n in range(1, len(path))):
            continue  # a part of it is bound whole
        src: Any = variable
        dst = out
        for depth, part in enumerate(path):
            if not isinstance(src, dict) or part not in src:
                break
            src = src[part]
            if depth == len(path) - 1:
                dst[part] = src
            elif isinstance(dst.get(part), dict):
                dst = dst[part]
            else:
                dst = dst.setdefault(part, {})
    return out


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def compile_selectors(
    selectors: Sequence[Any], where: str, label: str, obj: str, budget: Budget | None = None
) -> tuple[Selector, ...]:
    """The CEL selectors ``label`` names (a DeviceClass's ``spec.selectors`` or a request's
    ``exactly.selectors``) compiled; InvalidInput at ``where`` naming
    ``<label>[i].cel.expression`` and the reason for one that cannot be evaluated here.
    With ``budget``, each is charged what compiling it costs first (:func:`_compile`)."""
    out = []
    for i, sel in enumerate(selectors):
        at = f"{label}[{i}].cel.expression"
        source = kobj.text(sel, "cel", "expression")
        if not source:
            raise InvalidInput(where, f"{at}: only CEL selectors are supported", obj)
        if len(source) > MAX_LENGTH:
            raise InvalidInput(
                where, f"{at}: CEL: longer than {MAX_LENGTH} characters ({len(source)})", obj
            )
        try:
            expr = _compile(source, budget, i)
            cost = expr.cost(_SHAPES)
        except CelError as e:
            raise InvalidInput(where, f"{at}: CEL: {e.reason}", obj) from e
        except OverBudget as e:
            raise InvalidInput(where, over_budget_reason(at), obj) from e
        if cost > MAX_COST:
            raise InvalidInput(
                where,
                f"{at}: CEL: too complex: estimated cost {cost} exceeds the limit {MAX_COST}",
                obj,
            )
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
        out.append(Selector(at, expr, cost + EVAL_COST, expr.paths.get("device", ())))
    return tuple(out)


def _compile(source: str, budget: Budget | None, i: int) -> Expression:
    """``source`` compiled, charged to ``budget`` (selector ``i``) as it goes: its
    characters, then its tokens; the same charges whether or not it was kept."""
    if budget is not None:
        budget.charge(LEX_COST * len(source), i)
    expr = compiled(source)
    if budget is not None:
        budget.charge(TOKEN_COST * (expr.tokens if expr else count_tokens(source)), i)
    return expr or compile_expression(source)


def _value(raw: Any) -> Any:
    if isinstance(raw, dict):
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


class Selectors(tuple[Selector, ...]):
    """Selectors matched together (a DeviceClass's and a request's), with what each device
    matched, by what they read of it: devices alike there are evaluated once, when the
    request is resolved over the cluster's devices as when it is given its node's."""

    paths: tuple[tuple[str, ...], ...]
    seen: dict[tuple[Any, ...], bool]

    def __new__(cls, items: Sequence[Selector] = ()) -> Selectors:
        self = super().__new__(cls, items)
        self.paths = tuple(sorted({p for sel in self for p in sel.reads}))
        self.seen = {}
        return self


def matches(
    selectors: Sequence[Selector], variable: Mapping[str, Any], budget: Budget | None = None
) -> bool:
    """Whether the device passes every selector (a runtime error, such as an attribute
    the device lacks, is no match); with ``budget``, the device's binding and each
    evaluation are charged to it first (:class:`OverBudget` past it). With
    :class:`Selectors`, a device alike one seen before in what they read is not evaluated
    (nor charged) again."""
    if not selectors:
        return True
    if not isinstance(selectors, Selectors):
        return _evaluate(selectors, variable, budget)
    key = projection(variable, selectors.paths)
    hit = selectors.seen.get(key)
    if hit is None:
        narrow = narrowed(variable, selectors.paths)
        hit = selectors.seen[key] = _evaluate(selectors, narrow, budget)
    return hit


def _evaluate(
    selectors: Sequence[Selector], variable: Mapping[str, Any], budget: Budget | None
) -> bool:
    if budget is not None:
        budget.charge(BIND_COST, costliest(selectors))
    bound = Bindings({"device": variable})
    for i, s in enumerate(selectors):
        if budget is not None:
            budget.charge(s.cost, i)
        try:
            if not s.expression.evaluate_bool(bound):
                return False
        except CelError:
            return False
    return True
