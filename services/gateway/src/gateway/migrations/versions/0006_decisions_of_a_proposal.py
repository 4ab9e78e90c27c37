"""an index of each proposal's decisions

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A decided proposal's card lists every decision taken on it: found by this index, not by reading every decision
    # ever taken.
    op.create_index("ix_decisions_proposal_id", "decisions", ["proposal_id"], schema="gateway")


def downgrade() -> None:
    op.drop_index("ix_decisions_proposal_id", table_name="decisions", schema="gateway")
