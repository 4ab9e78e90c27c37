"""What a webhook is sent, with no I/O: the signature a receiver checks, the JSON and Slack bodies, the retries'
schedule, and which webhooks a policy's ``notify`` rules let be told."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assent.policy import Policy, Proposed
from gateway.adapters.webhooks import event_of, told
from gateway.domain.webhooks import Happened, body, headers, lines_summary, link, retry_at, sign, verify

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
HAPPENED = Happened(
    event="proposed",
    org_id="org_1",
    at=AT,
    proposal_id="prop_1",
    session_id="ses_1",
    seq=3,
    kind="memory",
    action="edit",
    target="Memory of Ada",
    lines_added=3,
    lines_removed=1,
    link="https://assent.example.com/console/#/sessions/ses_1/edits/3",
)


@pytest.mark.parametrize(
    ("secret", "timestamp", "payload"),
    [("whsec_a", 1_700_000_000, b'{"event":"proposed"}'), ("s", 0, b""), ("\u00e9t\u00e9", 42, "caf\u00e9".encode())],
)
def test_the_signature_is_the_hmac_of_the_timestamp_and_the_body(secret: str, timestamp: int, payload: bytes) -> None:
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()
    assert sign(secret, timestamp, payload) == f"sha256={expected}"
    sent = headers(secret, timestamp, payload, "dlv_1", "proposed")
    assert (sent["Assent-Timestamp"], sent["Assent-Signature"]) == (str(timestamp), f"sha256={expected}")
    assert verify(secret, sent["Assent-Timestamp"], payload, sent["Assent-Signature"], now=timestamp + 10)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"secret": "other"}, "another secret"),
        ({"payload": b'{"event":"decided"}'}, "another body"),
        ({"timestamp": "1700000001"}, "another timestamp"),
        ({"now": 1_700_000_000 + 301}, "too old: a replay"),
        ({"timestamp": "soon"}, "not a timestamp"),
    ],
)
def test_a_receiver_refuses_what_was_not_signed_so_or_too_long_ago(change: dict[str, Any], why: str) -> None:
    payload = b'{"event":"proposed"}'
    signature = sign("whsec_a", 1_700_000_000, payload)
    checked: dict[str, Any] = {"secret": "whsec_a", "timestamp": "1700000000", "payload": payload, "now": 1_700_000_000}
    checked.update(change)
    assert not verify(checked["secret"], checked["timestamp"], checked["payload"], signature, now=checked["now"]), why


def test_the_json_body_names_the_event_the_proposal_and_the_link() -> None:
    sent = json.loads(body(HAPPENED, "ops", "dlv_1", "json"))
    assert (sent["event"], sent["webhook"], sent["delivery_id"], sent["org_id"]) == (
        "proposed",
        "ops",
        "dlv_1",
        "org_1",
    )
    assert sent["proposal"] == {
        "proposal_id": "prop_1",
        "session_id": "ses_1",
        "seq": 3,
        "kind": "memory",
        "action": "edit",
        "target": "Memory of Ada",
        "lines": {"added": 3, "removed": 1},
    }
    assert sent["link"] == HAPPENED.link and sent["at"] == AT.isoformat()


@pytest.mark.parametrize(
    ("changes", "title", "says"),
    [
        ({}, "New request: Memory of Ada", "*memory* edit \u00b7 +3 \u22121 lines"),
        (
            {"event": "decided", "decision": "apply", "actor": "ada@example.com"},
            "Decided: Memory of Ada",
            "apply by ada",
        ),
        ({"event": "expired", "actor": "rule r (policy v1)"}, "Expired: Memory of Ada", "expired by rule r"),
        ({"event": "escalated", "rule": "night"}, "Waiting too long: Memory of Ada", "escalated by rule night"),
    ],
)
def test_the_slack_body_has_the_title_the_diff_summary_and_a_link(
    changes: dict[str, Any], title: str, says: str
) -> None:
    happened = Happened(**{**HAPPENED.__dict__, **changes})
    sent = json.loads(body(happened, "ops", "dlv_1", "slack"))
    assert sent["text"] == title
    header, summary, linked = sent["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": title}}
    assert says in summary["text"]["text"]
    assert linked["text"]["text"] == f"<{HAPPENED.link}|Open in the console>"


@pytest.mark.parametrize(
    ("added", "removed", "said"), [(0, 1, "+0 \u22121 line"), (3, 1, "+3 \u22121 lines"), (0, 0, "+0 \u22120 lines")]
)
def test_the_lines_summary(added: int, removed: int, said: str) -> None:
    assert lines_summary(added, removed) == said


@pytest.mark.parametrize(
    ("console", "expected"),
    [
        ("https://a.example.com/", "https://a.example.com/console/#/sessions/ses_1/edits/3"),
        ("", "/console/#/sessions/ses_1/edits/3"),
    ],
)
def test_the_link_to_the_card(console: str, expected: str) -> None:
    assert link(console, "ses_1", "edits", 3) == expected
    assert link(console, None, "edits", 3) is None


@pytest.mark.parametrize(
    ("attempts", "waited", "expected"),
    [
        (1, 0, 5.0),  # the first failure: the base wait
        (2, 10, 10.0),
        (4, 100, 40.0),
        (30, 0, 3600.0),  # an hour at most between two
        (3, 3590, None),  # past the time it is tried for: dead
    ],
)
def test_a_failed_delivery_is_tried_again_later_each_time_until_it_gives_up(
    attempts: int, waited: float, expected: float | None
) -> None:
    created = AT
    now = created + timedelta(seconds=waited)
    then = retry_at(attempts, now, created, base=5.0, give_up=7200.0 if attempts == 30 else 3600.0)
    assert (None if then is None else (then - now).total_seconds()) == expected


def _proposed(kind: str) -> Proposed:
    return Proposed(
        kind=kind, action="edit", agent_id=None, guild_id=None, label="x", lines=1, widens=False, proposed_at=AT
    )


@pytest.mark.parametrize(
    ("name", "events", "kind", "expected"),
    [
        ("ops", ["proposed"], "memory", True),  # named by a notify rule that matches
        ("ops", ["proposed"], "note", False),  # named by a notify rule that does not match
        ("all", ["proposed"], "note", True),  # named by no notify rule: every event it subscribes to
        ("all", ["decided"], "note", False),  # not subscribed
    ],
)
def test_a_webhook_a_notify_rule_names_is_told_only_when_such_a_rule_matches(
    name: str, events: list[str], kind: str, expected: bool
) -> None:
    policy = Policy.model_validate({"rules": [{"name": "tell ops", "match": {"kind": ["memory"]}, "notify": ["ops"]}]})
    hook = {"name": name, "events": events, "created_at": AT - timedelta(seconds=1)}
    assert told(hook, "proposed", AT, policy, 1, _proposed(kind)) is expected
    assert told(hook, "proposed", AT - timedelta(seconds=2), policy, 1, _proposed(kind)) is False  # made after it
    assert told(hook, "proposed", AT, None, 0, _proposed(kind)) is ("proposed" in events)  # no policy


@pytest.mark.parametrize(
    ("entry", "event"),
    [
        ({"type": "proposed", "decision": None, "outcome": None}, "proposed"),
        ({"type": "decided", "decision": "apply", "outcome": None}, "decided"),
        ({"type": "decided", "decision": "expire", "outcome": None}, None),  # told as expired, by its outcome
        ({"type": "outcome", "decision": None, "outcome": "expired"}, "expired"),
        ({"type": "outcome", "decision": None, "outcome": "applied"}, None),
        ({"type": "continued", "decision": None, "outcome": None}, None),
        ({"type": "written", "decision": None, "outcome": None}, None),
    ],
)
def test_which_entries_of_the_history_are_events(entry: dict[str, Any], event: str | None) -> None:
    assert event_of(entry) == event
