"""The inbox: makes a consumer idempotent on the envelope ``id``.

A handler claims the message inside its own transaction, before it changes anything. If the claim finds
the message already there, the handler's effects were committed by an earlier delivery and it does
nothing. Offsets are committed only after the transaction, so a crash between the two redelivers the
message and the claim drops it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from uuid import UUID

from sqlalchemy import Column, DateTime, Index, MetaData, PrimaryKeyConstraint, Table, Text, Uuid, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .db import driver_connection


def inbox_table(metadata: MetaData) -> Table:
    return Table(
        "inbox",
        metadata,
        Column("consumer", Text, nullable=False),
        Column("message_id", Uuid, nullable=False),
        Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        PrimaryKeyConstraint("consumer", "message_id"),
        # Rows arrive in time order, so a BRIN index finds the old ones for the prune at almost no cost per insert.
        Index("ix_inbox_received_at", "received_at", postgresql_using="brin"),
    )


async def claim(conn: AsyncConnection, table: Table, consumer: str, message_id: UUID) -> bool:
    """True when this is the first delivery of ``message_id`` to ``consumer`` (in this transaction)."""
    result = await conn.execute(
        insert(table)
        .values(consumer=consumer, message_id=message_id)
        .on_conflict_do_nothing()
        .returning(table.c.message_id)
    )
    return result.first() is not None


_CLAIM_LOCKED: dict[str, str] = {}


async def claim_many(
    conn: AsyncConnection, table: Table, consumer: str, message_ids: Sequence[UUID], *, lock_keys: Sequence[str] = ()
) -> set[UUID]:
    """Of ``message_ids``, those delivered to ``consumer`` for the first time (in this transaction): one statement.

    The same statement first takes the transaction-scoped advisory locks named by ``lock_keys``, all of them, in
    ascending lock order (see :func:`assent.db.session_locks`), before it inserts a row: an uncorrelated
    subquery in ``WHERE`` is evaluated once, ahead of the first row. It runs on the asyncpg connection itself
    (:func:`assent.db.driver_connection`): it is the first statement of every batch of every consumer.
    """
    pg = await driver_connection(conn)
    rows = await pg.fetch(claim_statement(table), consumer, list(message_ids), list(lock_keys))
    return {row[0] for row in rows}


def claim_statement(table: Table) -> str:
    """The statement of :func:`claim_many`: ``$1`` the consumer, ``$2`` the message ids, ``$3`` the lock keys; it
    returns the ids delivered for the first time (``message_id``)."""
    statement = _CLAIM_LOCKED.get(table.fullname)
    if statement is None:
        statement = _CLAIM_LOCKED[table.fullname] = (
            f"INSERT INTO {table.fullname} (consumer, message_id)"
            " SELECT $1::text, id FROM unnest($2::uuid[]) AS id"
            " WHERE (SELECT count(pg_advisory_xact_lock(k)) FROM"
            "  (SELECT DISTINCT hashtext(key) AS k FROM unnest($3::text[]) AS key ORDER BY 1 OFFSET 0) AS ks) >= 0"
            " ON CONFLICT DO NOTHING RETURNING message_id"
        )
    return statement


async def prune(engine: AsyncEngine, table: Table, older_than: timedelta) -> int:
    """Forget messages received longer ago than ``older_than``; returns how many.

    Safe as long as ``older_than`` exceeds the topics' retention: no copy of such a message can still come.
    """
    async with engine.begin() as conn:
        result = await conn.execute(table.delete().where(table.c.received_at < func.now() - older_than))
    return result.rowcount or 0
