"""An access request's widget as a coach reads it (:class:`access_contract.widget.AccessWidget`): its ``edit`` is
an access request's, says what ``widens`` says, and changes something."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from access_contract.widget import AccessWidget
from assent.contracts import ToolResult, parse_message
from assent.contracts.envelope import examples_folder

EXAMPLE = json.loads((examples_folder(ToolResult) / "ToolResult.v1.4.json").read_text())
"""A ToolResult of ``studio_edit_access``: its widget carries the seed's ``edit.changes``."""


def widget(**change: object) -> AccessWidget:
    result = parse_message(json.dumps({**EXAMPLE, "widget": {**EXAMPLE["widget"], **change}}))
    assert isinstance(result, ToolResult) and result.widget is not None
    return result.widget.read_as(AccessWidget)


def test_the_example_reads_as_an_access_widget() -> None:
    read = widget()
    assert [c.id for c in read.edit.changes] == ["conn_helpdesk", "send_email"]
    assert read.edit.widens is read.widens is True


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"kind": "memory", "target": {**EXAMPLE["widget"]["target"], "kind": "memory"}}, "access request's"),
        ({"widens": False}, "edit.widens says what widens says"),
        ({"edit": {"changes": [], "widens": True}}, "at least 1 item"),
    ],
)
def test_an_access_widget_that_does_not_hold_is_refused_saying_why(change: dict[str, object], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        widget(**change)
