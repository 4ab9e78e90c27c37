"""What a webhook is sent, with no I/O: the event's body (JSON, or a Slack-compatible message), its signature, and
when a failed delivery is tried again.

A delivery is a ``POST`` of the body with the headers ``Assent-Timestamp`` (unix seconds, when it was signed),
``Assent-Signature`` (``sha256=`` and the hex HMAC-SHA256 of ``<timestamp>.<body>`` keyed with the webhook's secret),
``Assent-Delivery`` (the delivery's id, the same on every attempt) and ``Assent-Event``. A receiver recomputes the
signature over the raw body it read, compares it in constant time, and refuses a timestamp more than five minutes
from its own clock (a replayed request), and a delivery id it already handled (a retry of one it answered late).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

EVENTS = ("proposed", "decided", "expired", "escalated")
Event = Literal["proposed", "decided", "expired", "escalated"]
FORMATS = ("json", "slack")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Assent-Signature`` header's value: ``sha256=`` and the hex HMAC-SHA256 of ``<timestamp>.<body>``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify(secret: str, timestamp: str, body: bytes, signature: str, now: int, window: int = 300) -> bool:
    """What a receiver checks: the signature over the body as read, with a timestamp within ``window`` seconds of
    ``now``."""
    try:
        at = int(timestamp)
    except ValueError:
        return False
    return abs(now - at) <= window and hmac.compare_digest(sign(secret, at, body), signature)


def headers(secret: str, timestamp: int, body: bytes, delivery_id: str, event: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Assent-Timestamp": str(timestamp),
        "Assent-Signature": sign(secret, timestamp, body),
        "Assent-Delivery": delivery_id,
        "Assent-Event": event,
    }


@dataclass(frozen=True)
class Happened:
    """An event of a proposal, as a webhook is told of it."""

    event: str
    org_id: str
    at: datetime
    proposal_id: str | None
    session_id: str | None
    seq: int | None
    kind: str | None
    action: str | None
    target: str | None
    lines_added: int
    lines_removed: int
    actor: str | None = None
    decision: str | None = None
    outcome: str | None = None
    rule: str | None = None
    link: str | None = None


TITLES = {
    "proposed": "New request",
    "decided": "Decided",
    "expired": "Expired",
    "escalated": "Waiting too long",
}


def lines_summary(added: int, removed: int) -> str:
    r"""``+3 \u22121 lines`` (a minus sign): what the proposal changes, added and removed."""
    total = added + removed
    return f"+{added} \u2212{removed} line{'' if total == 1 else 's'}"


def body(happened: Happened, webhook: str, delivery_id: str, fmt: str) -> bytes:
    """The body sent: the event as JSON, or (``slack``) a message with blocks Slack's incoming webhooks take."""
    if fmt == "slack":
        return _encode(slack(happened))
    return _encode(
        {
            "event": happened.event,
            "delivery_id": delivery_id,
            "webhook": webhook,
            "org_id": happened.org_id,
            "at": happened.at.isoformat(),
            "proposal": {
                "proposal_id": happened.proposal_id,
                "session_id": happened.session_id,
                "seq": happened.seq,
                "kind": happened.kind,
                "action": happened.action,
                "target": happened.target,
                "lines": {"added": happened.lines_added, "removed": happened.lines_removed},
            },
            "actor": happened.actor,
            "decision": happened.decision,
            "outcome": happened.outcome,
            "rule": happened.rule,
            "link": happened.link,
        }
    )


def slack(happened: Happened) -> dict[str, Any]:
    """A Slack-compatible message: ``text`` (the notification's line) and ``blocks``: the title, the diff's summary and
    what happened, and a link to the card in the console."""
    title = f"{TITLES.get(happened.event, happened.event)}: {happened.target or happened.proposal_id or ''}".strip()
    what = [
        f"*{happened.kind or 'proposal'}* {happened.action or ''}".strip(),
        lines_summary(happened.lines_added, happened.lines_removed),
    ]
    if happened.event == "decided" and happened.decision:
        what.append(f"{happened.decision} by {happened.actor}")
    elif happened.event == "expired":
        what.append(f"expired{f' by {happened.actor}' if happened.actor else ''}")
    elif happened.event == "escalated" and happened.rule:
        what.append(f"escalated by rule {happened.rule}")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": " \u00b7 ".join(what)}},
    ]
    if happened.link:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"<{happened.link}|Open in the console>"}})
    return {"text": title, "blocks": blocks}


def link(console_url: str, session_id: str | None, endpoint: str | None, seq: int | None) -> str | None:
    """The card's address in the console (``<console_url>/console/#/sessions/{id}/{endpoint}/{seq}``); a path where no
    console address is set."""
    if session_id is None or endpoint is None or seq is None:
        return None
    return f"{console_url.rstrip('/')}/console/#/sessions/{session_id}/{endpoint}/{seq}"


def retry_at(attempts: int, now: datetime, created_at: datetime, base: float, give_up: float) -> datetime | None:
    """When a delivery that failed its ``attempts``-th attempt is tried again: ``base`` seconds doubled at each attempt
    (an hour at most between two); ``None`` (dead) once that would be more than ``give_up`` seconds after it was
    made."""
    wait = min(base * 2 ** max(attempts - 1, 0), 3600.0)
    then = now + timedelta(seconds=wait)
    return None if then > created_at + timedelta(seconds=give_up) else then


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
