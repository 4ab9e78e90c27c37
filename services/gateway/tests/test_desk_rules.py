"""The desk's rules without a database: which open requests Apply all takes and why it leaves one, what Decline all
sends, the tray's counts and items, and the answer's sentence. Everything comes from the kind registry."""

from __future__ import annotations

from typing import Any

import pytest

from assent.kinds import KINDS, SECTIONS
from gateway.domain.desk import (
    agent_tab,
    apply_decision,
    counts,
    item_view,
    plan_apply_all,
    plan_decline_all,
    skip_reason,
    summary,
)


def item(
    seq: int, kind: str, *, widens: bool = False, agent: str | None = "ada", action: str | None = None
) -> dict[str, Any]:
    spec = KINDS[kind]
    return {
        "session_id": "s1",
        "seq": seq,
        "proposal_id": f"p{seq}",
        "kind": kind,
        "action": action or next(iter(spec.actions)),
        "section": spec.section,
        "agent_id": agent,
        "target": {"label": f"{kind} {seq}"},
        "widens": widens,
        "apply_label": None,
    }


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
        (item(1, "memory"), None),
        (item(2, "note", agent=None), None),
        (item(3, "access"), None),  # narrowing
        (item(4, "access", widens=True), "access 4: it widens what the agent can do, so it is decided on its own"),
        (item(5, "login", agent=None), "login 5: a login request is decided on its own (Grant read access)"),
        (item(6, "draft"), None),
        (item(7, "source"), "source 7: a source request is decided on its own (Approve and deploy)"),
    ],
)
def test_apply_all_leaves_a_login_grant_a_source_approval_and_a_widening_change_to_their_own_apply(
    given: dict[str, Any], skipped: str | None
) -> None:
    assert skip_reason(given) == skipped


def test_apply_all_plans_in_seq_order_and_says_what_it_leaves() -> None:
    items = [item(5, "login", agent=None), item(2, "memory"), item(4, "access", widens=True), item(3, "draft")]
    plan = plan_apply_all(items)
    assert [(step.item["seq"], step.decision) for step in plan.steps] == [(2, "apply"), (3, "publish")]
    assert [(s["seq"], s["kind"]) for s in plan.skipped] == [(4, "access"), (5, "login")]


def test_decline_all_sends_each_kinds_decline_to_every_open_request() -> None:
    items = [item(3, "draft"), item(1, "login", agent=None), item(2, "access", widens=True)]
    plan = plan_decline_all(items)
    assert [(step.item["seq"], step.decision) for step in plan.steps] == [
        (1, "decline"),
        (2, "decline"),
        (3, "discard"),
    ]
    assert plan.skipped == ()


def test_the_tray_counts_every_section_zero_included_and_each_agent() -> None:
    items = [item(1, "memory"), item(2, "memory", agent="bo"), item(3, "access"), item(4, "login", agent=None)]
    tray = counts(items)
    assert tray["sections"] == {section: 0 for section in SECTIONS} | {"Agents": 2, "Tools": 1, "Logins": 1}
    assert list(tray["sections"]) == list(SECTIONS)
    assert tray["agents"] == {"ada": 2, "bo": 1}
    assert (tray["waiting_on"], tray["summary"]) == (4, "Waiting on 4 decisions")
    assert counts([])["summary"] == "Waiting on 0 decisions" and counts(items[:1])["summary"] == "Waiting on 1 decision"


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
def test_an_item_sits_on_its_agents_tab_only_in_the_agents_section(given: dict[str, Any], tab: str | None) -> None:
    assert agent_tab(given) == tab


def test_an_items_view_carries_its_kinds_labels_words_and_where_to_send_them() -> None:
    view = item_view(item(7, "draft"), lambda i: f"/x/{i['seq']}")
    assert (view["apply_label"], view["decline_label"]) == ("Publish", "Discard")
    assert view["decisions"] == {"apply": "publish", "decline": "discard"}
    assert (view["decision_path"], view["decided_alone"], view["agent_tab"]) == ("/x/7", False, "ada")
    widening = item_view({**item(8, "access", widens=True), "apply_label": "Apply edit"}, lambda i: "")
    assert (widening["apply_label"], widening["decided_alone"]) == ("Apply edit", True)
    assert item_view(item(9, "login", agent=None), lambda i: "")["decided_alone"] is True


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("Applied", 3, 0, None, 0), "Applied 3 requests; 0 requests still open."),
        (
            ("Applied", 1, 2, None, 2),
            "Applied 1 request; left 2 requests to be decided on their own; 2 requests still open.",
        ),
        (
            ("Applied", 0, 1, {"seq": 4, "status": 409, "detail": "stale"}, 3),
            "Applied 0 requests; left 1 request to be decided on its own; stopped at seq 4 (409: stale); "
            "3 requests still open.",
        ),
        (("Declined", 1, 0, None, 0), "Declined 1 request; 0 requests still open."),
    ],
)
def test_the_answer_says_how_many_it_resolved_left_and_why(args: tuple[Any, ...], said: str) -> None:
    assert summary(*args) == said
