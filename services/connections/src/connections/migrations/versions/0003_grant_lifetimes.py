"""a grant's lifetime: when it lapses

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 10:30:00 UTC
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("grants", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True), schema="connections")


def downgrade() -> None:
    op.drop_column("grants", "expires_at", schema="connections")
