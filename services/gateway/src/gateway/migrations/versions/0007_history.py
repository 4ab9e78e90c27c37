"""the history of every proposal, decision, outcome and continuation, as a hash chain per organisation

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 08:00:00

Each change to the projection that history records writes its entry, in the same transaction, to
``gateway.history_unlinked`` (triggers on ``projected_proposals``, ``decisions`` and ``turns``; a direct write of the
workspace is written there by the gateway's consumer of ``workspace.writes``). The history linker
(:mod:`gateway.adapters.history`) moves them, in order, into ``gateway.history``: each entry at its organisation's
next position, carrying the hash of the entry before it. The triggers are statement-level with transition tables: a
batch of a hundred proposals costs one INSERT … SELECT, not a hundred.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def entry_columns() -> list[sa.Column[object]]:
    """A history entry's columns (a fresh set for each table)."""
    return [
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text),
        sa.Column("seq", sa.Integer),
        sa.Column("proposal_id", sa.Text),
        sa.Column("kind", sa.Text),
        sa.Column("action", sa.Text),
        sa.Column("agent_id", sa.Text),
        sa.Column("target", sa.Text),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("via", sa.Text),
        sa.Column("decision", sa.Text),
        sa.Column("outcome", sa.Text),
        sa.Column("detail", sa.Text),
        sa.Column("hash_before", sa.Text),
        sa.Column("hash_after", sa.Text),
    ]


UNLINKED = "gateway.history_unlinked"
COLUMNS = (
    "at, type, org_id, guild_id, session_id, seq, proposal_id, kind, action, agent_id, target, actor, via, decision,"
    " outcome, detail, hash_before, hash_after"
)

TRIGGERS = {
    # A proposal, as the coach proposed it.
    ("history_proposed", "projected_proposals", "INSERT", "NEW TABLE AS new_rows"): f"""
        INSERT INTO {UNLINKED} ({COLUMNS})
        SELECT n.proposed_at, 'proposed', s.org_id, NULL, n.session_id, n.seq, n.proposal_id, n.kind, n.action,
               n.agent_id, n.target ->> 'label', 'coach', n.tool, NULL, NULL, n.reason, n.base ->> 'hash',
               n.proposed_hash
        FROM new_rows AS n LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = n.session_id
        ORDER BY n.proposed_at, n.session_id, n.seq""",
    # A decision taken, by whom and where.
    ("history_decided", "decisions", "INSERT", "NEW TABLE AS new_rows"): f"""
        INSERT INTO {UNLINKED} ({COLUMNS})
        SELECT n.decided_at, 'decided', s.org_id, NULL, n.session_id, n.seq, n.proposal_id, p.kind, p.action,
               p.agent_id, p.target ->> 'label', n.actor, n.via, n.decision, NULL, NULL, p.base ->> 'hash',
               p.proposed_hash
        FROM new_rows AS n
        LEFT OUTER JOIN gateway.projected_proposals AS p ON p.proposal_id = n.proposal_id
        LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = n.session_id
        ORDER BY n.decided_at, n.decision_id""",
    # What a decision did (applied, declined, stale, refused), once its owner answered.
    ("history_outcome", "decisions", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"): f"""
        INSERT INTO {UNLINKED} ({COLUMNS})
        SELECT coalesce(n.outcome_at, clock_timestamp()), 'outcome', s.org_id, NULL, n.session_id, n.seq,
               n.proposal_id, p.kind, p.action, p.agent_id, p.target ->> 'label',
               coalesce(n.outcome ->> 'resolved_by', n.actor), n.via, n.decision, n.outcome ->> 'outcome',
               n.outcome ->> 'detail', p.base ->> 'hash',
               CASE WHEN n.outcome ->> 'outcome' = 'applied'
                    THEN coalesce(n.outcome -> 'effects' ->> 'hash', p.proposed_hash) END
        FROM new_rows AS n
        JOIN old_rows AS o ON o.decision_id = n.decision_id
        LEFT OUTER JOIN gateway.projected_proposals AS p ON p.proposal_id = n.proposal_id
        LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = n.session_id
        WHERE o.outcome IS NULL AND n.outcome IS NOT NULL
        ORDER BY n.outcome_at, n.decision_id""",
    # A proposal resolved without a decision of this gateway (superseded, expired, or decided at its owner).
    ("history_resolved", "projected_proposals", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"): f"""
        INSERT INTO {UNLINKED} ({COLUMNS})
        SELECT coalesce(n.resolved_at, clock_timestamp()), 'outcome', s.org_id, NULL, n.session_id, n.seq,
               n.proposal_id, n.kind, n.action, n.agent_id, n.target ->> 'label', coalesce(n.resolved_by, 'service'),
               NULL, NULL, n.status, n.result ->> 'detail', n.base ->> 'hash',
               CASE WHEN n.status = 'applied' THEN coalesce(n.result -> 'effects' ->> 'hash', n.proposed_hash) END
        FROM new_rows AS n
        JOIN old_rows AS o ON o.session_id = n.session_id AND o.seq = n.seq
        LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = n.session_id
        WHERE o.status = 'pending' AND n.status <> 'pending'
          AND NOT EXISTS (SELECT 1 FROM gateway.decisions AS d WHERE d.decision_id = n.result ->> 'decision_id')
        ORDER BY n.resolved_at, n.session_id, n.seq""",
    # A paused turn continued: what the coach was told.
    ("history_continued", "turns", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"): f"""
        INSERT INTO {UNLINKED} ({COLUMNS})
        SELECT n.continued_at, 'continued', s.org_id, NULL, n.session_id, NULL, NULL, NULL, NULL, NULL,
               n.turn_id || '#' || n.step, 'gateway', NULL, NULL, NULL, n.continuation ->> 'text', NULL, NULL
        FROM new_rows AS n
        JOIN old_rows AS o ON o.session_id = n.session_id AND o.turn_id = n.turn_id AND o.step = n.step
        LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = n.session_id
        WHERE o.continued_at IS NULL AND n.continued_at IS NOT NULL
        ORDER BY n.continued_at, n.session_id""",
}


def upgrade() -> None:
    op.create_table(
        "history_unlinked",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("org_id", sa.Text),
        sa.Column("guild_id", sa.Text),
        *entry_columns(),
        schema="gateway",
    )
    op.create_table(
        "history",
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("guild_id", sa.Text),
        *entry_columns(),
        sa.Column("prev_hash", sa.Text, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.Column("linked_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("org_id", "position"),
        schema="gateway",
    )
    # A page of history is the newest entries of one organisation that pass one filter: each filter's index leads
    # with the organisation and ends with the position, so the page is read backwards from the cursor and stops
    # at its size.
    for column in ("agent_id", "guild_id", "kind", "actor", "outcome", "session_id", "type", "at"):
        op.create_index(f"ix_history_{column}", "history", ["org_id", column, "position"], schema="gateway")
    op.create_table(
        "history_heads",
        sa.Column("org_id", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        schema="gateway",
    )
    for (name, table, event, referencing), body in TRIGGERS.items():
        op.execute(
            f"CREATE FUNCTION gateway.{name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body}; RETURN NULL; END $$"
        )
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON gateway.{table} REFERENCING {referencing}"
            f" FOR EACH STATEMENT EXECUTE FUNCTION gateway.{name}()"
        )


def downgrade() -> None:
    for name, table, _, _ in TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON gateway.{table}")
        op.execute(f"DROP FUNCTION gateway.{name}()")
    op.drop_table("history_heads", schema="gateway")
    op.drop_table("history", schema="gateway")
    op.drop_table("history_unlinked", schema="gateway")
