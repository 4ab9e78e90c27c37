"""server bindings: a connection's binding is its server's and names the login it goes through

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 19:40:00 UTC
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("bindings", sa.Column("connection_id", sa.Text(), nullable=True), schema="access")
    op.add_column("binding_changes", sa.Column("connection_id", sa.Text(), nullable=True), schema="access")
    op.add_column("connections", sa.Column("server", sa.Text(), nullable=True), schema="access")
    # A connection's binding written before was keyed by its login, which it therefore names; the login's next
    # catalog that names its server moves it to the server's key (AccessRepository.apply_catalog).
    op.execute("UPDATE access.bindings SET connection_id = subject WHERE kind = 'connection'")
    op.execute("UPDATE access.binding_changes SET connection_id = subject WHERE kind = 'connection'")


def downgrade() -> None:
    op.drop_column("connections", "server", schema="access")
    op.drop_column("binding_changes", "connection_id", schema="access")
    op.drop_column("bindings", "connection_id", schema="access")
