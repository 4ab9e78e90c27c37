"""webhooks, their deliveries, and escalations

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 09:20:00

``gateway.webhooks`` holds each organisation's webhooks (a name unique in it, the one policy rules use; a URL; the
events it is told of; its body's format; the secret its deliveries are signed with). ``gateway.webhook_cursors`` is,
per organisation, the position of the last entry of its history the delivery worker read (each entry is read once:
the cursor moves in the transaction that writes the deliveries). ``gateway.webhook_deliveries`` is the delivery log
and the dead-letter list: one row per event and webhook, with its body as sent, its attempts and its fate.
``gateway.policy_verdicts`` gains the escalation a rule set: when, by which rule, and when it was sent (or found
moot).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("webhook_id", sa.Text, primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("events", sa.ARRAY(sa.Text), nullable=False),
        sa.Column("format", sa.Text, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("org_id", "name", name="uq_webhooks_org_name"),
        sa.CheckConstraint("format IN ('json', 'slack')", name="ck_webhooks_format"),
        schema="gateway",
    )
    op.create_table(
        "webhook_cursors",
        sa.Column("org_id", sa.Text, primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        schema="gateway",
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("delivery_id", sa.Text, primary_key=True),
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column(
            "webhook_id",
            sa.Text,
            sa.ForeignKey("gateway.webhooks.webhook_id", ondelete="CASCADE", name="fk_webhook_deliveries_webhook"),
            nullable=False,
        ),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("proposal_id", sa.Text),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_status", sa.Integer),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tried_since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('pending', 'delivered', 'dead')", name="ck_webhook_deliveries_status"),
        schema="gateway",
    )
    # The deliveries due, read by their time; each webhook's log, newest first.
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_at"],
        schema="gateway",
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_webhook_deliveries_log", "webhook_deliveries", ["org_id", "webhook_id", "created_at"], schema="gateway"
    )
    op.add_column("policy_verdicts", sa.Column("escalates_at", sa.DateTime(timezone=True)), schema="gateway")
    op.add_column("policy_verdicts", sa.Column("escalation_rule", sa.Text), schema="gateway")
    op.add_column("policy_verdicts", sa.Column("escalated_at", sa.DateTime(timezone=True)), schema="gateway")
    op.create_index(
        "ix_policy_verdicts_escalation",
        "policy_verdicts",
        ["escalates_at"],
        schema="gateway",
        postgresql_where=sa.text("escalates_at IS NOT NULL AND escalated_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_policy_verdicts_escalation", "policy_verdicts", schema="gateway")
    for column in ("escalated_at", "escalation_rule", "escalates_at"):
        op.drop_column("policy_verdicts", column, schema="gateway")
    op.drop_table("webhook_deliveries", schema="gateway")
    op.drop_table("webhook_cursors", schema="gateway")
    op.drop_table("webhooks", schema="gateway")
