"""A service's logs: one JSON object per line, or the readable form for a terminal; small while something the
service needs is down.

:func:`setup_logging` sends every logger's records (uvicorn's, aiokafka's, the services') through one handler on
the root logger, formatted by :class:`JsonLines` (``LOG_FORMAT=json``, the default) or as one readable line
(``console``). Each JSON line holds ``time``, ``level``, ``logger``, ``message`` and ``service``; ``trace_id`` and
``span_id`` (of the current OpenTelemetry span, or the ones the record names); ``topic`` and ``message_id`` while a
consumer handles a message (:func:`message_context`); ``exc_info`` with the traceback; ``repeated`` when
:class:`RepeatFilter` left lines of its kind out; and whatever a call adds with ``extra=``.

A lost broker, database or Redis makes the clients fail many times a second (aiokafka's "Unable connect to
node ..." every 100 ms, per client), each failure a log line. :class:`RepeatFilter` lets the first of each kind
of line through and then one per interval, with how many were left out.

The trail (``assent.trail``, on with ``ASSENT_LOG_TRAIL=true``) is one line per message handled and per HTTP
request answered, each in its trace: what a request or a message went through, service by service, read from the
logs alone. It is off by default: a line per message costs the hot path more than the rest of the logging does.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

LogFormat = Literal["json", "console"]

TRAIL = logging.getLogger("assent.trail")
"""One line per message handled and per request answered, when the trail is on (see the module's doc)."""

_MESSAGE: ContextVar[tuple[str, object] | None] = ContextVar("assent_log_message", default=None)


@contextmanager
def message_context(topic: str, message_id: object) -> Iterator[None]:
    """Name ``topic`` and ``message_id`` in every line logged inside (the consumer wraps each message's handling)."""
    token = name_message(topic, message_id)
    try:
        yield
    finally:
        unname_message(token)


def name_message(topic: str, message_id: object) -> Token[tuple[str, object] | None]:
    """:func:`message_context`'s entry, for a caller that manages its own ``try``; pass the result to
    :func:`unname_message`."""
    return _MESSAGE.set((topic, message_id))


def unname_message(token: Token[tuple[str, object] | None]) -> None:
    _MESSAGE.reset(token)


class JsonLines(JsonFormatter):
    """One JSON object per record (python-json-logger), with the service, the trace and the message handled."""

    def __init__(self, service: str) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            static_fields={"service": service},
            timestamp="time",
            json_ensure_ascii=False,
        )

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        super().add_fields(log_data, record, message_dict)
        if "trace_id" not in log_data:
            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                log_data["trace_id"] = format(context.trace_id, "032x")
                log_data["span_id"] = format(context.span_id, "016x")
        handled = _MESSAGE.get()
        if handled is not None:
            log_data.setdefault("topic", handled[0])
            log_data.setdefault("message_id", str(handled[1]))


def console_format(service: str) -> logging.Formatter:
    """The readable form: ``<time> <service> <LEVEL> <logger>: <message>``."""
    return logging.Formatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")


def setup_logging(
    service: str,
    *,
    level: str | int = "INFO",
    log_format: LogFormat = "json",
    repeat_seconds: float = 60.0,
    trail: bool = False,
    stream: Any = None,
) -> logging.Handler:
    """Make the root logger's only handler write to ``stream`` (stderr) in ``log_format``, collapsing repeated lines
    (:class:`RepeatFilter`), at ``level``; the trail's lines pass when ``trail``. Returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonLines(service) if log_format == "json" else console_format(service))
    handler.addFilter(RepeatFilter(repeat_seconds))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's loggers write through the root's handler, even where something configured them with handlers of
    # their own that stop there (uvicorn's default dictConfig does).
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        for old in list(uvicorn_logger.handlers):
            uvicorn_logger.removeHandler(old)
        uvicorn_logger.propagate = True
        uvicorn_logger.disabled = False
    TRAIL.setLevel(logging.INFO if trail else logging.WARNING)
    logging.captureWarnings(True)  # a library's warning is a line like any other, not raw text on stderr
    return handler


DEFAULT_INTERVAL_SECONDS = 60.0
MAX_KINDS = 10_000
"""How many kinds of line the filter tracks at once; past that it forgets those whose interval has ended."""


@dataclass
class _Window:
    opened: float
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """Collapses repeated log lines: per kind of line (the logger's name, the level and the message's template,
    ``record.msg``, before its ``%``-arguments are filled in), the first record passes and opens an interval of
    ``interval`` seconds; the records of that kind within it are dropped and counted; the first one after it
    passes, annotated ``(and 1,234 more like it in the last 61 s)`` when any were dropped (and with the count as
    ``record.repeated``), and opens the next interval. Lines whose template varies (an f-string) are each their
    own kind and are never collapsed.

    Install it on a handler (it then covers every logger whose records reach that handler), one filter per
    handler: the filter counts each record it sees. ``interval`` 0 lets everything through, and so does it the
    trail's lines (:data:`TRAIL`), each of which is about one message or request. ``clock`` (seconds,
    monotonic) is for tests. Safe to use from several threads.
    """

    def __init__(
        self, interval: float = DEFAULT_INTERVAL_SECONDS, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        if interval < 0:
            raise ValueError(f"the repeat interval must not be negative, not {interval}")
        self.interval = interval
        self._clock = clock
        self._windows: dict[tuple[str, int, str], _Window] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interval <= 0 or record.name == TRAIL.name:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window.opened < self.interval:
                window.suppressed += 1
                return False
            if window is None and len(self._windows) >= MAX_KINDS:
                self._forget_closed(now)
            self._windows[key] = _Window(opened=now)
        if window is not None and window.suppressed:
            try:
                message = record.getMessage()
            except Exception:  # arguments that do not fit the template: the handler reports it as it would
                return True
            # Filled in here, so that the note follows the message whatever the handler's format.
            record.msg = f"{message} (and {window.suppressed:,} more like it in the last {now - window.opened:.0f} s)"
            record.args = None
            record.repeated = window.suppressed  # a field of its own in a JSON line

        return True

    def _forget_closed(self, now: float) -> None:
        closed = [key for key, window in self._windows.items() if now - window.opened >= self.interval]
        for key in closed:
            del self._windows[key]
        if len(self._windows) >= MAX_KINDS:  # every kind still open: make room all the same
            self._windows.clear()
