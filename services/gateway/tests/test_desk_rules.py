"""The desk's rules without a database: which open proposals Apply all takes and why it leaves one, what Decline all
sends, the tray's counts and items, and the answer's sentence. Everything comes from the kind registry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from assent.contracts import Card, LineCounts, ProposalBase, ProposalTarget
from assent.kinds import KINDS, SECTIONS
from assent.policy import Require
from gateway.domain.desk import (
    DecisionWords,
    Item,
    Stopped,
    agent_tab,
    apply_decision,
    counts,
    item_view,
    plan_apply_all,
    plan_decline_all,
    preview,
    preview_summary,
    skip_reason,
    summary,
)
from gateway.domain.proposals import Proposal


def proposal(seq: int, kind: str, *, widens: bool = False, agent: str | None = "ada") -> Proposal:
    spec = KINDS[kind]
    return Proposal(
        session_id="s1",
        seq=seq,
        proposal_id=f"p{seq}",
        tool_call_id=f"c{seq}",
        turn_id="t1",
        step=1,
        tool=spec.tools[0],
        kind=kind,
        action=next(iter(spec.actions)),
        section=spec.section,
        agent_id=agent,
        target=ProposalTarget(kind=kind, label=f"{kind} {seq}"),
        base=ProposalBase(),
        proposed_hash="h1",
        lines=LineCounts(added=1, removed=0),
        widens=widens,
        reason="clearer",
        card=Card(title=f"{kind} {seq}", apply_label="Apply", before="", after="x\n"),
        trace={},
        status="pending",
        stale=False,
        resolved_by=None,
        resolved_at=None,
        proposed_at=datetime.now(UTC),
    )


def item(
    seq: int, kind: str, *, widens: bool = False, agent: str | None = "ada", apply_label: str | None = None
) -> Item:
    fields = proposal(seq, kind, widens=widens, agent=agent).model_dump()
    return Item.model_validate({**fields, "apply_label": apply_label})


@pytest.mark.parametrize(
    ("kind", "apply", "decline"),
    [
        ("memory", "apply", "decline"),
        ("access", "apply", "decline"),
        ("login", "grant", "decline"),
        ("draft", "publish", "discard"),
        ("source", "approve", "discard"),
    ],
)
def test_each_kinds_two_buttons_send_its_registry_decisions(kind: str, apply: str, decline: str) -> None:
    assert (apply_decision(KINDS[kind]), KINDS[kind].decline) == (apply, decline)


@pytest.mark.parametrize(
    ("given", "skipped"),
    [
        (proposal(1, "memory"), None),
        (proposal(2, "note", agent=None), None),
        (proposal(3, "access"), None),  # narrowing
        (proposal(4, "access", widens=True), "access 4: it widens what the agent can do, so it is decided on its own"),
        (proposal(5, "login", agent=None), "login 5: a login request is decided on its own (Grant read access)"),
        (proposal(6, "draft"), None),
        (proposal(7, "source"), "source 7: a source request is decided on its own (Approve and deploy)"),
    ],
)
def test_apply_all_leaves_a_login_grant_a_source_approval_and_a_widening_change_to_their_own_apply(
    given: Proposal, skipped: str | None
) -> None:
    assert skip_reason(given) == skipped


def test_apply_all_plans_in_seq_order_and_says_what_it_leaves() -> None:
    proposals = [
        proposal(5, "login", agent=None),
        proposal(2, "memory"),
        proposal(4, "access", widens=True),
        proposal(3, "draft"),
    ]
    plan = plan_apply_all(proposals)
    assert [(step.proposal.seq, step.decision) for step in plan.steps] == [(2, "apply"), (3, "publish")]
    assert [(s.seq, s.kind) for s in plan.skipped] == [(4, "access"), (5, "login")]


def test_decline_all_sends_each_kinds_decline_to_every_open_proposal() -> None:
    proposals = [proposal(3, "draft"), proposal(1, "login", agent=None), proposal(2, "access", widens=True)]
    plan = plan_decline_all(proposals)
    assert [(step.proposal.seq, step.decision) for step in plan.steps] == [
        (1, "decline"),
        (2, "decline"),
        (3, "discard"),
    ]
    assert plan.skipped == ()


def test_the_tray_counts_every_section_zero_included_and_each_agent() -> None:
    given = [item(1, "memory"), item(2, "memory", agent="bo"), item(3, "access"), item(4, "login", agent=None)]
    items = [item_view(i, lambda _: "") for i in given]
    tray = counts(items)
    assert tray.sections == {section: 0 for section in SECTIONS} | {"Agents": 2, "Tools": 1, "Logins": 1}
    assert list(tray.sections) == list(SECTIONS)
    assert tray.agents == {"ada": 2, "bo": 1}
    assert (tray.waiting_on, tray.summary) == (4, "Waiting on 4 decisions")
    assert counts([]).summary == "Waiting on 0 decisions" and counts(items[:1]).summary == "Waiting on 1 decision"


@pytest.mark.parametrize(
    ("given", "tab"),
    [
        (item(1, "memory"), "ada"),  # the agent's Memory tab
        (item(2, "routine"), "ada"),  # its Routines tab
        (item(3, "draft"), "ada"),  # its Draft tab
        (item(4, "access"), None),  # Tools
        (item(5, "note", agent=None), None),  # State
        (item(6, "login", agent=None), None),  # the Logins popover
    ],
)
def test_an_item_sits_on_its_agents_tab_only_in_the_agents_section(given: Item, tab: str | None) -> None:
    assert agent_tab(given) == tab


def test_an_items_view_carries_its_kinds_labels_words_and_where_to_send_them() -> None:
    view = item_view(item(7, "draft"), lambda i: f"/x/{i.seq}")
    assert (view.apply_label, view.decline_label) == ("Publish", "Discard")
    assert view.decisions == DecisionWords(apply="publish", decline="discard")
    assert (view.decision_path, view.decided_alone, view.agent_tab) == ("/x/7", False, "ada")
    widening = item_view(item(8, "access", widens=True, apply_label="Apply edit"), lambda i: "")
    assert (widening.apply_label, widening.decided_alone) == ("Apply edit", True)
    assert item_view(item(9, "login", agent=None), lambda i: "").decided_alone is True


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("Applied", 3, 0, None, 0), "Applied 3 requests; 0 requests still open."),
        (
            ("Applied", 1, 2, None, 2),
            "Applied 1 request; left 2 requests to be decided on their own; 2 requests still open.",
        ),
        (
            ("Applied", 0, 1, Stopped(seq=4, kind="memory", status=409, detail="stale"), 3),
            "Applied 0 requests; left 1 request to be decided on its own; stopped at seq 4 (409: stale); "
            "3 requests still open.",
        ),
        (("Declined", 1, 0, None, 0), "Declined 1 request; 0 requests still open."),
    ],
)
def test_the_answer_says_how_many_it_resolved_left_and_why(args: tuple[Any, ...], said: str) -> None:
    assert summary(*args) == said


def test_a_session_is_about_its_first_request_on_one_line_cut_at_a_word() -> None:
    from gateway.domain.desk import about

    assert about(None, None) is None
    assert about("", "  ") is None
    assert about("Memory of Ada", "Remember\nthe  refund rule") == "Memory of Ada: Remember the refund rule"
    assert about(None, "Only a reason") == "Only a reason"
    long = about(
        "Memory of Ada", "Remember that refunds over a hundred euros need the manager's written approval first"
    )
    assert long is not None
    assert len(long) <= 80
    assert long.endswith("…")
    assert long == "Memory of Ada: Remember that refunds over a hundred euros need the manager's…"
    assert about("x" * 200, None, length=10) == "x" * 9 + "…"


def test_the_preview_holds_back_a_request_that_needs_more_approvals_than_the_callers() -> None:
    proposals = [proposal(1, "memory"), proposal(2, "memory"), proposal(3, "memory"), proposal(4, "login", agent=None)]
    two, three = Require(approvals=2), Require(approvals=3)
    items = [
        item_view(item(1, "memory"), lambda i: "/x"),
        item_view(item(2, "memory").model_copy(update={"require": two, "approvals": 1}), lambda i: "/x"),
        item_view(item(3, "memory").model_copy(update={"require": three, "approvals": 1}), lambda i: "/x"),
        item_view(item(4, "login", agent=None), lambda i: "/x"),
    ]
    steps, skipped = preview(plan_apply_all(proposals), items)
    # One of two counted: the caller's is the one missing, so Apply all would apply it; one of three would wait.
    assert [(step.proposal.seq, step.decision) for step in steps] == [(1, "apply"), (2, "apply")]
    assert [(s.seq, s.kind) for s in skipped] == [(3, "memory"), (4, "login")]
    assert skipped[0].reason.startswith("needs more approvals under the organisation's policy")
    assert "1 of 3" in skipped[0].reason, skipped[0].reason
    assert (
        preview_summary("apply", 2, 2) == "Would apply 2 requests; would leave 2 requests to be decided on their own."
    )
    assert preview_summary("decline", 1, 0) == "Would decline 1 request."
