"""a BRIN index on the inbox's received_at, for the prune of old entries

Revision ID: s0004
Revises: s0003
Create Date: 2026-11-30 13:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "s0004"
down_revision: str | None = "s0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _schema() -> str:
    return str(op.get_context().config.attributes["schema"])  # type: ignore[union-attr]  # migrate() always runs with a context


def upgrade() -> None:
    op.create_index("ix_inbox_received_at", "inbox", ["received_at"], schema=_schema(), postgresql_using="brin")


def downgrade() -> None:
    op.drop_index("ix_inbox_received_at", table_name="inbox", schema=_schema())
