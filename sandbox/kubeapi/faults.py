"""Test hooks: fault injection and the request log."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Fault:
    """Answer requests matching ``path`` (a regex searched in the path) and ``method``
    (``"*"`` = any) with ``status`` (a Status body), or drop the connection, optionally after
    ``delay`` seconds. ``count`` = how many matching requests are hit (None = until removed).
    ``status=0`` and ``drop=False`` with a delay = only slow the request down. ``user``
    aims the fault at one authenticated username (None = anyone's requests), so a test's
    other clients cannot consume a fault meant for the client under test."""

    path: str
    method: str = "*"
    status: int = 500
    count: int | None = 1
    drop: bool = False
    delay: float = 0.0
    user: str | None = None
    id: int = 0
    hits: int = 0

    def matches(self, method: str, path: str, username: str) -> bool:
        return (
            (self.method == "*" or self.method.upper() == method.upper())
            and (self.user is None or self.user == username)
            and bool(re.search(self.path, path))
        )


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: str
    status: int


@dataclass
class Faults:
    faults: list[Fault] = field(default_factory=list)
    _next_id: int = 1

    def add(self, fault: Fault) -> Fault:
        re.compile(fault.path)
        fault.id = self._next_id
        self._next_id += 1
        self.faults.append(fault)
        return fault

    def take(self, method: str, path: str, username: str) -> Fault | None:
        """The first active fault for this request (consumes one of its count)."""
        for f in self.faults:
            if f.matches(method, path, username):
                f.hits += 1
                if f.count is not None:
                    f.count -= 1
                    if f.count <= 0:
                        self.faults.remove(f)
                return f
        return None

    def clear(self) -> None:
        self.faults.clear()


class RequestLog:
    """The last ``size`` requests (method, path, query, status), oldest first."""

    def __init__(self, size: int = 10_000) -> None:
        self._entries: deque[LoggedRequest] = deque(maxlen=size)

    def add(self, entry: LoggedRequest) -> None:
        self._entries.append(entry)

    def entries(self, method: str | None = None, path: str | None = None) -> list[LoggedRequest]:
        """Logged requests, filtered by method and by a regex searched in the path."""
        return [
            e
            for e in self._entries
            if (method is None or e.method == method.upper())
            and (path is None or re.search(path, e.path))
        ]

    def clear(self) -> None:
        self._entries.clear()
