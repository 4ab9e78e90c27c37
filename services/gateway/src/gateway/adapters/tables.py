"""The gateway's tables, in its own schema ``gateway``: a projection of the proposals, turns and decisions
built from the topics, plus its inbox and outbox."""

from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata

SCHEMA = "gateway"
metadata, shared = service_metadata(SCHEMA)
inbox, outbox, sessions = shared.inbox, shared.outbox, shared.sessions
agents = shared.agents

projected_proposals = Table(
    "projected_proposals",
    metadata,
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("proposal_id", Text, nullable=False, unique=True),
    Column("tool_call_id", Text, nullable=False, unique=True),
    Column("turn_id", Text, nullable=False),
    Column("step", Integer, nullable=False),
    Column("tool", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("section", Text, nullable=False),
    Column("agent_id", Text),
    Column("target", JSONB, nullable=False),
    Column("base", JSONB, nullable=False),
    Column("proposed_hash", Text, nullable=False),
    Column("lines", JSONB, nullable=False),
    Column("widens", Boolean, nullable=False),
    Column("reason", Text, nullable=False),
    Column("card", JSONB, nullable=False),
    Column("trace", JSONB, nullable=False),
    Column("status", Text, nullable=False, server_default="pending"),
    Column("stale", Boolean, nullable=False, server_default="false"),
    Column("resolved_by", Text),
    Column("resolved_at", DateTime(timezone=True)),
    Column("result", JSONB),
    Column("proposed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("session_id", "seq"),
    # A session's open proposals (``GET …/pending``): only those are in it (migration 0002, renamed by 0005).
    Index("ix_projected_proposals_pending", "session_id", "seq", postgresql_where=text("status = 'pending'")),
)

refused_calls = Table(
    "refused_calls",
    metadata,
    Column("tool_call_id", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("tool", Text, nullable=False),
    Column("error", JSONB, nullable=False),
)

turns = Table(
    "turns",
    metadata,
    Column("session_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("step", Integer, nullable=False),
    Column("tool_call_ids", JSONB, nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("continued_at", DateTime(timezone=True)),
    Column("continuation", JSONB),
    Column("sends", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("session_id", "turn_id", "step"),
    # Settling reads only the paused turns (migration 0003).
    Index("ix_turns_paused", "session_id", postgresql_where=text("continued_at IS NULL")),
)

decisions = Table(
    "decisions",
    metadata,
    Column("decision_id", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("proposal_id", Text, nullable=False),
    Column("decision", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("via", Text, nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("outcome", JSONB),
    Column("outcome_at", DateTime(timezone=True)),
    Column("message_id", Uuid, nullable=False),
    UniqueConstraint("message_id"),
    # A proposal's decisions, read with its history (migration 0006).
    Index("ix_decisions_proposal_id", "proposal_id"),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("org_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("fingerprint", Text, nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("status", Integer),
    Column("content_type", Text),
    Column("body", LargeBinary),
    Column("answered_at", DateTime(timezone=True)),
    PrimaryKeyConstraint("org_id", "user_id", "key"),
)
"""The first answer to each decision a person sent with an ``Idempotency-Key`` (:mod:`gateway.idempotency`): the
request's fingerprint, and once answered its status and body (a retry gets them again)."""


def _entry_columns() -> list[Column[Any]]:
    """The columns of a history entry, as :class:`gateway.domain.audit.Entry` names them (migration 0007)."""
    return [
        Column("type", Text, nullable=False),
        Column("session_id", Text),
        Column("seq", Integer),
        Column("proposal_id", Text),
        Column("kind", Text),
        Column("action", Text),
        Column("agent_id", Text),
        Column("target", Text),
        Column("actor", Text, nullable=False),
        Column("via", Text),
        Column("decision", Text),
        Column("outcome", Text),
        Column("detail", Text),
        Column("hash_before", Text),
        Column("hash_after", Text),
    ]


history_unlinked = Table(
    "history_unlinked",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("org_id", Text),
    Column("guild_id", Text),
    *_entry_columns(),
)
"""Entries written in the transaction of the change they record (by triggers on ``projected_proposals``,
``decisions`` and ``turns``, and by the consumer of ``workspace.writes``), waiting for the history linker to give
each its place in its organisation's chain. ``org_id`` is null where the change's session was not known yet: the
linker reads it from the session's copy."""

history = Table(
    "history",
    metadata,
    Column("org_id", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("guild_id", Text),
    *_entry_columns(),
    Column("prev_hash", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("linked_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("org_id", "position"),
    *(
        Index(f"ix_history_{column}", "org_id", column, "position")
        for column in ("agent_id", "guild_id", "kind", "actor", "outcome", "session_id", "type", "at")
    ),
)
"""Each organisation's history, a hash chain: the entry at ``position`` carries ``prev_hash``, the hash of the entry
before it (:func:`gateway.domain.audit.entry_hash`), and its own ``hash``."""

history_heads = Table(
    "history_heads",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("hash", Text, nullable=False),
)
"""The last linked entry of each organisation's chain."""

history_checkpoints = Table(
    "history_checkpoints",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("hash", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("key_id", Text, nullable=False),
    Column("signature", Text, nullable=False),
    Column("kind", Text, nullable=False),
    CheckConstraint("kind IN ('head', 'pruned')", name="ck_history_checkpoints_kind"),
    Index("ix_history_checkpoints_org", "org_id", "id"),
    Index("ix_history_checkpoints_kind", "org_id", "kind", "position"),
)
"""Each organisation's signed checkpoints (migration 0008, :class:`gateway.domain.checkpoints.Checkpoint`): its
chain's head, signed at an interval (``head``), and the last entry each prune removed (``pruned``). Append-only,
as ``history`` is: a trigger refuses UPDATE, DELETE and TRUNCATE to every role but the retention job's."""

policies = Table(
    "policies",
    metadata,
    Column("org_id", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("document", JSONB, nullable=False),
    Column("hash", Text, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("set_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("org_id", "version"),
)
"""Every version of each organisation's policy (migration 0009); the newest is in force."""

policy_verdicts = Table(
    "policy_verdicts",
    metadata,
    Column("proposal_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("rule", Text),
    Column("effect", Text),
    Column("judged_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True)),
    Column("expiry_rule", Text),
    Column("settled_at", DateTime(timezone=True)),
    Column("escalates_at", DateTime(timezone=True)),
    Column("escalation_rule", Text),
    Column("escalated_at", DateTime(timezone=True)),
    Column("require", JSONB),
    Column("escalate_to", JSONB),
    Index(
        "ix_policy_verdicts_deadline",
        "expires_at",
        postgresql_where=text("expires_at IS NOT NULL AND settled_at IS NULL"),
    ),
    Index(
        "ix_policy_verdicts_escalation",
        "escalates_at",
        postgresql_where=text("escalates_at IS NOT NULL AND escalated_at IS NULL"),
    ),
)
"""Each proposal's verdict by its organisation's policy (migration 0010): the version read, the rule that decided it or
required approvals (none: a person decides); the deadline an ``expire_after`` rule set; when an ``escalate`` rule's
escalation is due, by which rule, and when it was sent (migration 0011); the approvals a ``require`` rule asks for,
as JSON, and the roles an ``escalate`` rule tells (migration 0012)."""

approvals = Table(
    "approvals",
    metadata,
    Column("proposal_id", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("decision", Text, nullable=False),
    Column("via", Text, nullable=False),
    Column("detail", Text, nullable=False),
    Column("decision_id", Text),
    Column("approved_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("proposal_id", "actor"),
)
"""Each approval counted towards a ``require`` rule, one per person and proposal (migration 0012); the one that
completed the count names the decision it sent."""

webhooks = Table(
    "webhooks",
    metadata,
    Column("webhook_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("url", Text, nullable=False),
    Column("secret", Text, nullable=False),
    Column("events", ARRAY(Text), nullable=False),
    Column("format", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("org_id", "name", name="uq_webhooks_org_name"),
    CheckConstraint("format IN ('json', 'slack')", name="ck_webhooks_format"),
)
"""Each organisation's webhooks (migration 0011): the name policy rules use, the URL, the events it is told of, the
body's format, and the secret its deliveries are signed with (never read back through the API)."""

webhook_cursors = Table(
    "webhook_cursors",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),
)
"""The position of the last entry of each organisation's history the delivery worker read."""

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("delivery_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column(
        "webhook_id",
        Text,
        ForeignKey("gateway.webhooks.webhook_id", ondelete="CASCADE", name="fk_webhook_deliveries_webhook"),
        nullable=False,
    ),
    Column("event", Text, nullable=False),
    Column("proposal_id", Text),
    Column("body", LargeBinary, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("status", Text, nullable=False, server_default="pending"),
    Column("next_at", DateTime(timezone=True), nullable=False),
    Column("last_status", Integer),
    Column("last_error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("tried_since", DateTime(timezone=True), nullable=False),
    Column("delivered_at", DateTime(timezone=True)),
    CheckConstraint("status IN ('pending', 'delivered', 'dead')", name="ck_webhook_deliveries_status"),
    Index("ix_webhook_deliveries_due", "next_at", postgresql_where=text("status = 'pending'")),
    Index("ix_webhook_deliveries_log", "org_id", "webhook_id", "created_at"),
)
"""Every delivery of an event to a webhook (migration 0011): the delivery log and the dead-letter list."""

session_coaches = Table(
    "session_coaches",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("channel", Text),
    Column("model", Text),
)
"""The coach each session's ``SessionOpened`` names, where it names one (migration 0013)."""
