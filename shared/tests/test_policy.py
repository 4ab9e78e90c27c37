"""The policy's rules, table-driven: what a rule matches, how rules combine (for each effect the first matching rule
wins; every notify rule notifies), and the documents refused with the reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from assent.kinds import KINDS
from assent.policy import Match, Policy, Proposed, Require, approval_refusal, evaluate, matches, replay, waiting_for

NOON = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def proposed(**given: Any) -> Proposed:
    values: dict[str, Any] = {
        "kind": "memory",
        "action": "edit",
        "agent_id": "ada",
        "guild_id": "support",
        "label": "Memory of Ada",
        "lines": 3,
        "widens": False,
        "proposed_at": NOON,
    }
    return Proposed(**{**values, **given})


@pytest.mark.parametrize(
    ("match", "request_", "holds"),
    [
        ({}, {}, True),
        ({"kind": ["memory", "note"]}, {}, True),
        ({"kind": ["note"]}, {}, False),
        ({"action": ["grant"]}, {"kind": "login", "action": "grant"}, True),
        ({"agent": ["bo"]}, {}, False),
        ({"guild": ["support"]}, {}, True),
        ({"guild": ["support"]}, {"guild_id": None}, False),
        ({"target": ["skills/*"]}, {"kind": "source", "path": "skills/refunds.md"}, True),
        ({"target": ["skills/*"]}, {"kind": "source", "path": "knowledge/faq.md"}, False),
        ({"target": ["Memory of *"]}, {}, True),
        ({"server": ["https://*.example.com/*"]}, {"server": "https://mcp.example.com/mcp"}, True),
        ({"server": ["https://*.example.com/*"]}, {}, False),
        ({"lines_at_most": 3}, {}, True),
        ({"lines_at_most": 2}, {}, False),
        ({"lines_at_least": 100}, {"lines": 100}, True),
        ({"widens": True}, {}, False),
        ({"widens": True}, {"widens": True}, True),
        ({"coach": {"channel": ["builder"]}}, {}, False),
        ({"coach": {"model": ["claude-*"]}}, {"model": "claude-sonnet-4-5"}, True),
        ({"time_of_day": {"after": "09:00", "before": "17:00", "zone": "Europe/Paris"}}, {}, True),
        ({"time_of_day": {"after": "09:00", "before": "12:30", "zone": "Europe/Paris"}}, {}, False),
        ({"time_of_day": {"after": "22:00", "before": "06:00"}}, {"proposed_at": NOON + timedelta(hours=11)}, True),
        ({"time_of_day": {"after": "22:00", "before": "06:00"}}, {}, False),
        ({"kind": ["memory"], "widens": True}, {}, False),
    ],
)
def test_a_match_holds_when_every_condition_given_holds(
    match: dict[str, Any], request_: dict[str, Any], holds: bool
) -> None:
    assert matches(Match.model_validate(match), proposed(**request_)) is holds


POLICY = Policy.model_validate(
    {
        "rules": [
            {
                "name": "widening needs two admins",
                "match": {"widens": True},
                "require": {"approvals": 2, "roles": ["admin"]},
            },
            {"name": "small memory edits", "match": {"kind": ["memory"], "lines_at_most": 5}, "decide": "apply"},
            {"name": "logins lapse", "match": {"kind": ["login"]}, "expire_after": "P1D"},
            {"name": "everything waits a day", "expire_after": "PT12H"},
            {"name": "tell the channel", "notify": ["ops"]},
            {"name": "tell security of logins", "match": {"kind": ["login"]}, "notify": ["security"]},
            {"name": "wake an admin", "match": {"kind": ["login"]}, "escalate": {"after": "PT1H", "roles": ["admin"]}},
            {"name": "never reached for memory", "match": {"kind": ["memory"]}, "decide": "decline"},
        ]
    }
)


@pytest.mark.parametrize(
    ("request_", "decision", "expiry", "notify", "escalation"),
    [
        ({}, "small memory edits", "everything waits a day", ["tell the channel"], None),
        ({"lines": 50}, "never reached for memory", "everything waits a day", ["tell the channel"], None),
        ({"widens": True}, "widening needs two admins", "everything waits a day", ["tell the channel"], None),
        (
            {"kind": "login", "action": "grant", "widens": True},
            "widening needs two admins",
            "logins lapse",
            ["tell the channel", "tell security of logins"],
            "wake an admin",
        ),
        ({"kind": "note", "action": "create"}, None, "everything waits a day", ["tell the channel"], None),
    ],
)
def test_for_each_effect_the_first_matching_rule_wins_and_every_notify_rule_notifies(
    request_: dict[str, Any], decision: str | None, expiry: str | None, notify: list[str], escalation: str | None
) -> None:
    verdict = evaluate(POLICY, 7, proposed(**request_))
    assert verdict.version == 7
    assert (verdict.decision and verdict.decision.name, verdict.expiry and verdict.expiry.name) == (decision, expiry)
    assert [rule.name for rule in verdict.notify] == notify
    assert (verdict.escalation and verdict.escalation.name) == escalation


def test_the_verdict_says_the_decision_and_the_approvals_required() -> None:
    assert evaluate(POLICY, 1, proposed()).decided == "apply"
    required = evaluate(POLICY, 1, proposed(widens=True)).required
    assert required is not None and (required.approvals, required.roles) == (2, ["admin"])
    assert evaluate(Policy(), 1, proposed()) == evaluate(Policy(rules=[]), 1, proposed())
    assert evaluate(POLICY, 1, proposed()).expiry.expire_after == timedelta(hours=12)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"rules": [{"name": "r"}]}, "exactly one effect"),
        ({"rules": [{"name": "r", "decide": "apply", "notify": ["x"]}]}, "exactly one effect"),
        ({"rules": [{"name": "r", "decide": "apply"}, {"name": "r", "decide": "decline"}]}, "two rules are named 'r'"),
        ({"rules": [{"name": "r", "decide": "maybe"}]}, "'apply' or 'decline'"),
        ({"rules": [{"name": "r", "require": {"approvals": 0}}]}, "greater than or equal to 1"),
        ({"rules": [{"name": "r", "require": {"approvals": 1, "roles": ["owner"]}}]}, "'admin', 'developer'"),
        ({"rules": [{"name": "r", "expire_after": "P2Y"}]}, "less than or equal to"),
        ({"rules": [{"name": "r", "escalate": {"after": "PT1H"}}]}, "names webhooks or roles"),
        ({"rules": [{"name": "r", "decide": "apply", "match": {"kinds": ["memory"]}}]}, "Extra inputs"),
        (
            {
                "rules": [
                    {
                        "name": "r",
                        "decide": "apply",
                        "match": {"time_of_day": {"after": "9:00", "before": "17:00", "zone": "Mars/Olympus"}},
                    }
                ]
            },
            "is not a time zone",
        ),
    ],
)
def test_a_document_that_does_not_fit_is_refused_with_the_reason(document: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said.replace("(", r"\(").replace("'", "'")):
        Policy.model_validate(document)


@pytest.mark.parametrize(
    ("request_", "status", "waited", "decided", "differs", "approvals", "expired", "escalated"),
    [
        ({}, "applied", timedelta(minutes=5), "apply", False, None, None, None),
        ({}, "declined", timedelta(minutes=5), "apply", True, None, None, None),
        ({"lines": 50}, "applied", timedelta(minutes=5), "decline", True, None, None, None),
        ({"widens": True}, "applied", timedelta(hours=13), None, False, 2, "everything waits a day", None),
        ({"kind": "login", "action": "grant"}, "granted", timedelta(hours=2), None, False, None, None, "wake an admin"),
        (
            {"kind": "login", "action": "grant"},
            "pending",
            timedelta(days=2),
            None,
            False,
            None,
            "logins lapse",
            "wake an admin",
        ),
        (
            {"kind": "note", "action": "create"},
            "superseded",
            timedelta(days=2),
            None,
            False,
            None,
            "everything waits a day",
            None,
        ),
    ],
)
def test_a_replay_says_what_the_policy_would_have_done_beside_what_people_did(
    request_: dict[str, Any],
    status: str,
    waited: timedelta,
    decided: str | None,
    differs: bool,
    approvals: int | None,
    expired: str | None,
    escalated: str | None,
) -> None:
    verdict = evaluate(POLICY, 3, proposed(**request_))
    resolved = None if status == "pending" else NOON + waited
    done = replay(verdict, status, NOON, resolved, NOON + waited)
    assert (done.decided, done.differs, done.approvals) == (decided, differs, approvals)
    assert (done.expired_by, done.escalated_by) == (expired, escalated)
    assert "ops" in done.notified


@pytest.mark.parametrize(
    ("require", "approved", "said"),
    [
        ({"approvals": 2, "roles": ["admin"]}, 0, "0 of 2 approvals: needs two admins"),
        ({"approvals": 2, "roles": ["admin"]}, 1, "1 of 2 approvals: needs one more admin"),
        ({"approvals": 3, "roles": ["admin", "developer"]}, 1, "1 of 3 approvals: needs two more admins or developers"),
        ({"approvals": 2, "people": ["olga", "ben"]}, 1, "1 of 2 approvals: needs one more of olga, ben"),
        ({"approvals": 1, "roles": ["admin"], "people": ["olga"]}, 0, "0 of 1 approval: needs one admin, or of olga"),
        ({"approvals": 2}, 1, "1 of 2 approvals: needs one more person who may decide"),
    ],
)
def test_what_a_request_waits_for_is_said_in_words(require: dict[str, object], approved: int, said: str) -> None:
    assert waiting_for(Require.model_validate(require), approved) == said


@pytest.mark.parametrize(
    ("require", "user", "roles", "counts"),
    [
        ({"approvals": 2, "roles": ["admin"]}, "ann", {"admin"}, True),
        ({"approvals": 2, "roles": ["admin"]}, "op", {"admin"}, False),  # the session's own operator never counts
        ({"approvals": 2, "roles": ["admin"]}, "dev", {"developer"}, False),
        ({"approvals": 1, "people": ["olga"]}, "olga", {"viewer"}, True),  # listed, whatever the role
        ({"approvals": 1, "people": ["olga"]}, "op", set(), False),
        ({"approvals": 1}, "dev", {"developer"}, True),  # neither roles nor people: anyone who may decide
    ],
)
def test_whose_approval_counts(require: dict[str, object], user: str, roles: set[str], counts: bool) -> None:
    why = approval_refusal(Require.model_validate(require), user, frozenset(roles), "op")
    assert (why is None) == counts, why


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_the_registry_is_judged_by_its_first_matching_rule(kind: str) -> None:
    policy = Policy.model_validate(
        {
            "rules": [
                {"name": "its own", "match": {"kind": [kind]}, "decide": "decline"},
                {"name": "any", "decide": "apply"},
                {"name": "its own again", "match": {"kind": [kind]}, "require": {"approvals": 2}},
            ]
        }
    )
    verdict = evaluate(policy, 7, proposed(kind=kind))
    assert (verdict.decided, verdict.decision and verdict.decision.name, verdict.version) == ("decline", "its own", 7)
    other = next(k for k in KINDS if k != kind)
    assert evaluate(policy, 7, proposed(kind=other)).decided == "apply"
