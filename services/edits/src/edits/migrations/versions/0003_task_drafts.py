"""task drafts and their versions

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 19:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_drafts",
        sa.Column("draft_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("created_message_seq", sa.Integer(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("base_hash", sa.Text(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default="pending", nullable=False),
        sa.Column("replaced_by", sa.Text(), nullable=True),
        sa.Column("published_by_user_id", sa.Text(), nullable=True),
        sa.Column("discarded_by_user_id", sa.Text(), nullable=True),
        sa.Column("published_version", sa.Integer(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'published', 'discarded', 'superseded')", name="ck_task_drafts_status"
        ),
        sa.ForeignKeyConstraint(["agent_id"], ["edits.agents.agent_id"]),
        sa.ForeignKeyConstraint(["org_id"], ["edits.orgs.org_id"]),
        sa.PrimaryKeyConstraint("draft_id"),
        sa.UniqueConstraint("proposal_id"),
        sa.UniqueConstraint("session_id", "created_message_seq"),
        schema="edits",
    )
    op.create_index("ix_task_drafts_agent_id", "task_drafts", ["agent_id"], unique=False, schema="edits")
    op.create_table(
        "task_draft_versions",
        sa.Column("draft_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("hash", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["draft_id"], ["edits.task_drafts.draft_id"]),
        sa.PrimaryKeyConstraint("draft_id", "version"),
        schema="edits",
    )


def downgrade() -> None:
    op.drop_table("task_draft_versions", schema="edits")
    op.drop_index("ix_task_drafts_agent_id", table_name="task_drafts", schema="edits")
    op.drop_table("task_drafts", schema="edits")
