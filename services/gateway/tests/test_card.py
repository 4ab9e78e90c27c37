"""A request's card as the gateway builds it from the projected request and the owner's live side: each field's
diff and line counts, which add up to the request's own (the tray's) while the target is as it was read."""

from __future__ import annotations

from typing import Any

from assent.contracts import CardField, lines_of
from assent.runtime import LiveCard
from gateway.api import card

FIELDS = (
    CardField(name="about", before="", after="We answer within a day."),
    CardField(name="description", before="", after="Support.\nRefunds.\n"),
)


def request(fields: tuple[CardField, ...]) -> dict[str, Any]:
    """A guild text request as the gateway projects it from its ``ProposalProposed``: its lines are its fields'."""
    return {
        "proposal_id": "p1",
        "kind": "guild",
        "action": "edit",
        "status": "pending",
        "target": {"kind": "guild", "guild_id": "g1", "label": "Guild Support"},
        "base": {"version": 1, "hash": "h0"},
        "proposed_hash": "h1",
        "lines": lines_of(fields).model_dump(),
        "reason": "clearer",
        "card": {"apply_label": "Apply edit", "after": "About:\n...\n"},
    }


def live(fields: tuple[CardField, ...]) -> LiveCard:
    return LiveCard(
        proposal_id="p1",
        kind="guild",
        action="edit",
        status="pending",
        stale=False,
        live_hash="h0",
        live_version=1,
        fields=fields,
    )


def test_each_fields_counts_add_up_to_the_requests_while_the_target_is_as_read() -> None:
    shown = card("s1", 3, request(FIELDS), live(FIELDS))
    assert [(f.name, f.lines) for f in shown["fields"]] == [
        ("about", {"added": 1, "removed": 0}),
        ("description", {"added": 2, "removed": 0}),
    ]
    assert shown["lines"] == {"added": 3, "removed": 0}
    assert [f.diff.splitlines()[2:] for f in shown["fields"]] == [
        ["@@ -0,0 +1 @@", "+We answer within a day."],
        ["@@ -0,0 +1,2 @@", "+Support.", "+Refunds."],
    ]


def test_a_field_that_moved_since_is_counted_as_it_is_now() -> None:
    """The card compares the live text now with the proposal; the tray keeps the count as proposed."""
    moved = (CardField(name="about", before="Someone else's.", after="We answer within a day."), FIELDS[1])
    shown = card("s1", 3, request(FIELDS), live(moved))
    assert [(f.name, f.lines) for f in shown["fields"]] == [
        ("about", {"added": 1, "removed": 1}),
        ("description", {"added": 2, "removed": 0}),
    ]
    assert shown["lines"] == {"added": 3, "removed": 0}
