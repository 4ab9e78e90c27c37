"""chat turn failures: the builder's one chance to fix a file per reply

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "chat_turns",
        sa.Column(
            "failed_calls", postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'"), nullable=False
        ),
        schema="deployer",
    )


def downgrade() -> None:
    op.drop_column("chat_turns", "failed_calls", schema="deployer")
