"""Structured logging: JSON in production, readable on a terminal.

One event name per line; ``comment_id`` is bound per message by the bus edge and
``trace_id``/``span_id`` are added from the current OpenTelemetry span, so a log
line links to its trace.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from opentelemetry import trace

from kotae.settings import Settings


def _add_trace_ids(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event.setdefault("trace_id", format(ctx.trace_id, "032x"))
        event.setdefault("span_id", format(ctx.span_id, "016x"))
    return event


def configure_logging(settings: Settings, *, service: str | None = None, stream: Any = None) -> None:
    """Configure structlog and the stdlib root logger for one process."""
    out = stream or sys.stderr
    fmt = settings.log_format
    if fmt == "auto":
        fmt = "console" if getattr(out, "isatty", lambda: False)() else "json"
    level = getattr(logging, settings.log_level.upper())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False)
        if fmt == "console"
        else structlog.processors.JSONRenderer(ensure_ascii=False)
    )
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_trace_ids,
    ]
    if service:
        processors.append(lambda _l, _m, ev: {**ev, "service": service} if "service" not in ev else ev)
    processors += [structlog.processors.format_exc_info, renderer]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(level, logging.WARNING), stream=out, format="%(name)s %(levelname)s %(message)s", force=True
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger; bind request context with ``structlog.contextvars``."""
    return structlog.get_logger(name)
