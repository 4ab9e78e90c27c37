"""The transactional outbox and its relay.

A handler that changes state writes the events it causes into the ``outbox`` table of its own schema, in
the same transaction (:meth:`Outbox.transaction` and :meth:`Outbox.put`). Once that transaction commits,
the relay of the same process publishes those rows at once from memory and then deletes them. Rows that
the fast path did not publish (the process died, or Kafka refused them) are swept from the table by any
replica's relay once they are older than a grace period.

Delivery is therefore at least once: a crash between publishing and deleting publishes a row again with
the same envelope ``id``, which consumers drop through their inbox. Order is kept per process in commit
order; rows recovered by a sweep may arrive after younger rows.

Each row keeps the trace context that was current when it was written, and the relay publishes under that
context, so one trace spans the whole chain across services.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from faststream.kafka import KafkaBroker
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Identity,
    LargeBinary,
    MetaData,
    Table,
    Text,
    Uuid,
    any_,
    bindparam,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.expression import Delete

from .contracts import Message
from .db import driver_connection
from .telemetry import attach_carrier, current_carrier, detach
from .topics import Topic

log = logging.getLogger(__name__)

_PENDING = "assent.outbox.pending"


def outbox_table(metadata: MetaData) -> Table:
    return Table(
        "outbox",
        metadata,
        Column("id", BigInteger, Identity(), primary_key=True),
        Column("message_id", Uuid, nullable=False),
        Column("topic", Text, nullable=False),
        Column("key", Text, nullable=False),
        Column("payload", LargeBinary, nullable=False),
        Column("headers", JSONB, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.clock_timestamp()),
    )


@dataclass(frozen=True)
class Envelope:
    """One outbox row as the relay publishes it."""

    id: int
    topic: str
    key: str
    payload: bytes
    headers: dict[str, str]
    type: str


class Outbox:
    """Writes messages into the outbox table, inside the caller's transaction."""

    def __init__(self, table: Table, topic_prefix: str) -> None:
        self.table = table
        self.topic_prefix = topic_prefix
        self.committed: deque[list[Envelope]] = deque()
        self.wake = asyncio.Event()
        # One statement for any number of rows, on the asyncpg connection itself (see
        # :func:`assent.db.driver_connection`); rows are matched back to their ids by message id.
        self._insert = (
            f"INSERT INTO {table.fullname} (message_id, topic, key, payload, headers)"
            " SELECT m, t, k, p, h::jsonb FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::text[])"
            " AS r(m, t, k, p, h) RETURNING id, message_id"
        )

    @asynccontextmanager
    async def transaction(self, engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
        """``engine.begin()`` whose :meth:`put` rows are written at the end and handed to the relay after commit."""
        async with engine.begin() as conn:
            pending: list[tuple[dict[str, Any], str]] = []
            conn.info[_PENDING] = pending
            try:
                yield conn
                envelopes: list[Envelope] = []
                if pending:
                    pg = await driver_connection(conn)
                    rows = await pg.fetch(
                        self._insert,
                        [row["message_id"] for row, _ in pending],
                        [row["topic"] for row, _ in pending],
                        [row["key"] for row, _ in pending],
                        [row["payload"] for row, _ in pending],
                        [json.dumps(row["headers"]) for row, _ in pending],
                    )
                    ids = {message_id: id_ for id_, message_id in rows}
                    envelopes = [
                        Envelope(
                            ids[row["message_id"]], row["topic"], row["key"], row["payload"], row["headers"], type_
                        )
                        for row, type_ in pending
                    ]
            finally:
                conn.info.pop(_PENDING, None)
        if envelopes:
            self.committed.append(envelopes)
            self.wake.set()

    async def put(self, conn: AsyncConnection, topic: Topic, key: str, message: Message) -> None:
        """Add ``message`` to the transaction opened by :meth:`transaction`; it is published after commit."""
        if type(message) not in topic.messages:
            raise TypeError(f"{type(message).__name__} does not belong on {topic.name}")
        pending = conn.info.get(_PENDING)
        if pending is None:
            raise RuntimeError("Outbox.put needs a transaction opened by Outbox.transaction")
        row = {
            "message_id": message.id,
            "topic": topic.full_name(self.topic_prefix),
            "key": key,
            "payload": message.to_bytes(),
            "headers": current_carrier(),
        }
        pending.append((row, message.type))


class OutboxRelay:
    """Publishes this process's committed rows at once, and sweeps rows left behind by anyone.

    Several relays (replicas) may share one table. The fast path deletes its rows before publishing them and
    commits after; a sweep takes rows ``FOR UPDATE SKIP LOCKED``, only rows older than ``sweep_after`` (counted
    from the row's insert, not its transaction's start) so that it leaves a live process's rows to it.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        outbox: Outbox,
        broker: KafkaBroker,
        *,
        poll_seconds: float = 0.5,
        sweep_after: timedelta = timedelta(seconds=2),
        batch_size: int = 500,
    ) -> None:
        self.engine = engine
        self.outbox = outbox
        self.broker = broker
        self.poll_seconds = poll_seconds
        self.sweep_after = sweep_after
        self.batch_size = batch_size
        self._task: asyncio.Task[None] | None = None
        self._delete = f"DELETE FROM {outbox.table.fullname} WHERE id = ANY($1::bigint[]) RETURNING id"

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.publish_committed()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_sweep = loop.time()
        while True:
            try:
                await asyncio.wait_for(self.outbox.wake.wait(), timeout=self.poll_seconds)
            except TimeoutError:
                pass
            self.outbox.wake.clear()
            try:
                await self.publish_committed()
                if loop.time() >= next_sweep:
                    while await self.sweep() == self.batch_size:
                        pass
                    next_sweep = loop.time() + self.poll_seconds
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox relay failed; the sweep will retry")
                await asyncio.sleep(self.poll_seconds)

    async def publish_committed(self) -> None:
        """Fast path: publish what this process committed, holding the rows (deleted, uncommitted) meanwhile.

        The rows are deleted first, in a transaction that commits only once Kafka has acknowledged them: a
        sweep on another replica skips them while they are locked and never sees them afterwards, so no row
        is published by two relays at once. When publishing fails, the transaction rolls back and the rows
        stay for the sweep.
        """
        if not self.outbox.committed:
            return
        batches = list(self.outbox.committed)
        self.outbox.committed.clear()
        envelopes = {envelope.id: envelope for batch in batches for envelope in batch}
        async with self.engine.connect() as conn:
            pg = await driver_connection(conn)  # no SQLAlchemy transaction: the one below is asyncpg's own
            async with pg.transaction():
                held = {row[0] for row in await pg.fetch(self._delete, list(envelopes))}
                await self._publish([envelope for id_, envelope in envelopes.items() if id_ in held])

    async def sweep(self) -> int:
        """Publish and delete one batch of rows older than the grace period; returns how many."""
        table = self.outbox.table
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    table.select()
                    .where(table.c.created_at < func.now() - self.sweep_after)
                    .order_by(table.c.id)
                    .limit(self.batch_size)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if not rows:
                return 0
            await self._publish(
                [Envelope(r.id, r.topic, r.key, r.payload, r.headers, _type_of(r.payload)) for r in rows]
            )
            await conn.execute(_delete(table), {"ids": [row.id for row in rows]})
        return len(rows)

    async def _publish(self, envelopes: Sequence[Envelope]) -> None:
        pending: list[asyncio.Future[Any]] = []
        for envelope in envelopes:
            token = attach_carrier(envelope.headers)
            try:
                pending.append(
                    await self.broker.publish(
                        envelope.payload,
                        topic=envelope.topic,
                        key=envelope.key.encode(),
                        headers={"message-type": envelope.type},
                        no_confirm=True,
                    )
                )
            finally:
                detach(token)
        await asyncio.gather(*pending)


def _delete(table: Table) -> Delete:
    # ``= ANY(array)`` rather than ``IN (...)``: one statement text (prepared once) whatever the number of rows.
    return table.delete().where(table.c.id == any_(bindparam("ids", type_=ARRAY(BigInteger))))


def _type_of(payload: bytes) -> str:
    # A routing hint for tools reading the topic; consumers read the envelope, not this header.
    marker = b'"type":"'
    start = payload.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    return payload[start : payload.find(b'"', start)].decode(errors="replace")
