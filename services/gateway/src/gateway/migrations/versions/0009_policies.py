"""each organisation's policy, every version kept

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 08:10:00

``gateway.policies`` holds every version an admin set of each organisation's policy (:mod:`assent.policy`): the
document as JSON, its hash, who set it and when. The newest version is the policy in force; a version is never
changed (a change is a new version, and an entry of the history).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("org_id", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("document", JSONB, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("org_id", "version"),
        schema="gateway",
    )


def downgrade() -> None:
    op.drop_table("policies", schema="gateway")
