"""A proposal's card as the gateway builds it from the projected proposal and the owner's live side: each field's
diff and line counts, which add up to the proposal's own (the tray's) while the target is as it was read."""

from __future__ import annotations

from datetime import UTC, datetime

from assent.contracts import Card, CardField, LineCounts, ProposalBase, ProposalTarget, lines_of
from assent.runtime import LiveCard
from gateway.api import card
from gateway.domain.proposals import Proposal

FIELDS = (
    CardField(name="about", before="", after="We answer within a day."),
    CardField(name="description", before="", after="Support.\nRefunds.\n"),
)


def proposal(fields: tuple[CardField, ...]) -> Proposal:
    """A guild text proposal as the gateway projects it from its ``ProposalProposed``: its lines are its fields'."""
    return Proposal(
        session_id="s1",
        seq=3,
        proposal_id="p1",
        tool_call_id="c1",
        turn_id="t1",
        step=1,
        tool="studio_edit_guild",
        kind="guild",
        action="edit",
        section="Guild",
        agent_id=None,
        target=ProposalTarget(kind="guild", guild_id="g1", label="Guild Support"),
        base=ProposalBase(version=1, hash="h0"),
        proposed_hash="h1",
        lines=lines_of(fields),
        widens=False,
        reason="clearer",
        card=Card(title="Guild Support", apply_label="Apply edit", before="", after="About:\n...\n", fields=fields),
        trace={},
        status="pending",
        stale=False,
        resolved_by=None,
        resolved_at=None,
        proposed_at=datetime.now(UTC),
    )


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


def test_each_fields_counts_add_up_to_the_proposals_while_the_target_is_as_read() -> None:
    shown = card(proposal(FIELDS), live(FIELDS))
    assert [(f.name, f.lines) for f in shown.fields] == [
        ("about", LineCounts(added=1, removed=0)),
        ("description", LineCounts(added=2, removed=0)),
    ]
    assert shown.lines == LineCounts(added=3, removed=0)
    assert [f.diff.splitlines()[2:] for f in shown.fields] == [
        ["@@ -0,0 +1 @@", "+We answer within a day."],
        ["@@ -0,0 +1,2 @@", "+Support.", "+Refunds."],
    ]


def test_a_field_that_moved_since_is_counted_as_it_is_now() -> None:
    """The card compares the live text now with the proposal; the tray keeps the count as proposed."""
    moved = (CardField(name="about", before="Someone else's.", after="We answer within a day."), FIELDS[1])
    shown = card(proposal(FIELDS), live(moved))
    assert [(f.name, f.lines) for f in shown.fields] == [
        ("about", LineCounts(added=1, removed=1)),
        ("description", LineCounts(added=2, removed=0)),
    ]
    assert shown.lines == LineCounts(added=3, removed=0)
