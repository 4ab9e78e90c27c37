"""Logging that stays readable, and small, while something the service needs is down.

A lost broker, database or Redis makes the clients fail many times a second (aiokafka's "Unable connect to
node ..." every 100 ms, per client), each failure a log line. :class:`RepeatFilter` lets the first of each kind
of line through and then one per interval, with how many were left out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

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
    passes, annotated ``(and 1,234 more like it in the last 61 s)`` when any were dropped, and opens the next
    interval. Lines whose template varies (an f-string) are each their own kind and are never collapsed.

    Install it on a handler (it then covers every logger whose records reach that handler), one filter per
    handler: the filter counts each record it sees. ``interval`` 0 lets everything through. ``clock`` (seconds,
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
        if self.interval <= 0:
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
        return True

    def _forget_closed(self, now: float) -> None:
        closed = [key for key, window in self._windows.items() if now - window.opened >= self.interval]
        for key in closed:
            del self._windows[key]
        if len(self._windows) >= MAX_KINDS:  # every kind still open: make room all the same
            self._windows.clear()
