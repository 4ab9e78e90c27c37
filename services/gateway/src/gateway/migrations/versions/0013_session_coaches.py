"""the coach of each session, as its SessionOpened names it

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 11:30:00

``gateway.session_coaches`` keeps the coach a ``SessionOpened`` names (``coach``, optional in v1): its name, the
channel it runs in and its model, one row per session that names one. The desk shows sessions by it, and the policy's
``coach`` matcher reads its channel and model (the defaults where a session names none).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_coaches",
        sa.Column("session_id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("channel", sa.Text),
        sa.Column("model", sa.Text),
        schema="gateway",
    )


def downgrade() -> None:
    op.drop_table("session_coaches", schema="gateway")
