"""How long a start is waited for: as long as the starting process gets somewhere, up to a generous bound.

A fixed wait per process fails a start that is merely slow: six services importing, migrating and joining their
consumer groups at once on two busy cores can take minutes, and a wait tuned for a quiet machine is wrong there.
So a start is judged by progress instead. A process that is alive, and whose log grows or which spends CPU, is
still starting; only a process that exits, one that shows neither sign for :attr:`StartSettings.stall_seconds`, or
one not ready within :attr:`StartSettings.timeout_seconds` fails the start (with its log tail).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class StartSettings(BaseSettings):
    """How long ``make run``, ``make test``, ``make bench`` and the devstack wait for a server or a service to start
    (environment variables ``ASSENT_START_TIMEOUT_SECONDS`` and ``ASSENT_START_STALL_SECONDS``)."""

    model_config = SettingsConfigDict(env_prefix="ASSENT_START_", frozen=True)

    timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        description="The longest a server or service may take to become ready while it still makes progress.",
    )
    stall_seconds: float = Field(
        default=120.0,
        gt=0,
        description=(
            "How long a starting server or service may go without progress (its log unchanged and no CPU spent) "
            "before its start fails."
        ),
    )


def start_settings() -> StartSettings:
    """The limits from the environment; a value that is not a positive number is refused with its name."""
    return StartSettings()


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time (user and system) spent so far by ``pids`` and by their children that have ended, from /proc."""
    total = 0
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        # utime, stime, cutime, cstime: fields 14-17 of stat(5), 11-14 after the command name
        total += sum(int(f) for f in fields[11:15])
    return total / _TICKS


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class StartWatch:
    """Tells whether a starting process is still worth waiting for.

    ``pids`` is called on every look (a server's processes may change as it starts); ``logs`` are the files it
    writes. :meth:`verdict` answers None while the start may go on, else why it must stop.
    """

    def __init__(
        self,
        name: str,
        pids: Callable[[], Iterable[int]],
        logs: Sequence[Path],
        settings: StartSettings | None = None,
        *,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or start_settings()
        self.name = name
        self._pids = pids
        self._logs = tuple(logs)
        self._clock = clock
        self.started = clock()
        self.timeout = self.settings.timeout_seconds if timeout is None else timeout
        self._last_change = self.started
        self._last = self._sample()

    def _sample(self) -> tuple[tuple[int, ...], float]:
        return tuple(_size(log) for log in self._logs), cpu_seconds(self._pids())

    def elapsed(self) -> float:
        """Seconds since the watch began."""
        return self._clock() - self.started

    def verdict(self) -> str | None:
        """None while the process is within its bound and has made progress lately; otherwise the reason to stop."""
        now = self._clock()
        sample = self._sample()
        if sample != self._last:
            self._last, self._last_change = sample, now
        if now - self.started > self.timeout:
            return (
                f"{self.name} was not ready {self.timeout:.0f}s after it started, although it was still making "
                f"progress (set ASSENT_START_TIMEOUT_SECONDS to wait longer)"
            )
        still = now - self._last_change
        if still > self.settings.stall_seconds:
            return (
                f"{self.name} stopped making progress: not ready {now - self.started:.0f}s after it started, its log "
                f"unchanged and no CPU spent for the last {still:.0f}s (ASSENT_START_STALL_SECONDS="
                f"{self.settings.stall_seconds:g})"
            )
        return None
