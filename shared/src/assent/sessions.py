"""Each service's own record of the studio sessions, kept from ``studio.sessions``.

Services never read each other's tables, so every service that needs to know a session (its organisation,
source guild and operator) keeps this small table in its own schema.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, MetaData, Table, Text, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from .contracts import SessionClosed, SessionOpened


def sessions_table(metadata: MetaData) -> Table:
    return Table(
        "sessions",
        metadata,
        Column("session_id", Text, primary_key=True),
        Column("org_id", Text, nullable=False),
        Column("source_guild_id", Text, nullable=False),
        Column("operator_user_id", Text, nullable=False),
        Column("opened_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("closed_at", DateTime(timezone=True)),
    )


async def record_session_event(conn: AsyncConnection, table: Table, message: SessionOpened | SessionClosed) -> None:
    """Apply one session event to ``table``; applying it twice changes nothing more."""
    if isinstance(message, SessionOpened):
        await conn.execute(
            insert(table)
            .values(
                session_id=message.session_id,
                org_id=message.org_id,
                source_guild_id=message.source_guild_id,
                operator_user_id=message.operator_user_id,
            )
            .on_conflict_do_nothing()
        )
    else:
        await conn.execute(
            table.update()
            .where(table.c.session_id == message.session_id, table.c.closed_at.is_(None))
            .values(closed_at=datetime.now(UTC))
        )
