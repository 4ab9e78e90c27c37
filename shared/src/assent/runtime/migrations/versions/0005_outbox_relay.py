"""an outbox row names the relay that publishes it while that relay lives

Revision ID: s0005
Revises: s0004
Create Date: 2026-11-30 15:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "s0005"
down_revision: str | None = "s0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _schema() -> str:
    return str(op.get_context().config.attributes["schema"])  # type: ignore[union-attr]  # migrate() always runs with a context


def upgrade() -> None:
    # Rows written before this revision name no relay: any relay's sweep takes them after the grace period.
    op.add_column("outbox", sa.Column("relay", sa.BigInteger(), nullable=True), schema=_schema())


def downgrade() -> None:
    op.drop_column("outbox", "relay", schema=_schema())
