"""bindings at every scope, their changes, and the read copy of the connections' catalogs

Revision ID: 0001
Revises:
Create Date: 2026-12-01 17:40:00 UTC
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bindings",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("on", sa.Boolean(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("studio_session_id", sa.Text(), nullable=True),
        sa.Column("studio_seq", sa.Integer(), nullable=True),
        sa.CheckConstraint("scope IN ('org', 'guild', 'agent')", name="bindings_scope"),
        sa.CheckConstraint("kind IN ('native_tool', 'connection', 'connection_tool')", name="bindings_kind"),
        sa.PrimaryKeyConstraint("scope", "scope_id", "kind", "subject"),
        schema="access",
    )
    op.create_table(
        "binding_changes",
        sa.Column("change_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("setting", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("studio_session_id", sa.Text(), nullable=True),
        sa.Column("studio_seq", sa.Integer(), nullable=True),
        sa.CheckConstraint("setting IN ('on', 'off', 'inherit')", name="binding_changes_setting"),
        sa.PrimaryKeyConstraint("change_id"),
        schema="access",
    )
    op.create_index("binding_changes_scope", "binding_changes", ["scope", "scope_id"], schema="access")
    op.create_table(
        "connections",
        sa.Column("connection_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=True),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("tools", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint("connection_id"),
        schema="access",
    )
    op.create_index("connections_org", "connections", ["org_id"], schema="access")


def downgrade() -> None:
    op.drop_index("connections_org", table_name="connections", schema="access")
    op.drop_table("connections", schema="access")
    op.drop_index("binding_changes_scope", table_name="binding_changes", schema="access")
    op.drop_table("binding_changes", schema="access")
    op.drop_table("bindings", schema="access")
