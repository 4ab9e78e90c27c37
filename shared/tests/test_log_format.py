"""The services' log lines: one JSON object each (or the readable form), with the service, the trace, the message
handled; repeats collapsed with their count; the trail's lines one per event."""

from __future__ import annotations

import io
import json
import logging
import uuid
import warnings
from collections.abc import Iterator
from typing import Any, cast

import pytest
from opentelemetry.sdk.trace import TracerProvider

from assent.contracts import Message
from assent.logs import TRAIL, JsonLines, RepeatFilter, message_context, setup_logging
from assent.runtime.consumer import Received

tracer = TracerProvider().get_tracer("test")


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """The root logger writing JSON lines of service ``edits`` to a buffer; the logging as it was afterwards."""
    root = logging.getLogger()
    handlers, level, trail = list(root.handlers), root.level, TRAIL.level
    stream = io.StringIO()
    setup_logging("edits", log_format="json", stream=stream, trail=True)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        TRAIL.setLevel(trail)
        logging.captureWarnings(False)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_is_one_json_object_with_the_common_fields(output: io.StringIO) -> None:
    logging.getLogger("assent.test").info("handled %d of %s", 3, "ünïcode")
    [entry] = lines(output)
    assert {k: entry[k] for k in ("level", "logger", "message", "service")} == {
        "level": "INFO",
        "logger": "assent.test",
        "message": "handled 3 of ünïcode",
        "service": "edits",
    }
    assert entry["time"].endswith("+00:00")
    assert "trace_id" not in entry and "topic" not in entry  # outside a span and a message


def test_inside_a_span_a_line_names_its_trace_and_span(output: io.StringIO) -> None:
    with tracer.start_as_current_span("work") as span:
        logging.getLogger("assent.test").warning("inside")
    [entry] = lines(output)
    context = span.get_span_context()
    assert (entry["trace_id"], entry["span_id"]) == (format(context.trace_id, "032x"), format(context.span_id, "016x"))


def test_a_trace_id_the_record_names_wins(output: io.StringIO) -> None:
    with tracer.start_as_current_span("work"):
        logging.getLogger("assent.test").info("given", extra={"trace_id": "0af7651916cd43dd8448eb211c80319c"})
    assert lines(output)[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def test_while_a_message_is_handled_its_topic_and_id_are_named(output: io.StringIO) -> None:
    message_id = uuid.uuid4()
    with message_context("edits.tool-calls", message_id):
        logging.getLogger("assent.test").info("one")
        with message_context("studio.sessions", "inner"):
            logging.getLogger("assent.test").info("two")
        logging.getLogger("assent.test").info("three")
    logging.getLogger("assent.test").info("after")
    named = [(entry.get("topic"), entry.get("message_id")) for entry in lines(output)]
    assert named == [
        ("edits.tool-calls", str(message_id)),
        ("studio.sessions", "inner"),
        ("edits.tool-calls", str(message_id)),
        (None, None),
    ]


def test_a_received_message_names_itself_in_its_span(output: io.StringIO) -> None:
    message = cast(Message, type("M", (), {"id": uuid.uuid4(), "type": "ToolCall"})())
    received = Received(message, {}, tracer, "edits.tool-calls")
    with received.span():
        logging.getLogger("edits.kinds").info("handling")
    [entry] = lines(output)
    assert (entry["topic"], entry["message_id"]) == ("edits.tool-calls", str(message.id))
    assert len(entry["trace_id"]) == 32


def test_a_traceback_stays_in_its_line(output: io.StringIO) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("assent.test").exception("failed")
    assert len(output.getvalue().splitlines()) == 1
    [entry] = lines(output)
    assert entry["level"] == "ERROR" and "Traceback" in entry["exc_info"] and "RuntimeError: boom" in entry["exc_info"]


def test_uvicorn_and_warnings_write_json_lines_too(output: io.StringIO) -> None:
    logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # the suite makes every warning an error
        warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
    entries = lines(output)
    assert [(e["logger"], e["level"]) for e in entries] == [("uvicorn.error", "WARNING"), ("py.warnings", "WARNING")]


def test_repeats_collapse_to_one_line_with_their_count_as_a_field() -> None:
    now = [0.0]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLines("gateway"))
    handler.addFilter(RepeatFilter(60, clock=lambda: now[0]))
    log = logging.getLogger("assent.test.repeats")
    log.propagate = False
    log.addHandler(handler)
    try:
        for at in (0, 1, 2, 3, 61):
            now[0] = at
            log.error("the database is unavailable (%s)", "ConnectionRefusedError")
    finally:
        log.removeHandler(handler)
    entries = lines(stream)
    assert [e.get("repeated") for e in entries] == [None, 3]
    assert entries[1]["message"] == (
        "the database is unavailable (ConnectionRefusedError) (and 3 more like it in the last 61 s)"
    )


def test_the_trail_is_one_line_per_event_and_off_unless_asked(output: io.StringIO) -> None:
    for n in range(3):
        TRAIL.info("handled %s", "ToolCall", extra={"message_id": str(n)})
    assert [entry["message_id"] for entry in lines(output)] == ["0", "1", "2"]  # never collapsed as repeats
    setup_logging("edits", stream=output, trail=False)
    TRAIL.info("handled %s", "ToolCall")
    assert len(lines(output)) == 3


def test_the_console_form_is_one_readable_line() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        setup_logging("routines", log_format="console", stream=stream)
        logging.getLogger("assent.test").warning("readable")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        logging.captureWarnings(False)
    assert stream.getvalue().endswith(" routines WARNING assent.test: readable\n")
