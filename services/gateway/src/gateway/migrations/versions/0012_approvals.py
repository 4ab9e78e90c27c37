"""approvals a require rule counts, and each one in the history

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 10:30:00

``gateway.approvals`` holds each approval counted towards a ``require`` rule (:mod:`assent.policy`): one per person
and proposal (its key: the same person twice never counts), with the decision word, where it was given, and what the
proposal waited for after it. The approval that completes the count is written in the transaction that records the
decision it sends (``decision_id``). Each approval is an entry of the history (``approved``), written by a trigger in
the same transaction, as the decisions are (migration 0007). ``gateway.policy_verdicts`` gains the approvals a
``require`` rule asks for (its ``require`` as JSON) and the roles an ``escalate`` rule tells (``escalate_to``, a JSON
array), so a pending item says what it waits for, and whom it was escalated to, without reading the policy.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    "at, type, org_id, guild_id, session_id, seq, proposal_id, kind, action, agent_id, target, actor, via, decision,"
    " outcome, detail, hash_before, hash_after"
)
APPROVED = f"""
    INSERT INTO gateway.history_unlinked ({COLUMNS})
    SELECT n.approved_at, 'approved', s.org_id, NULL, p.session_id, p.seq, n.proposal_id, p.kind, p.action,
           p.agent_id, p.target ->> 'label', n.actor, n.via, n.decision, NULL, n.detail, p.base ->> 'hash',
           p.proposed_hash
    FROM new_rows AS n
    JOIN gateway.projected_proposals AS p ON p.proposal_id = n.proposal_id
    LEFT OUTER JOIN gateway.sessions AS s ON s.session_id = p.session_id
    ORDER BY n.approved_at, n.actor"""


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("proposal_id", sa.Text, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("via", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("decision_id", sa.Text),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("proposal_id", "actor"),
        schema="gateway",
    )
    op.add_column("policy_verdicts", sa.Column("require", JSONB), schema="gateway")
    op.add_column("policy_verdicts", sa.Column("escalate_to", JSONB), schema="gateway")
    op.execute(
        "CREATE FUNCTION gateway.history_approved() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" {APPROVED}; RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER history_approved AFTER INSERT ON gateway.approvals REFERENCING NEW TABLE AS new_rows"
        " FOR EACH STATEMENT EXECUTE FUNCTION gateway.history_approved()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER history_approved ON gateway.approvals")
    op.execute("DROP FUNCTION gateway.history_approved()")
    op.drop_column("policy_verdicts", "escalate_to", schema="gateway")
    op.drop_column("policy_verdicts", "require", schema="gateway")
    op.drop_table("approvals", schema="gateway")
