"""The repeat filter: per logger, level and template, the first line, then one per interval with a count."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

import pytest

from assent.logs import RepeatFilter

UNABLE = "Unable connect to node with id %s: %s"
RELAY = "outbox relay failed; trying again"


@dataclass(frozen=True)
class Line:
    at: float
    msg: str
    args: tuple[object, ...] = ()
    name: str = "aiokafka"
    level: int = logging.ERROR


def record(line: Line) -> logging.LogRecord:
    return logging.LogRecord(line.name, line.level, __file__, 1, line.msg, line.args, None)


CASES: dict[str, tuple[float, list[Line], list[str | None]]] = {
    "the first passes, repeats within the interval are counted, the first after it says how many": (
        60,
        [
            Line(0, UNABLE, (111, "refused")),
            Line(0.1, UNABLE, (111, "refused")),
            Line(30, UNABLE, (112, "reset")),
            Line(61, UNABLE, (111, "refused")),
        ],
        [
            "Unable connect to node with id 111: refused",
            None,
            None,
            "Unable connect to node with id 111: refused (and 2 more like it in the last 61 s)",
        ],
    ),
    "the annotated line opens the next interval, whose count starts afresh": (
        60,
        [Line(0, RELAY), Line(1, RELAY), Line(60, RELAY), Line(70, RELAY), Line(80, RELAY), Line(125, RELAY)],
        [
            RELAY,
            None,
            f"{RELAY} (and 1 more like it in the last 60 s)",
            None,
            None,
            f"{RELAY} (and 2 more like it in the last 65 s)",
        ],
    ),
    "a line after a quiet interval passes as it is": (
        60,
        [Line(0, RELAY), Line(500, RELAY)],
        [RELAY, RELAY],
    ),
    "other loggers, levels and templates are other kinds": (
        60,
        [
            Line(0, UNABLE, (111, "refused")),
            Line(1, UNABLE, (111, "refused"), name="aiokafka.consumer"),
            Line(2, UNABLE, (111, "refused"), level=logging.WARNING),
            Line(3, RELAY),
            Line(4, UNABLE, (111, "refused")),
        ],
        [
            "Unable connect to node with id 111: refused",
            "Unable connect to node with id 111: refused",
            "Unable connect to node with id 111: refused",
            RELAY,
            None,
        ],
    ),
    "a message built before logging (an f-string) is its own kind each time": (
        60,
        [Line(0, "node 111 refused"), Line(1, "node 112 refused"), Line(2, "node 111 refused")],
        ["node 111 refused", "node 112 refused", None],
    ),
    "large counts are written with thousands separators": (
        60,
        [Line(0.001 * i, RELAY) for i in range(1236)] + [Line(60, RELAY)],
        [RELAY, *[None] * 1235, f"{RELAY} (and 1,235 more like it in the last 60 s)"],
    ),
    "a message with a percent sign and no arguments keeps it": (
        60,
        [Line(0, "disk 100% full"), Line(1, "disk 100% full"), Line(61, "disk 100% full")],
        ["disk 100% full", None, "disk 100% full (and 1 more like it in the last 61 s)"],
    ),
    "an interval of 0 lets every line through": (
        0,
        [Line(0, RELAY), Line(0, RELAY), Line(0, RELAY)],
        [RELAY, RELAY, RELAY],
    ),
}


@pytest.mark.parametrize(("interval", "lines", "expected"), CASES.values(), ids=CASES.keys())
def test_repeats_are_collapsed(interval: float, lines: list[Line], expected: list[str | None]) -> None:
    now = [0.0]
    repeat = RepeatFilter(interval, clock=lambda: now[0])
    seen: list[str | None] = []
    for line in lines:
        now[0] = line.at
        rec = record(line)
        seen.append(rec.getMessage() if repeat.filter(rec) else None)
    assert seen == expected


def test_arguments_that_do_not_fit_the_template_leave_the_record_to_the_handler() -> None:
    now = [0.0]
    repeat = RepeatFilter(60, clock=lambda: now[0])
    broken = Line(0, "%s and %s", ("one",))
    assert repeat.filter(record(broken))
    assert not repeat.filter(record(broken))
    now[0] = 60
    late = record(broken)
    assert repeat.filter(late)
    assert (late.msg, late.args) == ("%s and %s", ("one",))


def test_on_a_handler_it_covers_every_logger_and_the_format_carries_the_note() -> None:
    now = [0.0]
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RepeatFilter(60, clock=lambda: now[0]))
    loggers = [logging.getLogger("test_logs.kafka"), logging.getLogger("test_logs.outbox")]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    try:
        for second in range(0, 90, 1):
            now[0] = second
            loggers[0].error(UNABLE, 111, "refused")
            loggers[1].warning(RELAY)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
            logger.propagate = True
    assert out.getvalue().splitlines() == [
        "ERROR test_logs.kafka: Unable connect to node with id 111: refused",
        f"WARNING test_logs.outbox: {RELAY}",
        "ERROR test_logs.kafka: Unable connect to node with id 111: refused (and 59 more like it in the last 60 s)",
        f"WARNING test_logs.outbox: {RELAY} (and 59 more like it in the last 60 s)",
    ]


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        RepeatFilter(-1)
