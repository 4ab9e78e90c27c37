"""an index of the pending requests of each session

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 16:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # ``GET …/pending`` reads a session's open requests: a partial index holds only those, so the read costs what
    # is pending, not everything the session ever asked.
    op.create_index(
        "ix_requests_pending",
        "requests",
        ["session_id", "seq"],
        schema="gateway",
        postgresql_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_index("ix_requests_pending", table_name="requests", schema="gateway")
