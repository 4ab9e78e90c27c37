"""The transactional outbox and its relay.

A handler that changes state writes the events it causes into the ``outbox`` table of its own schema, in
the same transaction. The relay publishes committed rows to Kafka and deletes them once the broker has
acknowledged them. Delivery is therefore at least once: a crash after publishing and before deleting
publishes the row again with the same envelope ``id``, which consumers drop through their inbox.

Each row keeps the trace context that was current when it was written, and the relay publishes under that
context, so one trace spans the whole chain across services.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from faststream.kafka import KafkaBroker
from sqlalchemy import BigInteger, Column, DateTime, Identity, LargeBinary, MetaData, Table, Text, Uuid, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .contracts import Message
from .telemetry import attach_carrier, current_carrier, detach
from .topics import Topic

log = logging.getLogger(__name__)


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
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )


class Outbox:
    """Writes messages into the outbox table, inside the caller's transaction."""

    def __init__(self, table: Table, topic_prefix: str) -> None:
        self.table = table
        self.topic_prefix = topic_prefix
        self._written = asyncio.Event()

    async def put(self, conn: AsyncConnection, topic: Topic, key: str, message: Message) -> None:
        if type(message) not in topic.messages:
            raise TypeError(f"{type(message).__name__} does not belong on {topic.name}")
        await conn.execute(
            self.table.insert().values(
                message_id=message.id,
                topic=topic.full_name(self.topic_prefix),
                key=key,
                payload=message.to_bytes(),
                headers=current_carrier(),
            )
        )
        self._written.set()

    def written(self) -> asyncio.Event:
        """Set whenever this process wrote a row; the relay clears it. It may fire before the commit."""
        return self._written


class OutboxRelay:
    """Publishes committed outbox rows in id order, in batches, and deletes them once acknowledged.

    Several relays (replicas) may run against one table: ``FOR UPDATE SKIP LOCKED`` gives each row to one
    relay at a time. Rows written by this process wake the relay at once; others are found by polling.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        outbox: Outbox,
        broker: KafkaBroker,
        *,
        poll_seconds: float = 0.5,
        batch_size: int = 500,
    ) -> None:
        self.engine = engine
        self.outbox = outbox
        self.broker = broker
        self.poll_seconds = poll_seconds
        self.batch_size = batch_size
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        written = self.outbox.written()
        while True:
            try:
                await asyncio.wait_for(written.wait(), timeout=self.poll_seconds)
            except TimeoutError:
                pass
            written.clear()
            try:
                while await self.relay_once() == self.batch_size:
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox relay failed; retrying")
                await asyncio.sleep(self.poll_seconds)

    async def relay_once(self) -> int:
        """Publish one batch; returns how many rows it published."""
        table = self.outbox.table
        async with self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    table.select().order_by(table.c.id).limit(self.batch_size).with_for_update(skip_locked=True)
                )
            ).all()
            if not rows:
                return 0
            pending: list[asyncio.Future[Any]] = []
            for row in rows:
                token = attach_carrier(row.headers)
                try:
                    pending.append(
                        await self.broker.publish(
                            row.payload,
                            topic=row.topic,
                            key=row.key.encode(),
                            headers={"message-type": _type_of(row.payload)},
                            no_confirm=True,
                        )
                    )
                finally:
                    detach(token)
            await asyncio.gather(*pending)
            await conn.execute(table.delete().where(table.c.id.in_([row.id for row in rows])))
        return len(rows)


def _type_of(payload: bytes) -> str:
    # Cheap routing hint for tools reading the topic; consumers read the envelope, not this header.
    marker = b'"type":"'
    start = payload.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    return payload[start : payload.find(b'"', start)].decode(errors="replace")
