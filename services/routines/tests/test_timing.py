"""The timing rules: the window parser, cron and windows stepped across daylight-saving changes, and the timing in
words (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from routines.domain.timing import Timing, TimingError, Window, parse_window, wake_in_words

PARIS = ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    ("text", "every", "start", "end", "days"),
    [
        ("every 2 hours between 09:00 and 17:00 on weekdays", 120, "09:00", "17:00", {0, 1, 2, 3, 4}),
        ("every 30 minutes between 08:00 and 12:00", 30, "08:00", "12:00", set(range(7))),
        ("every 6 hours", 360, "00:00", "23:59", set(range(7))),
        ("every 1 hour between 22:00 and 23:30 on mon,wed,fri", 60, "22:00", "23:30", {0, 2, 4}),
        ("Every 15 Minutes on weekends", 15, "00:00", "23:59", {5, 6}),
        ("every 45 minutes on mon-thu", 45, "00:00", "23:59", {0, 1, 2, 3}),
        ("every 1 minute on every day", 1, "00:00", "23:59", set(range(7))),
    ],
)
def test_a_window_parses(text: str, every: int, start: str, end: str, days: set[int]) -> None:
    window = parse_window(text)
    assert (window.every_minutes, f"{window.start:%H:%M}", f"{window.end:%H:%M}", set(window.days)) == (
        every,
        start,
        end,
        days,
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("every day at nine", "write it as"),
        ("every 0 minutes", "between 1 minute and 24 hours"),
        ("every 25 hours", "between 1 minute and 24 hours"),
        ("every 2 hours between 17:00 and 09:00", "must come after the start"),
        ("every 2 hours between 09:00 and 24:00", "not a time of day"),
        ("every 2 hours on funday", "days 'funday'"),
        ("every 2 hours on fri-mon", "runs backwards"),
        ("every 2 hours " + "x" * 200, "at most 200"),
    ],
)
def test_a_bad_window_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(TimingError, match="bad window") as refused:
        parse_window(text)
    assert why in str(refused.value)


@pytest.mark.parametrize(
    ("timing", "why"),
    [
        (Timing("61 * * * *", None, "UTC"), "bad cron"),
        (Timing("* * *", None, "UTC"), "bad cron"),
        (Timing("0 9 * * *", None, "Mars/Olympus"), "bad timezone"),
        (Timing("0 9 * * *", "every 2 hours", "UTC"), "exactly one"),
        (Timing(None, None, "UTC"), "exactly one"),
        (Timing(None, "every two hours", "UTC"), "bad window"),
    ],
)
def test_a_bad_timing_is_refused(timing: Timing, why: str) -> None:
    with pytest.raises(TimingError, match=why):
        timing.check()


def local(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=PARIS)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("timing", "after", "wakes"),
    [
        # Spring forward (Paris, 29 March 2026, 02:00 -> 03:00): cron's 02:30 fires at 03:00 that day.
        (
            Timing("30 2 * * *", None, "Europe/Paris"),
            local(2026, 3, 27, 12),
            [
                "Sat 28 Mar 2026 02:30 CET (UTC+01:00)",
                "Sun 29 Mar 2026 03:00 CEST (UTC+02:00)",
                "Mon 30 Mar 2026 02:30 CEST (UTC+02:00)",
            ],
        ),
        # Fall back (25 October 2026, 03:00 -> 02:00): 02:30 happens twice and fires once.
        (
            Timing("30 2 * * *", None, "Europe/Paris"),
            local(2026, 10, 24, 12),
            [
                "Sun 25 Oct 2026 02:30 CEST (UTC+02:00)",
                "Mon 26 Oct 2026 02:30 CET (UTC+01:00)",
                "Tue 27 Oct 2026 02:30 CET (UTC+01:00)",
            ],
        ),
        # A window: the 02:00 slot does not exist on the spring day and is skipped.
        (
            Timing(None, "every 1 hour between 01:00 and 03:00", "Europe/Paris"),
            local(2026, 3, 29, 0, 30),
            [
                "Sun 29 Mar 2026 01:00 CET (UTC+01:00)",
                "Sun 29 Mar 2026 03:00 CEST (UTC+02:00)",
                "Mon 30 Mar 2026 01:00 CEST (UTC+02:00)",
            ],
        ),
        # A window on weekdays: Friday's last slot, then Monday.
        (
            Timing(None, "every 2 hours between 09:00 and 17:00 on weekdays", "Europe/Paris"),
            local(2026, 11, 27, 16),
            [
                "Fri 27 Nov 2026 17:00 CET (UTC+01:00)",
                "Mon 30 Nov 2026 09:00 CET (UTC+01:00)",
                "Mon 30 Nov 2026 11:00 CET (UTC+01:00)",
            ],
        ),
        # The autumn fold in a window: 02:00 happens twice and wakes once.
        (
            Timing(None, "every 1 hour between 01:00 and 03:00", "Europe/Paris"),
            local(2026, 10, 25, 0, 30),
            [
                "Sun 25 Oct 2026 01:00 CEST (UTC+02:00)",
                "Sun 25 Oct 2026 02:00 CEST (UTC+02:00)",
                "Sun 25 Oct 2026 03:00 CET (UTC+01:00)",
            ],
        ),
    ],
)
def test_the_next_wakes_in_words_cross_daylight_saving(timing: Timing, after: datetime, wakes: list[str]) -> None:
    timing.check()
    assert [wake_in_words(w) for w in timing.next_wakes(after, 3)] == wakes


@pytest.mark.parametrize(
    ("timing", "words"),
    [
        (
            Timing("0 9 * * 1-5", None, "Europe/Paris"),
            "At 09:00 on Monday through Friday (cron 0 9 * * 1-5), Europe/Paris",
        ),
        (
            Timing(None, "every 2 hours between 09:00 and 17:00 on weekdays", "Europe/Paris"),
            "every 2 hours between 09:00 and 17:00 on weekdays, Europe/Paris",
        ),
        (Timing(None, "every 30 minutes on sat", "UTC"), "every 30 minutes on Saturday, UTC"),
        (Timing(None, "every 1 hour", "Asia/Tokyo"), "every 1 hour every day, Asia/Tokyo"),
    ],
)
def test_the_timing_in_words(timing: Timing, words: str) -> None:
    assert timing.in_words() == words


def test_a_wake_after_a_due_time_is_strictly_later() -> None:
    timing = Timing("0 * * * *", None, "UTC")
    due = datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert timing.next_after(due) == datetime(2026, 12, 1, 11, tzinfo=UTC)
    assert isinstance(parse_window("every 6 hours"), Window)
