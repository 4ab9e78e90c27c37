"""Batches against the real servers: what one fetch returns is handled in one transaction, a failing message
is dead-lettered without losing the rest of its batch, and two outbox relays never publish a row twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from sqlalchemy import MetaData, func, select, text
from sqlalchemy.engine import make_url

from assent.contracts import StepEnded
from assent.db import create_engine
from assent.messaging import ensure_topics, make_broker, start_broker
from assent.outbox import Outbox, OutboxRelay, outbox_table
from assent.runtime.consumer import FailurePolicy, Received, subscribe
from assent.topics import STUDIO_TURNS
from tests.conftest import Endpoints, create_database

pytestmark = pytest.mark.integration

FAST = FailurePolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)


def step(n: int, session: str = "s") -> StepEnded:
    return StepEnded(session_id=session, turn_id="t", step=n, tool_call_ids=("c",))


async def _connect(database_url: str) -> asyncpg.Connection:
    url = make_url(database_url)
    return await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )


async def _topic_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Every value on ``topic`` once at least ``expected`` have arrived (read from the start)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(20):
            while len(values) < expected:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    values += [record.value for record in records]
        # Anything beyond ``expected`` that is already there arrives with the next fetch.
        for records in (await consumer.getmany(timeout_ms=500)).values():
            values += [record.value for record in records]
    finally:
        await consumer.stop()
    return values


async def test_a_fetch_is_one_batch_and_a_failing_message_leaves_the_rest_committed(endpoints: Endpoints) -> None:
    prefix = f"batch{uuid.uuid4().hex[:8]}."
    database_url = await create_database(endpoints.database_url, prefix.rstrip("."))
    db = await _connect(database_url)
    await db.execute("CREATE TABLE handled (step int PRIMARY KEY)")
    await ensure_topics(endpoints.kafka, prefix)
    topic = STUDIO_TURNS.full_name(prefix)

    # Twenty messages wait before the consumer starts, so its first fetch returns them together.
    messages = [step(n) for n in range(20)]
    producer = AIOKafkaProducer(bootstrap_servers=endpoints.kafka)
    await producer.start()
    try:
        for message in messages:
            await producer.send_and_wait(topic, message.to_bytes(), key=b"s", partition=0)
    finally:
        await producer.stop()

    batches: list[list[int]] = []
    pool = await asyncpg.create_pool(**_pool_args(database_url))

    async def handler(batch: Sequence[Received]) -> None:
        steps = [item.message.step for item in batch]  # type: ignore[attr-defined]
        batches.append(steps)
        async with pool.acquire() as conn, conn.transaction():
            for n in steps:
                await conn.execute("INSERT INTO handled VALUES ($1)", n)
                if n == 13:
                    raise ValueError("step 13 cannot be handled")

    broker = make_broker(endpoints.kafka, client_id="batch-test", idempotent=False)
    subscribe(broker, {STUDIO_TURNS: handler}, prefix=prefix, group_id=f"{prefix}g", policy=FAST)
    await start_broker(broker)
    try:
        dead = await _topic_values(endpoints.kafka, STUDIO_TURNS.dlq_name(prefix), 1)
        assert dead == [messages[13].to_bytes()]
        handled = sorted(await db.fetchval("SELECT array_agg(step) FROM handled") or [])
        assert handled == [n for n in range(20) if n != 13], "every other message committed, once"
        assert len(batches[0]) > 1, f"the first fetch was not one batch: {batches}"
        assert 13 in batches[0] and [13] in batches and batches.count([13]) == FAST.max_attempts
    finally:
        await broker.stop()
        await pool.close()
        await db.close()


def _pool_args(database_url: str) -> dict[str, Any]:
    url = make_url(database_url)
    return {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "database": url.database,
    }


class _HeldBroker:
    """A real broker whose publishing waits until the test lets it go on."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.publishing = asyncio.Event()
        self.go_on = asyncio.Event()

    async def publish(self, *args: Any, **kwargs: Any) -> Any:
        self.publishing.set()
        await self.go_on.wait()
        return await self.broker.publish(*args, **kwargs)


@dataclass
class OutboxWorld:
    """An outbox table of its own, its engine, a connected broker, and a topic prefix of their own."""

    prefix: str
    table: Any
    engine: Any
    broker: Any

    async def commit(self, outbox: Outbox, n: int) -> list[StepEnded]:
        """Commit ``n`` messages through ``outbox``; returns them."""
        sent = [step(i, session=self.prefix) for i in range(n)]
        async with outbox.transaction(self.engine) as conn:
            for message in sent:
                await outbox.put(conn, STUDIO_TURNS, "s", message)
        return sent


@asynccontextmanager
async def outbox_world(endpoints: Endpoints) -> AsyncIterator[OutboxWorld]:
    prefix = f"relay{uuid.uuid4().hex[:8]}."
    database_url = await create_database(endpoints.database_url, prefix.rstrip("."))
    await ensure_topics(endpoints.kafka, prefix)
    metadata = MetaData(schema="public")
    table = outbox_table(metadata)
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    broker = make_broker(endpoints.kafka, client_id="relay-test", idempotent=False)
    await broker.connect()
    try:
        yield OutboxWorld(prefix, table, engine, broker)
    finally:
        await broker.stop()
        await engine.dispose()


async def test_two_relays_never_publish_a_row_twice(endpoints: Endpoints) -> None:
    async with outbox_world(endpoints) as world:
        held = _HeldBroker(world.broker)
        outbox = Outbox(world.table, world.prefix)
        mine = OutboxRelay(world.engine, outbox, held, sweep_after=timedelta(0))  # type: ignore[arg-type]
        other = OutboxRelay(world.engine, Outbox(world.table, world.prefix), world.broker, sweep_after=timedelta(0))
        await mine.claim()
        try:
            sent = await world.commit(outbox, 5)
            publishing = asyncio.create_task(mine.publish_committed())
            await asyncio.wait_for(held.publishing.wait(), 10)
            # The other replica sweeps with no grace period at all while this one is still publishing.
            assert await other.sweep() == 0
            held.go_on.set()
            await publishing
            assert await other.sweep() == 0
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 0
        finally:
            await mine.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 5)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)


async def test_rows_wait_for_their_relay_while_it_lives_and_go_to_the_sweep_once_it_is_gone(
    endpoints: Endpoints,
) -> None:
    class Refusing:
        async def publish(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("the broker is unreachable")

    async with outbox_world(endpoints) as world:
        outbox = Outbox(world.table, world.prefix)
        failing = OutboxRelay(world.engine, outbox, Refusing())  # type: ignore[arg-type]
        sweeper = OutboxRelay(world.engine, Outbox(world.table, world.prefix), world.broker, sweep_after=timedelta(0))
        await failing.claim()
        sent = await world.commit(outbox, 3)
        with pytest.raises(ConnectionError):
            await failing.publish_committed()
        assert await sweeper.sweep() == 0  # its relay lives: it tries them again itself
        with pytest.raises(ConnectionError):
            await failing.stop()  # a last attempt, then its lock is gone with its connection
        assert await sweeper.sweep() == 3
        assert await sweeper.sweep() == 0
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 3)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)


async def test_a_relay_tries_refused_rows_again_in_order_before_newer_ones(endpoints: Endpoints) -> None:
    class RefusingOnce:
        def __init__(self, broker: Any) -> None:
            self.broker, self.refused = broker, False

        async def publish(self, *args: Any, **kwargs: Any) -> Any:
            if not self.refused:
                self.refused = True
                raise ConnectionError("the broker is unreachable")
            return await self.broker.publish(*args, **kwargs)

    async with outbox_world(endpoints) as world:
        outbox = Outbox(world.table, world.prefix)
        relay = OutboxRelay(world.engine, outbox, RefusingOnce(world.broker))  # type: ignore[arg-type]
        await relay.claim()
        try:
            first = await world.commit(outbox, 2)
            with pytest.raises(ConnectionError):
                await relay.publish_committed()
            second = await world.commit(outbox, 2)
            await relay.publish_committed()
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 0
        finally:
            await relay.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 4)
        assert values == [message.to_bytes() for message in first + second]


async def test_a_change_of_one_statement_and_its_messages_commit_together_or_not_at_all(endpoints: Endpoints) -> None:
    async with outbox_world(endpoints) as world:
        async with world.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE public.marks (name TEXT PRIMARY KEY)"))
        insert = "INSERT INTO public.marks (name) VALUES ($1)"
        outbox = Outbox(world.table, world.prefix)
        relay = OutboxRelay(world.engine, outbox, world.broker)
        await relay.claim()
        try:
            sent = [step(i, session=world.prefix) for i in range(2)]
            async with world.engine.connect() as conn:
                await outbox.write_with(conn, insert, ("first",), [(STUDIO_TURNS, "s", message) for message in sent])
                assert not conn.in_transaction()
            # Committed on its own: another connection sees the row and both messages.
            async with world.engine.connect() as conn:
                assert (await conn.scalar(text("SELECT count(*) FROM public.marks"))) == 1
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 2
            # A statement that fails writes no message either.
            async with world.engine.connect() as conn:
                with pytest.raises(asyncpg.UniqueViolationError):
                    await outbox.write_with(conn, insert, ("first",), [(STUDIO_TURNS, "s", step(9))])
            async with world.engine.connect() as conn:
                assert (await conn.scalar(select(func.count()).select_from(world.table))) == 2
            # It commits on its own, so it refuses to join a transaction.
            async with world.engine.begin() as conn:
                with pytest.raises(RuntimeError, match="cannot join a transaction"):
                    await outbox.write_with(conn, insert, ("second",), [(STUDIO_TURNS, "s", step(10))])
            await relay.publish_committed()
        finally:
            await relay.stop()
        values = await _topic_values(endpoints.kafka, STUDIO_TURNS.full_name(world.prefix), 2)
        assert sorted(values) == sorted(message.to_bytes() for message in sent)
