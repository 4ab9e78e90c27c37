"""The message contracts: golden examples, the envelope rules and the topic registry."""

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError

from assent.contracts import MalformedMessage, Message, ProposalWidget, SessionOpened, ToolResult, parse_message
from assent.contracts import envelope as envelope_module
from assent.contracts.envelope import examples_folder
from assent.topics import REGISTRY, TOOL_ROUTES, by_name

# Every message's examples, shared's and the owners' (reading REGISTRY imported every contract package).
EXAMPLES = sorted(
    path for folder in {examples_folder(m) for m in Message.registry.values()} for path in folder.glob("*.json")
)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_golden_examples_parse_and_round_trip(path: Path) -> None:
    raw = path.read_text()
    message = parse_message(raw)
    assert path.name.startswith(f"{message.type}.v{message.v}")
    assert json.loads(message.model_dump_json()) == json.loads(raw)


def test_every_message_type_has_a_golden_example_and_one_topic() -> None:
    examples = {path.name.split(".")[0] for path in EXAMPLES}
    assert examples == set(Message.registry)
    for type_ in Message.registry.values():
        topics = [topic.name for topic in REGISTRY if type_ in topic.messages]
        assert topics, f"{type_.__name__} travels on no topic"


def test_registry_names_are_unique_and_routes_point_into_it() -> None:
    names = [topic.name for topic in REGISTRY]
    assert len(names) == len(set(names))
    for tool, topic in TOOL_ROUTES.items():
        assert by_name(topic.name) is topic, tool
    assert TOOL_ROUTES["studio_edit_memory"].name == "edits.tool-calls"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"type": "Nope"}', "unknown message type"),
        (b'{"type": "ToolCall", "v": 2}', "unsupported version"),
        (b'{"type": "ToolCall", "v": 1, "session_id": "s"}', "invalid ToolCall"),
    ],
)
def test_malformed_messages_are_named(raw: bytes, why: str) -> None:
    with pytest.raises(MalformedMessage, match=why):
        parse_message(raw)


def test_a_topic_accepts_only_its_own_messages() -> None:
    raw = next(p for p in EXAMPLES if p.name.startswith("StepEnded")).read_text()
    with pytest.raises(MalformedMessage, match="does not belong"):
        parse_message(raw, accept=(ToolResult,))


def test_results_carry_an_error_exactly_when_not_ok() -> None:
    with pytest.raises(ValueError, match="exactly when ok is false"):
        ToolResult(session_id="s", seq=1, tool_call_id="c", tool="t", ok=False)


def test_unknown_fields_are_ignored_so_adding_one_is_not_breaking() -> None:
    data = json.loads(next(p for p in EXAMPLES if p.name.startswith("StepEnded")).read_text())
    data["added_in_a_later_minor"] = True
    assert parse_message(json.dumps(data)).type == "StepEnded"


def test_upcasters_lift_old_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    from typing import Literal

    class Probe(Message):
        type: Literal["Probe"] = "Probe"
        v: Literal[2] = 2
        items: tuple[str, ...]

    try:
        monkeypatch.setitem(envelope_module.UPCASTERS, ("Probe", 1), lambda d: {**d, "items": [d.pop("item")]})
        lifted = parse_message(json.dumps({"type": "Probe", "v": 1, "item": "x"}))
        assert isinstance(lifted, Probe) and lifted.v == 2 and lifted.items == ("x",)
        assert parse_message(json.dumps({"type": "Probe", "v": 2, "items": ["y"]})).items == ("y",)  # type: ignore[attr-defined]
        with pytest.raises(MalformedMessage, match="unsupported version"):
            parse_message(json.dumps({"type": "Probe", "v": 3, "items": []}))
    finally:
        Message.registry.pop("Probe", None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", 2**31),
        ("seq", -1),
        ("step", 2**31),
        ("session_id", "a\x00b"),
        ("tool_call_id", "line\nbreak"),
        ("tool", ""),
    ],
)
def test_fields_refuse_what_postgresql_cannot_hold(field: str, value: object) -> None:
    from assent.contracts import ToolCall

    fields: dict[str, object] = {
        "session_id": "s",
        "seq": 1,
        "turn_id": "t",
        "step": 0,
        "tool_call_id": "c",
        "tool": "x",
    }
    ToolCall(**fields)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolCall(**{**fields, field: value})  # type: ignore[arg-type]


def test_text_refuses_nul_only() -> None:
    from pydantic import TypeAdapter

    from assent.contracts import Text

    text = TypeAdapter(Text)
    assert text.validate_python("tabs\tand\nnew lines and ünicode") == "tabs\tand\nnew lines and ünicode"
    with pytest.raises(ValueError, match="NUL"):
        text.validate_python("a\x00b")


@pytest.mark.parametrize("value", ["x\ud800", "\udfff", "é\udc80é", "\ud83d\ude00"])
def test_text_and_ids_refuse_what_utf8_cannot_encode(value: str) -> None:
    from pydantic import TypeAdapter

    from assent.contracts import Id, Text

    for type_ in (Text, Id):
        with pytest.raises(ValueError, match="lone surrogate"):
            TypeAdapter(type_).validate_python(value)
    assert TypeAdapter(Text).validate_python("\U0001f600 é") == "\U0001f600 é"
    assert TypeAdapter(Id).validate_python(" \U0001f600 ") == "\U0001f600"


def test_a_message_with_a_lone_surrogate_is_malformed() -> None:
    data = json.loads(next(p for p in EXAMPLES if p.name.startswith("ToolCall")).read_text())
    raw = json.dumps({**data, "session_id": "ses_\ud800"})  # ensure_ascii: the wire holds the escape \ud800
    assert "\\ud800" in raw
    with pytest.raises(MalformedMessage, match="lone surrogate"):
        parse_message(raw)


def test_a_message_nested_100000_levels_deep_is_malformed() -> None:
    depth = 100_000
    raw = b'{"type": "ToolCall", "arguments": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(MalformedMessage, match="nested"):
        parse_message(raw)


@pytest.mark.parametrize("field", ["session_id", "arguments"])
def test_no_nesting_depth_escapes_as_a_recursion_error(field: str) -> None:
    """Around the interpreter's limit, decoding may pass and validating or reporting the error may not."""
    import sys

    data = json.loads(next(p for p in EXAMPLES if p.name.startswith("ToolCall")).read_text())
    template = json.dumps({**data, field: "@@"})
    limit = sys.getrecursionlimit()
    for depth in range(limit - 150, limit + 10):
        raw = template.replace('"@@"', "[" * depth + "]" * depth)
        with pytest.raises(MalformedMessage):
            parse_message(raw)


def test_a_kinds_own_widget_fields_travel_as_they_are_and_are_read_through_its_model() -> None:
    """An access request's widget carries ``edit`` (the seed's ``edit.changes``): a field of its kind's, which the
    shared message passes along and the kind's model (here a stand-in for the access contract's) reads and checks."""

    class Change(BaseModel):
        id: str

    class Edit(BaseModel):
        changes: tuple[Change, ...] = Field(min_length=1)

    class KindsWidget(ProposalWidget):
        edit: Edit

    data = json.loads(next(p for p in EXAMPLES if p.name == "ToolResult.v1.4.json").read_text())
    result = parse_message(json.dumps(data))
    assert isinstance(result, ToolResult) and result.widget is not None
    assert result.widget.model_dump(mode="json") == data["widget"]  # nothing of the kind's lost on the way
    assert [c.id for c in result.widget.read_as(KindsWidget).edit.changes] == ["conn_helpdesk", "send_email"]
    lacking = parse_message(json.dumps({**data, "widget": {**data["widget"], "edit": {"changes": []}}}))
    assert isinstance(lacking, ToolResult) and lacking.widget is not None
    with pytest.raises(ValidationError, match="at least 1 item"):
        lacking.widget.read_as(KindsWidget)


def test_a_session_opened_without_its_coach_still_parses() -> None:
    """``coach`` came later in v1: a producer that does not send it is still understood."""
    raw = '{"type": "SessionOpened", "v": 1, "session_id": "s", "org_id": "o", "source_guild_id": "g",'
    raw += ' "operator_user_id": "u", "id": "00000000-0000-0000-0000-000000000001", "ts": "2026-11-30T09:00:00Z"}'
    message = parse_message(raw.encode())
    assert isinstance(message, SessionOpened)
    assert message.coach is None
