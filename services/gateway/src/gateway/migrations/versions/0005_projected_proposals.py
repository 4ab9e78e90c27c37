"""the projection's proposals, named as the glossary names them

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# ``proposals`` itself is a shared table that the shared history keeps in every schema, this one's too (the owners'
# record of their proposals, unused here): the projection's own are ``projected_proposals``.
UPGRADE = (
    "ALTER TABLE gateway.requests RENAME TO projected_proposals",
    "ALTER TABLE gateway.projected_proposals RENAME CONSTRAINT requests_pkey TO projected_proposals_pkey",
    "ALTER TABLE gateway.projected_proposals"
    " RENAME CONSTRAINT requests_proposal_id_key TO projected_proposals_proposal_id_key",
    "ALTER TABLE gateway.projected_proposals"
    " RENAME CONSTRAINT requests_tool_call_id_key TO projected_proposals_tool_call_id_key",
    "ALTER INDEX gateway.ix_requests_pending RENAME TO ix_projected_proposals_pending",
)
"""Everything that carried the old name: the table, its primary key, its two unique constraints (each renames its
index), and the partial index of the pending ones (migration 0002). The table has no sequence."""

DOWNGRADE = (
    "ALTER INDEX gateway.ix_projected_proposals_pending RENAME TO ix_requests_pending",
    "ALTER TABLE gateway.projected_proposals"
    " RENAME CONSTRAINT projected_proposals_tool_call_id_key TO requests_tool_call_id_key",
    "ALTER TABLE gateway.projected_proposals"
    " RENAME CONSTRAINT projected_proposals_proposal_id_key TO requests_proposal_id_key",
    "ALTER TABLE gateway.projected_proposals RENAME CONSTRAINT projected_proposals_pkey TO requests_pkey",
    "ALTER TABLE gateway.projected_proposals RENAME TO requests",
)


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
