"""Slurm hostlist expressions: ``kube-node-[0-3,7]``, ``a[01-03]b``, ``x-[1-2]-[3-4]``.

:func:`expand` turns an expression into the ordered list of host names (the order Slurm
prints: left to right, the last bracket varying fastest); :func:`compress` turns names
back into one expression. Zero padding is kept: ``n[08-10]`` is ``n08, n09, n10`` and
names of different widths are never merged into one range.

Pure: no I/O. Junk raises :class:`bridge.errors.InvalidInput` (a ``ValueError`` too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bridge.errors import InvalidInput

# Slurm caps a single range (MAX_RANGE is 64k); we refuse to build more names than this.
MAX_HOSTS = 1 << 16
_NAME_CHARS = re.compile(r"^[^\[\],\s]*$")
_TRAILING_NUM = re.compile(r"^(.*?)(\d+)$")


class HostlistError(InvalidInput, ValueError):
    """A hostlist expression that cannot be expanded; names the expression and the reason."""

    def __init__(self, expr: str, reason: str) -> None:
        super().__init__("hostlist", f"{reason} in {expr!r}")


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in expr:
        if ch == "[":
            if depth:
                raise HostlistError(expr, "nested '['")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(expr, "unbalanced ']'")
            depth = 0
        if ch == "," and not depth:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(expr, "unbalanced '['")
    parts.append("".join(cur))
    return parts


def _expand_range(expr: str, body: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        item = item.strip()
        if not item:
            raise HostlistError(expr, "empty range item")
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(expr, f"bad range {item!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(expr, f"descending range {item!r}")
        if b - a + 1 > MAX_HOSTS:
            raise HostlistError(expr, f"range {item!r} too large")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


def _expand_one(expr: str, term: str) -> list[str]:
    names = [""]
    pos = 0
    while pos < len(term):
        start = term.find("[", pos)
        if start < 0:
            literal, pos = term[pos:], len(term)
            names = [n + literal for n in names]
            continue
        end = term.find("]", start)
        literal = term[pos:start]
        values = _expand_range(expr, term[start + 1 : end])
        if len(names) * len(values) > MAX_HOSTS:
            raise HostlistError(expr, "too many hosts")
        names = [n + literal + v for n in names for v in values]
        pos = end + 1
    return names


def expand(expr: str) -> list[str]:
    """All host names of ``expr``, in Slurm's order. ``""`` and ``"(null)"`` give ``[]``."""
    if not isinstance(expr, str):
        raise HostlistError(repr(expr), "not a string")
    expr = expr.strip()
    if expr in ("", "(null)"):
        return []
    out: list[str] = []
    for term in _split_top(expr):
        term = term.strip()
        if not term:
            raise HostlistError(expr, "empty host name")
        if any(ch.isspace() for ch in term):
            raise HostlistError(expr, "whitespace in a host name")
        out.extend(_expand_one(expr, term))
        if len(out) > MAX_HOSTS:
            raise HostlistError(expr, "too many hosts")
    return out


def _fmt_range(width: int, lo: int, hi: int) -> str:
    a, b = str(lo).zfill(width), str(hi).zfill(width)
    return a if lo == hi else f"{a}-{b}"


def compress(names: Iterable[str]) -> str:
    """One hostlist expression for ``names`` (order kept, runs folded into ranges).

    Names are grouped by (prefix, digit width) where the numeric suffix is the last run
    of digits; ``expand(compress(xs)) == xs`` for any list of distinct bracket-free
    names whose groups appear in contiguous ascending runs, and the result is always a
    valid expression that expands to the same set of names.
    """
    items = list(names)
    for n in items:
        if not n or not _NAME_CHARS.match(n) or any(ch.isspace() for ch in n):
            raise HostlistError(n, "host names must be non-empty, without '[', ']', ',' or spaces")
    # Each group: (prefix, width, numbers) or a plain name (width -1) kept in place.
    groups: list[tuple[str, int, list[int]]] = []
    for n in items:
        m = _TRAILING_NUM.match(n)
        if not m:
            groups.append((n, -1, []))
            continue
        prefix, digits = m.group(1), m.group(2)
        num = int(digits)
        padded = digits.startswith("0") and len(digits) > 1
        last = groups[-1] if groups else None
        if last and last[0] == prefix and last[1] >= 0 and num > last[2][-1]:
            lw = last[1]
            fits = (
                (lw == 0 and not padded)
                or (lw > 0 and len(digits) == lw)
                or (lw > 0 and not padded and len(digits) > lw and len(str(last[2][-1])) <= lw)
            )
            if fits:
                last[2].append(num)
                continue
        groups.append((prefix, len(digits) if padded else 0, [num]))
    out: list[str] = []
    for prefix, width, nums in groups:
        if width == -1:
            out.append(prefix)
            continue
        if len(nums) == 1:
            out.append(prefix + str(nums[0]).zfill(width))
            continue
        ranges: list[str] = []
        lo = prev = nums[0]
        for num in nums[1:]:
            if num != prev + 1:
                ranges.append(_fmt_range(width, lo, prev))
                lo = num
            prev = num
        ranges.append(_fmt_range(width, lo, prev))
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)
