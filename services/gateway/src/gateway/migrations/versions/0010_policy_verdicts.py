"""each proposal's verdict by its organisation's policy, written once

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 08:40:00

``gateway.policy_verdicts`` holds, for each proposal the policy was read for, the version read and the rule that
decided it or required approvals (none: a person decides), and the deadline an ``expire_after`` rule set (settled once
the expiry was sent, or the proposal was found resolved before it). Its key is the proposal: the rule worker
(:mod:`gateway.adapters.rules`) judges a proposal once, in the transaction that writes the rule's decision.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "policy_verdicts",
        sa.Column("proposal_id", sa.Text, primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("rule", sa.Text),
        sa.Column("effect", sa.Text),
        sa.Column("judged_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("expiry_rule", sa.Text),
        sa.Column("settled_at", sa.DateTime(timezone=True)),
        schema="gateway",
    )
    # The deadlines not yet settled (sent, or found decided), read by their time.
    op.create_index(
        "ix_policy_verdicts_deadline",
        "policy_verdicts",
        ["expires_at"],
        schema="gateway",
        postgresql_where=sa.text("expires_at IS NOT NULL AND settled_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("policy_verdicts", schema="gateway")
