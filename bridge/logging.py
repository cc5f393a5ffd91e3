"""structlog setup. Constant event names; variables go in keys (pod=, group=, job_id=)."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from bridge.text import clip

# Keys whose values are never logged, whatever a caller passes by mistake.
_SECRET_KEYS = frozenset({"token", "jwt", "authorization", "x-slurm-user-token", "password"})


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if key.lower() in _SECRET_KEYS:
            event[key] = "<redacted>"
    return event


# The longest value a log line holds (tenant text: names, uids, reasons quoting annotation
# values), and the longest rendered traceback (its message may quote such text too).
LOG_VALUE_MAX = 2048
LOG_EXCEPTION_MAX = 16384


def _clip(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Every text value through :func:`bridge.text.clip` (cut, hidden characters escaped);
    a traceback is only cut (its lines are real; the JSON renderer escapes them)."""
    for key, value in event.items():
        if key == "exception" and isinstance(value, str):
            if len(value) > LOG_EXCEPTION_MAX:
                cut = len(value) - LOG_EXCEPTION_MAX
                event[key] = f"{value[:LOG_EXCEPTION_MAX]}...(+{cut} chars)"
        elif isinstance(value, str | BaseException):
            event[key] = clip(value, LOG_VALUE_MAX)
    return event


def configure_logging(level: str = "info", fmt: str = "json") -> None:
    """Configure structlog and the stdlib root logger once, from the composition root."""
    lvl = getattr(logging, level.upper())
    logging.basicConfig(stream=sys.stderr, level=lvl, format="%(message)s", force=True)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            _clip,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
