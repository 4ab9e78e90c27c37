"""When a routine wakes its agent: a cron expression or a window, each in an IANA time zone.

**Cron** is a standard five-field expression (minute, hour, day of month, month, day of week), parsed, stepped and
put into words by ``cronsim``. Daylight-saving changes follow cron's own rule (cronsim's, as cronie does): a
wall-clock time that does not exist that day (the spring gap) fires at the first minute after the gap, and a time
that happens twice (the autumn fold) fires once, at its first occurrence.

**A window** is "every N minutes or hours, between two wall-clock times, on some days", in one line:

- ``every 2 hours between 09:00 and 17:00 on weekdays`` wakes at 09:00, 11:00, 13:00, 15:00 and 17:00, Monday to
  Friday;
- ``every 30 minutes between 08:00 and 12:00`` wakes at 08:00, 08:30, ... 12:00, every day;
- ``every 6 hours`` wakes at 00:00, 06:00, 12:00 and 18:00, every day;
- ``every 1 hour between 22:00 and 23:30 on mon,wed,fri`` wakes at 22:00 and 23:00 on those days;
- ``every 15 minutes on weekends``; days are ``weekdays``, ``weekends``, ``every day``, or a list of ``mon`` ...
  ``sun`` (a range such as ``mon-thu`` too), comma-separated.

Slots start at the window's start and step by the interval up to its end, inclusive (the end must come after the
start, within one day). A slot that does not exist on a daylight-saving day (the spring gap) is skipped; a slot that
happens twice (the autumn fold) wakes once, at its first occurrence. :func:`parse_window` is the one parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MAX_TEXT = 200

_WINDOW = re.compile(
    r"every\s+(?P<n>\d{1,4})\s+(?P<unit>minutes?|hours?)"
    r"(?:\s+between\s+(?P<start>\d{1,2}:\d{2})\s+and\s+(?P<end>\d{1,2}:\d{2}))?"
    r"(?:\s+on\s+(?P<days>.+?))?",
    re.IGNORECASE,
)


class TimingError(ValueError):
    """A timing that cannot be used; its message says why, for the coach or the person."""


@dataclass(frozen=True)
class Window:
    """Every ``every_minutes`` from ``start`` to ``end`` (inclusive), on ``days`` (0 is Monday)."""

    every_minutes: int
    start: time
    end: time
    days: frozenset[int]

    def in_words(self) -> str:
        n, unit = (self.every_minutes // 60, "hour") if self.every_minutes % 60 == 0 else (self.every_minutes, "minute")
        words = f"every {n} {unit}{'' if n == 1 else 's'}"
        if (self.start, self.end) != (time(0, 0), time(23, 59)):
            words += f" between {self.start:%H:%M} and {self.end:%H:%M}"
        return words + f" {_days_in_words(self.days)}"

    def slots(self, day: date) -> list[time]:
        if day.weekday() not in self.days:
            return []
        start = self.start.hour * 60 + self.start.minute
        end = self.end.hour * 60 + self.end.minute
        return [time(m // 60, m % 60) for m in range(start, end + 1, self.every_minutes)]


def _days_in_words(days: frozenset[int]) -> str:
    if days == frozenset(range(7)):
        return "every day"
    if days == frozenset(range(5)):
        return "on weekdays"
    if days == frozenset({5, 6}):
        return "on weekends"
    return "on " + ", ".join(DAY_NAMES[d] for d in sorted(days))


def _clock(text: str, what: str) -> time:
    hours, minutes = (int(part) for part in text.split(":"))
    if hours > 23 or minutes > 59:
        raise TimingError(f"bad window: {what} {text!r} is not a time of day (00:00 to 23:59)")
    return time(hours, minutes)


def _days(text: str) -> frozenset[int]:
    words = text.strip().lower()
    if words in ("every day", "daily"):
        return frozenset(range(7))
    if words == "weekdays":
        return frozenset(range(5))
    if words == "weekends":
        return frozenset({5, 6})
    found: set[int] = set()
    for part in (p.strip() for p in words.split(",")):
        first, _, last = part.partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise TimingError(
                f"bad window: days {text!r}: use weekdays, weekends, every day, or mon ... sun (a list or a range)"
            )
        a, b = DAYS.index(first), DAYS.index(last or first)
        if b < a:
            raise TimingError(f"bad window: the day range {part!r} runs backwards")
        found.update(range(a, b + 1))
    return frozenset(found)


def parse_window(text: str) -> Window:
    """The window ``text`` describes (see the module's documentation); :class:`TimingError` saying why not."""
    if len(text) > MAX_TEXT:
        raise TimingError(f"bad window: at most {MAX_TEXT} characters")
    match = _WINDOW.fullmatch(text.strip())
    if match is None:
        raise TimingError(
            f"bad window {text!r}: write it as 'every N minutes|hours [between HH:MM and HH:MM] [on days]', "
            "for example 'every 2 hours between 09:00 and 17:00 on weekdays'"
        )
    n = int(match["n"])
    every = n * 60 if match["unit"].lower().startswith("hour") else n
    if not 1 <= every <= 24 * 60:
        raise TimingError("bad window: the interval must be between 1 minute and 24 hours")
    start = _clock(match["start"], "start") if match["start"] else time(0, 0)
    end = _clock(match["end"], "end") if match["end"] else time(23, 59)
    if end <= start:
        raise TimingError(f"bad window: the end {end:%H:%M} must come after the start {start:%H:%M} in one day")
    days = _days(match["days"]) if match["days"] else frozenset(range(7))
    return Window(every, start, end, days)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; :class:`TimingError` when there is none."""
    if len(name) > 64 or name not in _zones():
        raise TimingError(f"bad timezone {name!r}: use an IANA time zone such as 'Europe/Paris' or 'UTC'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:  # pragma: no cover - listed zones load
        raise TimingError(f"bad timezone {name!r}") from exc


_ZONES: frozenset[str] | None = None


def _zones() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones()) | {"UTC"}
    return _ZONES


def _exists(local: datetime, tz: tzinfo) -> bool:
    """Whether the naive wall-clock ``local`` happens in ``tz`` (not in a spring gap)."""
    aware = local.replace(tzinfo=tz)
    back = aware.astimezone(UTC).astimezone(tz)
    return back.replace(tzinfo=None) == local


@dataclass(frozen=True)
class Timing:
    """A routine's timing: exactly one of ``cron`` and ``window``, in ``timezone``."""

    cron: str | None
    window: str | None
    timezone: str

    def check(self) -> None:
        """:class:`TimingError` when the timing cannot be used: two timings or none, a bad cron, window or zone."""
        if (self.cron is None) == (self.window is None):
            raise TimingError("a timing is a cron expression or a window, exactly one")
        tz = zone(self.timezone)
        if self.cron is not None:
            if len(self.cron) > MAX_TEXT:
                raise TimingError(f"bad cron: at most {MAX_TEXT} characters")
            if len(self.cron.split()) != 5:
                raise TimingError(f"bad cron {self.cron!r}: five fields (minute hour day month weekday)")
            try:
                CronSim(self.cron, datetime.now(tz))
            except (CronSimError, ValueError) as exc:
                raise TimingError(f"bad cron {self.cron!r}: {exc}") from None
        else:
            assert self.window is not None
            parse_window(self.window)

    def in_words(self) -> str:
        """The timing as a person reads it, with its time zone."""
        if self.cron is not None:
            try:
                words = CronSim(self.cron, datetime.now(UTC)).explain()
            except Exception:  # words are a courtesy; the expression stays
                words = "on cron's schedule"
            return f"{words} (cron {self.cron}), {self.timezone}"
        assert self.window is not None
        return f"{parse_window(self.window).in_words()}, {self.timezone}"

    def wakes_after(self, after: datetime) -> Iterator[datetime]:
        """The wake-ups strictly after ``after`` (aware), in order, as aware datetimes in the timing's zone."""
        tz = zone(self.timezone)
        local = after.astimezone(tz)
        if self.cron is not None:
            for wake in CronSim(self.cron, local):
                if wake > after:
                    yield wake
            return
        assert self.window is not None
        window = parse_window(self.window)
        day = local.date()
        for _ in range(366 * 2):  # any window wakes at least once a week: this bound is never reached
            for slot in window.slots(day):
                naive = datetime.combine(day, slot)
                if not _exists(naive, tz):
                    continue  # the spring gap: this slot does not happen today
                wake = naive.replace(tzinfo=tz, fold=0)
                if wake > after:
                    yield wake
            day += timedelta(days=1)

    def next_after(self, after: datetime) -> datetime | None:
        return next(iter(self.wakes_after(after)), None)

    def next_wakes(self, after: datetime, count: int = 3) -> list[datetime]:
        found = []
        for wake in self.wakes_after(after):
            found.append(wake)
            if len(found) == count:
                break
        return found


def wake_in_words(wake: datetime) -> str:
    """One wake-up as a person reads it in the routine's zone: ``Sun 29 Mar 2026 09:00 CEST (UTC+02:00)``."""
    offset = wake.strftime("%z")
    return f"{wake:%a %d %b %Y %H:%M} {wake.tzname()} (UTC{offset[:3]}:{offset[3:]})"
