"""routines, guild switches and the scheduler's clock

Revision ID: 0001
Revises:
Create Date: 2026-12-01 17:20:00 UTC
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "routines",
        sa.Column("schedule_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("guild_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=False),
        sa.Column("cron", sa.Text(), nullable=True),
        sa.Column("window", sa.Text(), nullable=True),
        sa.Column("timezone", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_wake_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("studio_session_id", sa.Text(), nullable=True),
        sa.Column("studio_seq", sa.Integer(), nullable=True),
        sa.CheckConstraint('(cron IS NULL) <> ("window" IS NULL)', name="routines_one_timing"),
        sa.PrimaryKeyConstraint("schedule_id"),
        schema="routines",
    )
    op.create_index("routines_agent", "routines", ["agent_id"], schema="routines")
    op.create_index("routines_guild", "routines", ["guild_id"], schema="routines")
    op.create_index(
        "routines_due",
        "routines",
        ["next_wake_at"],
        schema="routines",
        postgresql_where=sa.text("NOT paused AND next_wake_at IS NOT NULL"),
    )
    op.create_table(
        "guild_switches",
        sa.Column("guild_id", sa.Text(), nullable=False),
        sa.Column("org_id", sa.Text(), nullable=False),
        sa.Column("routines_on", sa.Boolean(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("guild_id"),
        schema="routines",
    )
    op.create_table(
        "clock",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("offset", sa.Interval(), nullable=False),
        sa.CheckConstraint("id = 1", name="clock_one_row"),
        sa.PrimaryKeyConstraint("id"),
        schema="routines",
    )


def downgrade() -> None:
    op.drop_table("clock", schema="routines")
    op.drop_table("guild_switches", schema="routines")
    op.drop_index("routines_due", table_name="routines", schema="routines")
    op.drop_index("routines_guild", table_name="routines", schema="routines")
    op.drop_index("routines_agent", table_name="routines", schema="routines")
    op.drop_table("routines", schema="routines")
