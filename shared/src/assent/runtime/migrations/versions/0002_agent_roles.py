"""who owns and who edits each agent

Revision ID: s0002
Revises: s0001
Create Date: 2026-11-30 12:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "s0002"
down_revision: str | None = "s0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _schema() -> str:
    return str(op.get_context().config.attributes["schema"])  # type: ignore[union-attr]  # migrate() always runs with a context


def upgrade() -> None:
    schema = _schema()
    for column in ("owners", "editors"):
        op.add_column(
            "agents",
            sa.Column(column, postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
            schema=schema,
        )


def downgrade() -> None:
    schema = _schema()
    for column in ("editors", "owners"):
        op.drop_column("agents", column, schema=schema)
