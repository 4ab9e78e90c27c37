"""an index of the paused turns of each session

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Settling reads a session's paused turns on every outcome and step end: a partial index holds only those,
    # so the read costs what is paused, not every turn the session ever took.
    op.create_index(
        "ix_turns_paused",
        "turns",
        ["session_id"],
        schema="gateway",
        postgresql_where=sa.text("continued_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_turns_paused", table_name="turns", schema="gateway")
