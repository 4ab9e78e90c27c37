"""The transactional outbox and its relay.

A handler that changes state writes the events it causes into the ``outbox`` table of its own schema, in
the same transaction (:meth:`Outbox.transaction` and :meth:`Outbox.put`), or, for a change that is one
statement, in that statement itself (:meth:`Outbox.write_with`). Once that transaction commits,
the relay of the same process publishes those rows at once from memory and then deletes them; until the
process dies no other relay touches them. Rows of a process that died before publishing them are swept from
the table by any replica's relay once they are older than a grace period (:class:`OutboxRelay`).

Delivery is therefore at least once: a crash between publishing and deleting publishes a row again with
the same envelope ``id``, which consumers drop through their inbox. Order is kept per process in commit
order; rows recovered by a sweep may arrive after younger rows.

Each row keeps the trace context that was current when it was written, and the relay publishes under that
context, so one trace spans the whole chain across services.

The relay's backlog (rows committed, not yet acknowledged by Kafka), its latency and what it published are
Prometheus metrics (:mod:`assent.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

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
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .contracts import Message
from .db import driver_connection
from .http import database_unavailable
from .metrics import OUTBOX_PUBLISHED, OUTBOX_RELAY_SECONDS, count_backlog
from .telemetry import attach_carrier, current_carrier, detach
from .topics import Topic

log = logging.getLogger(__name__)

_PENDING = "assent.outbox.pending"
_LAST = "assent.outbox.last"


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
        # The relay that publishes the row while it lives (:class:`OutboxRelay`); none: any relay's sweep.
        Column("relay", BigInteger, nullable=True),
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


@dataclass(frozen=True)
class _Row:
    """A message on its way into the outbox."""

    message_id: UUID
    topic: str
    key: str
    payload: bytes
    headers: dict[str, str]
    type: str


def _envelopes(rows: Sequence[_Row], inserted: Sequence[Any]) -> list[Envelope]:
    ids = {message_id: id_ for id_, message_id in inserted}
    return [Envelope(ids[row.message_id], row.topic, row.key, row.payload, row.headers, row.type) for row in rows]


class Outbox:
    """Writes messages into the outbox table, inside the caller's transaction (or with the caller's statement)."""

    def __init__(self, table: Table, topic_prefix: str) -> None:
        self.table = table
        self.topic_prefix = topic_prefix
        self.committed: deque[list[Envelope]] = deque()
        self.committed_since: float | None = None
        """When (``time.monotonic``) the oldest batch in ``committed`` was handed over; None while it is empty."""
        self.wake = asyncio.Event()
        self.handed_over = 0
        """Batches (one per committed transaction with rows) handed to the relay since the process started."""
        self.published = 0
        """Of those, how many Kafka acknowledged (the relay publishes them in the order they were handed over)."""
        self._published_now = asyncio.Event()
        self.relay_key = _relay_key()
        """Written into each row: the key of the relay (of this process) that publishes it."""
        # One statement for any number of rows, on the asyncpg connection itself (see
        # :func:`assent.db.driver_connection`); rows are matched back to their ids by message id.
        self._insert = self._insert_after(0)
        self._with: dict[int, str] = {}

    def _insert_after(self, n: int) -> str:
        """The rows' insert, its six parameters numbered after ``n`` others."""
        m, t, k, p, h, r = (f"${n + i}" for i in range(1, 7))
        return (
            f"INSERT INTO {self.table.fullname} (message_id, topic, key, payload, headers, relay)"
            f" SELECT m, t, k, p, h::jsonb, {r} FROM unnest({m}::uuid[], {t}::text[], {k}::text[], {p}::bytea[],"
            f" {h}::text[]) AS r(m, t, k, p, h) RETURNING id, message_id"
        )

    @asynccontextmanager
    async def transaction(self, engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
        """``engine.begin()`` whose :meth:`put` rows are written at the end and handed to the relay after commit."""
        async with engine.begin() as conn:
            pending: list[_Row] = []
            conn.info[_PENDING] = pending
            try:
                yield conn
                envelopes: list[Envelope] = []
                last: tuple[str, list[Any]] | None = conn.info.pop(_LAST, None)
                if pending:
                    pg = await driver_connection(conn)
                    if last is None:
                        inserted = await pg.fetch(self._insert, *self._arguments(pending))
                    else:
                        statement, args = last
                        inserted = await pg.fetch(
                            f"WITH written AS ({statement}) {self._insert_with(len(args))}",
                            *args,
                            *self._arguments(pending),
                        )
                    envelopes = _envelopes(pending, inserted)
                elif last is not None:
                    await (await driver_connection(conn)).execute(last[0], *last[1])
            finally:
                conn.info.pop(_PENDING, None)
                conn.info.pop(_LAST, None)
        self._hand_over(envelopes)

    async def write_last(self, conn: AsyncConnection, statement: str, args: Sequence[Any]) -> None:
        """Hold ``statement`` (an INSERT, UPDATE or DELETE whose parameters are ``$1`` to ``$n``, ``args``) to send with
        the rows of the transaction opened by :meth:`transaction` when it ends: both in one round trip, as a
        data-modifying ``WITH`` of the rows' insert (or the statement alone when there are no rows).

        For the last write of a transaction: nothing after it in the transaction may read what it writes. A
        statement held already runs now, in order.
        """
        if _PENDING not in conn.info:
            raise RuntimeError("Outbox.write_last needs a transaction opened by Outbox.transaction")
        held = conn.info.get(_LAST)
        if held is not None:
            await (await driver_connection(conn)).execute(held[0], *held[1])
        conn.info[_LAST] = (statement, list(args))

    async def put(self, conn: AsyncConnection, topic: Topic, key: str, message: Message) -> None:
        """Add ``message`` to the transaction opened by :meth:`transaction`; it is published after commit."""
        pending = conn.info.get(_PENDING)
        if pending is None:
            raise RuntimeError("Outbox.put needs a transaction opened by Outbox.transaction")
        pending.append(self._row(topic, key, message))

    async def write_with(
        self, conn: AsyncConnection, statement: str, args: Sequence[Any], messages: Sequence[tuple[Topic, str, Message]]
    ) -> None:
        """Run ``statement`` and write ``messages`` (topic, key, message) in one statement, which commits on its own.

        For a change that is one statement, this saves the round trips of BEGIN and COMMIT (and one insert) that
        :meth:`transaction` would take: the statement runs as a data-modifying ``WITH`` of the rows' insert, so
        both are written or neither. ``statement`` is an INSERT, UPDATE or DELETE whose parameters are ``$1`` to
        ``$n`` (``args``); ``conn`` is outside any transaction (``engine.connect()``). The rows go to the relay
        once the statement has returned.
        """
        if conn.in_transaction():
            raise RuntimeError("Outbox.write_with commits on its own; it cannot join a transaction")
        rows = [self._row(topic, key, message) for topic, key, message in messages]
        pg = await driver_connection(conn)
        written = f"WITH written AS ({statement}) {self._insert_with(len(args))}"
        self._hand_over(_envelopes(rows, await pg.fetch(written, *args, *self._arguments(rows))))

    def _insert_with(self, n: int) -> str:
        """The rows' insert after a statement of ``n`` parameters."""
        insert = self._with.get(n)
        if insert is None:
            insert = self._with[n] = self._insert_after(n)
        return insert

    def _row(self, topic: Topic, key: str, message: Message) -> _Row:
        if type(message) not in topic.messages:
            raise TypeError(f"{type(message).__name__} does not belong on {topic.name}")
        return _Row(
            message.id, topic.full_name(self.topic_prefix), key, message.to_bytes(), current_carrier(), message.type
        )

    def _arguments(self, rows: Sequence[_Row]) -> tuple[Any, ...]:
        return (
            [row.message_id for row in rows],
            [row.topic for row in rows],
            [row.key for row in rows],
            [row.payload for row in rows],
            [json.dumps(row.headers) for row in rows],
            self.relay_key,
        )

    def _hand_over(self, envelopes: list[Envelope]) -> None:
        if envelopes:
            if not self.committed:
                self.committed_since = time.monotonic()
            self.committed.append(envelopes)
            self.handed_over += 1
            self.wake.set()

    def acknowledged(self, batches: int) -> None:
        self.published += batches
        self._published_now.set()
        self._published_now = asyncio.Event()

    async def until_published(self, timeout: float) -> bool:
        """Wait until Kafka has acknowledged every row this process committed so far (True), or ``timeout``
        seconds (False: the rows stay committed, and the relay publishes them once Kafka takes them).

        For a write whose answer promises readers in other services that they see it: once the message is in
        Kafka, a reader that has consumed to the topic's end has it (:meth:`assent.runtime.consumer.Offsets.caught_up`).
        """
        mark = self.handed_over
        try:
            async with asyncio.timeout(timeout):
                while self.published < mark:
                    await self._published_now.wait()
        except TimeoutError:
            return False
        return True


DELETE_AFTER_SECONDS = 0.02
"""How long the relay waits for more commits before it deletes what it published."""
RETRY_FIRST_SECONDS = 0.5
"""How long the relay waits before trying again after a failure; doubled for each failure in a row."""
RETRY_MAX_SECONDS = 5.0
"""The longest the relay waits before trying again after failures in a row."""
RELAY_LOCK_SPACE = 0x6F757462
"""The first key of every relay's advisory lock (``pg_advisory_lock(RELAY_LOCK_SPACE, relay_key)``)."""


class OutboxRelay:
    """Publishes this process's committed rows at once, and sweeps rows left behind by relays that are gone.

    Each row names the relay of the process that wrote it (``relay``, the outbox's ``relay_key``), and each relay
    holds a PostgreSQL advisory lock on its key for as long as its process lives (:meth:`claim`, on a
    connection of its own). So a row has exactly one publisher while its writer lives, and the rows of a writer
    that died (its connection closed, its lock released) go to whichever relay sweeps first:

    - **fast path**: right after its transaction commits, the writer's relay publishes the rows from memory,
      then deletes them (one statement, no transaction). Publishing waits for no database round trip. When
      Kafka refuses them, they are tried again, in order, before anything newer;
    - **sweep**: every ``poll_seconds`` a relay takes, ``FOR UPDATE SKIP LOCKED``, rows older than
      ``sweep_after`` whose relay holds no lock (or that name none), publishes them and deletes them.

    No row is published by two relays at once. A process killed between publishing and deleting has its rows
    published again by a sweep, with the same envelope ``id``, which consumers drop through their inbox.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        outbox: Outbox,
        broker: KafkaBroker,
        *,
        poll_seconds: float = 2.0,
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
        self._retry: deque[list[Envelope]] = deque()
        self._retry_since: float | None = None
        self._retry_batches = 0
        """How many handed-over batches ``_retry`` holds (it holds them joined)."""
        self._in_flight = 0
        self._in_flight_since: float | None = None
        self._published: list[int] = []
        self._lock_conn: AsyncConnection | None = None
        self._lock_wanted = False
        table = outbox.table.fullname
        self._delete = f"DELETE FROM {table} WHERE id = ANY($1::bigint[])"
        self._sweep = (
            f"SELECT id, topic, key, payload, headers FROM {table}"
            " WHERE created_at < now() - $1::interval AND (relay IS NULL OR relay NOT IN ("
            "  SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND classid = $2::bigint::oid"
            "  AND objsubid = 2 AND granted"
            "  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())))"
            " ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED"
        )
        count_backlog(self)

    def backlog(self) -> int:
        """Rows this process committed that Kafka has not acknowledged yet: waiting, being published, or to retry."""
        return sum(map(len, self.outbox.committed)) + sum(map(len, self._retry)) + self._in_flight

    def waited(self, now: float | None = None) -> float | None:
        """How long (seconds, ``time.monotonic``) the oldest row this process committed has waited for Kafka's
        acknowledgement: handed over, being published or to be tried again. None when no row waits.

        While Kafka takes the rows it stays near the time a produce takes; while Kafka cannot take them (fewer
        in-sync replicas than ``min.insync.replicas``, no leader, requests timing out) it grows until it does
        (:func:`writes_stalled`)."""
        since = [t for t in (self._in_flight_since, self._retry_since, self.outbox.committed_since) if t is not None]
        if not since:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - min(since))

    @property
    def claimed(self) -> bool:
        """Whether this relay holds its lock (:meth:`claim`): rows may be written from then on."""
        return self._lock_conn is not None

    async def claim(self) -> None:
        """Take this relay's lock, on a connection held until :meth:`stop`; call it before anything writes rows.

        Keys are drawn at random; on the rare draw that another live relay holds, the outbox gets a new one.
        """
        self._lock_wanted = True
        if self._lock_conn is not None:
            return
        conn = await self.engine.connect()
        pg = await driver_connection(conn)
        while not await pg.fetchval("SELECT pg_try_advisory_lock($1, $2)", RELAY_LOCK_SPACE, self.outbox.relay_key):
            self.outbox.relay_key = _relay_key()
        # This connection also deletes what was published. Those commits need not wait for the disk: a delete
        # lost in a crash publishes its rows once more, which the inbox drops, and the handlers' commits on the
        # hot path do not queue behind them for the WAL flush.
        await pg.execute("SET synchronous_commit = off")
        # A process whose machine vanishes sends no FIN: the server's keepalive probes find the connection dead
        # within about 25 s (instead of the system's default two hours), and its lock, with its rows, is free.
        await pg.execute("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3")
        self._lock_conn = conn

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self.publish_committed()
        finally:
            if self._lock_conn is not None:
                # Closed, not handed back to the pool: the lock goes with the connection, and what is left of
                # this relay's rows is the sweeps'.
                await self._lock_conn.invalidate()
                await self._lock_conn.close()
                self._lock_conn = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_sweep = loop.time()
        failures = 0
        while True:
            idle = False
            try:
                # Published rows are deleted once no new commit came for a moment (or many wait): off the
                # critical path of the next hop, and in fewer statements.
                timeout = DELETE_AFTER_SECONDS if self._published else self.poll_seconds
                # Waited on in this task (no task of its own, as wait_for would make): a commit's hand-over
                # resumes the relay at once.
                async with asyncio.timeout(timeout):
                    await self.outbox.wake.wait()
            except TimeoutError:
                idle = True
            self.outbox.wake.clear()
            try:
                sweeping = loop.time() >= next_sweep
                await self.publish_committed(delete=False)  # needs only the broker
                await self._keep_lock(ping=sweeping)
                if idle or len(self._published) >= self.batch_size:
                    await self._forget_published()
                if sweeping:
                    while await self.sweep() == self.batch_size:
                        pass
                    next_sweep = loop.time() + self.poll_seconds
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if database_unavailable(exc):
                    log.warning("outbox relay: the database is unavailable (%s); trying again", type(exc).__name__)
                else:
                    log.exception("outbox relay failed; trying again")
                failures += 1
                # Backing off, to RETRY_MAX_SECONDS: an outage is not met with a connection attempt per poll.
                await asyncio.sleep(min(RETRY_FIRST_SECONDS * 2 ** (failures - 1), RETRY_MAX_SECONDS))

    async def _keep_lock(self, *, ping: bool) -> None:
        """Check the lock's connection (with ``ping``, by a round trip; else by what the driver knows); if it broke
        (the database restarted), take the lock again, on a new connection. Raises while the database is down."""
        if self._lock_conn is not None:
            try:
                pg = await driver_connection(self._lock_conn)
                if pg.is_closed():
                    raise ConnectionError("the server closed the connection")
                if ping:
                    await pg.fetchval("SELECT 1")
                return
            except Exception as exc:
                log.warning("the outbox relay lost its lock's connection (%s); taking the lock again", exc)
                with contextlib.suppress(Exception):
                    await self._lock_conn.invalidate()
                self._lock_conn = None
        if self._lock_wanted:
            await self.claim()

    async def publish_committed(self, *, delete: bool = True) -> None:
        """Fast path: publish what this process committed (after what failed before), then (``delete``) delete
        the rows published so far.

        When publishing fails, the rows not yet acknowledged are kept, in order, for the next attempt; they stay
        in the table, and are the sweeps' only if this process dies.
        """
        if not self.outbox.committed and not self._retry:
            if delete:
                await self._forget_published()
            return
        batches = [*self._retry, *self.outbox.committed]
        since = min(
            (t for t in (self._retry_since, self.outbox.committed_since) if t is not None), default=time.monotonic()
        )
        handed = self._retry_batches + len(self.outbox.committed)
        self._retry.clear()
        self._retry_since = None
        self._retry_batches = 0
        self.outbox.committed.clear()
        self.outbox.committed_since = None
        envelopes = [envelope for batch in batches for envelope in batch]
        self._in_flight = len(envelopes)
        self._in_flight_since = since
        try:
            await self._publish(envelopes)
        except BaseException:
            self._retry.append(envelopes)
            self._retry_since = since
            self._retry_batches = handed
            raise
        finally:
            self._in_flight = 0
            self._in_flight_since = None
        self.outbox.acknowledged(handed)
        OUTBOX_RELAY_SECONDS.observe(time.monotonic() - since)
        OUTBOX_PUBLISHED.labels("fast").inc(len(envelopes))
        self._published += [envelope.id for envelope in envelopes]
        if delete:
            await self._forget_published()

    async def _forget_published(self) -> None:
        """Delete the rows published so far (one statement, committed on its own); kept for later if it fails."""
        if not self._published:
            return
        if self._lock_conn is not None:
            await (await driver_connection(self._lock_conn)).execute(self._delete, self._published)
        else:  # a relay that holds no lock (tests drive one so)
            async with self.engine.connect() as conn:
                await (await driver_connection(conn)).execute(self._delete, self._published)
        self._published = []

    async def sweep(self) -> int:
        """Publish and delete one batch of rows older than the grace period whose relay is gone; returns how many."""
        async with self.engine.connect() as conn:
            pg = await driver_connection(conn)
            async with pg.transaction():
                rows = await pg.fetch(self._sweep, self.sweep_after, RELAY_LOCK_SPACE, self.batch_size)
                if not rows:
                    return 0
                await self._publish(
                    [
                        Envelope(r["id"], r["topic"], r["key"], r["payload"], r["headers"], _type_of(r["payload"]))
                        for r in rows
                    ]
                )
                await pg.execute(self._delete, [row["id"] for row in rows])
        OUTBOX_PUBLISHED.labels("sweep").inc(len(rows))
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


def writes_stalled(waited: float | None, bound: float) -> bool:
    """Whether Kafka has stopped taking this process's messages, so that a write that would enqueue one should be
    refused (503 with ``retry``) before anything is committed, rather than committed to wait.

    ``waited`` is how long the oldest row this process committed has waited for Kafka's acknowledgement
    (:meth:`OutboxRelay.waited`; None: no row waits), ``bound`` how long a row may wait before that counts (0: never
    refuse). A relay that publishes keeps ``waited`` near the time of one produce, so the rule holds only while no
    produce has succeeded for ``bound`` seconds, and lifts as soon as one does: the backlog goes at once.
    """
    return bound > 0 and waited is not None and waited > bound


def _relay_key() -> int:
    return secrets.randbelow(2**31 - 1) + 1


def _type_of(payload: bytes) -> str:
    # A routing hint for tools reading the topic; consumers read the envelope, not this header.
    marker = b'"type":"'
    start = payload.find(marker)
    if start < 0:
        return ""
    start += len(marker)
    return payload[start : payload.find(b'"', start)].decode(errors="replace")
