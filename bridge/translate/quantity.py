"""Kubernetes resource quantities (``500m``, ``1.5Gi``, ``2e3``) as exact decimals.

The grammar is Kubernetes' own (``k8s.io/apimachinery/pkg/api/resource``)::

    quantity ::= signedNumber suffix
    suffix   ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (m "" k M G T P E)
               | decimalExponent (e|E signedInteger)

Parsing is exact (``Decimal``): rounding happens once, at the unit the caller needs,
always upwards, so a pod never gets less than it asked for.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from bridge.errors import InvalidInput

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_QUANTITY = re.compile(
    rf"^(?P<num>{_NUMBER})(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[mkMGTPE]?))$"
)
# Kubernetes caps quantities far below this; the cap keeps Decimal arithmetic cheap.
_MAX_EXPONENT = 30
_MAX_LEN = 64
MIB = Decimal(1024 * 1024)


def parse_quantity(value: str, *, field: str, obj: str | None = None) -> Decimal:
    """Parse a Kubernetes quantity exactly, or raise InvalidInput naming ``field``."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"expected a quantity string, got {type(value).__name__}", obj)
    text = value.strip()
    if len(text) > _MAX_LEN:
        raise InvalidInput(field, f"quantity longer than {_MAX_LEN} characters", obj)
    m = _QUANTITY.match(text)
    if m is None:
        raise InvalidInput(
            field, f"{value!r} is not a Kubernetes quantity (e.g. 500m, 2, 1.5Gi, 4e3)", obj
        )
    try:
        number = Decimal(m["num"])
    except InvalidOperation:  # pragma: no cover - the regex only admits valid numbers
        raise InvalidInput(field, f"{value!r} is not a number", obj) from None
    if m["bin"]:
        return number * (Decimal(1024) ** _BINARY[m["bin"]])
    exponent = int(m["exp"][1:]) if m["exp"] else _DECIMAL[m["dec"] or ""]
    if abs(exponent) > _MAX_EXPONENT:
        raise InvalidInput(field, f"{value!r}: exponent out of range", obj)
    return number.scaleb(exponent)


def parse_non_negative(value: str, *, field: str, obj: str | None = None) -> Decimal:
    """Like :func:`parse_quantity`, but a negative amount is an error too."""
    q = parse_quantity(value, field=field, obj=obj)
    if q < 0:
        raise InvalidInput(field, "must not be negative", obj)
    return q


def ceil_int(q: Decimal) -> int:
    """Round up to a whole number."""
    return int(q.to_integral_value(rounding=ROUND_CEILING))


def whole_cpus(value: str, *, field: str, obj: str | None = None) -> int:
    """A CPU quantity rounded UP to whole CPUs (``500m`` -> 1, ``2`` -> 2)."""
    q = parse_non_negative(value, field=field, obj=obj)
    return ceil_int(q)


def mebibytes(value: str, *, field: str, obj: str | None = None) -> int:
    """A byte quantity rounded UP to MiB (``500Mi`` -> 500, ``1G`` -> 954)."""
    q = parse_non_negative(value, field=field, obj=obj)
    return ceil_int(q / MIB)


def whole_count(value: str, *, field: str, obj: str | None = None) -> int:
    """A count that must be a non-negative integer (GPUs): ``2`` ok, ``500m`` an error."""
    q = parse_non_negative(value, field=field, obj=obj)
    if q != q.to_integral_value():
        raise InvalidInput(field, f"{value!r} must be a whole number", obj)
    return int(q)
