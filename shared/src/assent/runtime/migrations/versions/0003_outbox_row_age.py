"""an outbox row's age counts from its insert, not from its transaction's start

Revision ID: s0003
Revises: s0002
Create Date: 2026-11-30 13:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "s0003"
down_revision: str | None = "s0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _schema() -> str:
    return str(op.get_context().config.attributes["schema"])  # type: ignore[union-attr]  # migrate() always runs with a context


def upgrade() -> None:
    op.alter_column("outbox", "created_at", server_default=sa.text("clock_timestamp()"), schema=_schema())


def downgrade() -> None:
    op.alter_column("outbox", "created_at", server_default=sa.text("now()"), schema=_schema())
