"""logins and sessions' grants

Revision ID: 0001
Revises:
Create Date: 2026-12-01 17:02:52 UTC
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
        "logins",
        sa.Column("login_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=True),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.Text(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("server_url", sa.Text(), nullable=False),
        sa.Column("account", sa.Text(), nullable=False),
        sa.Column("connected", sa.Boolean(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("tools", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("credentials", sa.Text(), nullable=True),
        sa.Column("key_id", sa.Text(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("login_id"),
        schema="connections",
    )
    op.create_index("logins_org_scope", "logins", ["org_id", "scope", "scope_id"], schema="connections")
    op.create_index("logins_key_id", "logins", ["key_id"], schema="connections")
    op.create_table(
        "grants",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("login_id", sa.Text(), nullable=False),
        sa.Column("granted_by", sa.Text(), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("via", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=True),
        sa.Column("revoked_by", sa.Text(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("session_id", "login_id"),
        schema="connections",
    )


def downgrade() -> None:
    op.drop_table("grants", schema="connections")
    op.drop_index("logins_key_id", table_name="logins", schema="connections")
    op.drop_index("logins_org_scope", table_name="logins", schema="connections")
    op.drop_table("logins", schema="connections")
