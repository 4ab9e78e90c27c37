"""collections: their records, access lists and change log

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 19:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "collections",
        sa.Column("collection_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("guild_id", sa.Text(), nullable=True),
        sa.Column("columns", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("scope IN ('guild', 'org')", name="ck_collections_scope"),
        sa.CheckConstraint("(scope = 'org') = (guild_id IS NULL)", name="ck_collections_owner"),
        sa.ForeignKeyConstraint(["org_id"], ["edits.orgs.org_id"]),
        sa.ForeignKeyConstraint(["guild_id"], ["edits.guilds.guild_id"]),
        sa.PrimaryKeyConstraint("collection_id"),
        sa.UniqueConstraint("org_id", "name"),
        schema="edits",
    )
    op.create_table(
        "collection_records",
        sa.Column("record_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("collection_id", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["edits.collections.collection_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("record_id"),
        schema="edits",
    )
    op.create_index(
        "ix_collection_records_collection_id",
        "collection_records",
        ["collection_id", "record_id"],
        unique=False,
        schema="edits",
    )
    op.create_table(
        "collection_access",
        sa.Column("collection_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("subject_id", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.CheckConstraint("kind IN ('org', 'guild', 'agent')", name="ck_collection_access_kind"),
        sa.CheckConstraint("mode IN ('read', 'write', 'none')", name="ck_collection_access_mode"),
        sa.ForeignKeyConstraint(["collection_id"], ["edits.collections.collection_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("collection_id", "kind", "subject_id"),
        schema="edits",
    )
    op.create_table(
        "collection_changes",
        sa.Column("change_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("collection_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("change", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=True),
        sa.Column("subject_id", sa.Text(), nullable=True),
        sa.Column("mode", sa.Text(), nullable=True),
        sa.Column("detail", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("actor_user_id", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("studio_session_id", sa.Text(), nullable=True),
        sa.Column("studio_seq", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("change_id"),
        schema="edits",
    )
    op.create_index(
        "ix_collection_changes_collection_id",
        "collection_changes",
        ["collection_id", "change_id"],
        unique=False,
        schema="edits",
    )


def downgrade() -> None:
    op.drop_index("ix_collection_changes_collection_id", table_name="collection_changes", schema="edits")
    op.drop_table("collection_changes", schema="edits")
    op.drop_table("collection_access", schema="edits")
    op.drop_index("ix_collection_records_collection_id", table_name="collection_records", schema="edits")
    op.drop_table("collection_records", schema="edits")
    op.drop_table("collections", schema="edits")
