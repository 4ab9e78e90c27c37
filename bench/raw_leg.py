"""The approval round's two legs done by hand with raw aiokafka and asyncpg: what a leg costs with no framework.

Two processes stand in for the gateway (this one) and an owner (a subprocess), each with its own producer, consumer
and database connection, and make the hops and the transactions the design asks of a leg, with one statement per
round trip and nothing else: no envelope, no validation, no kind, no telemetry, no pool.

- propose: this process sends the tool call; the owner claims it in its inbox, reads the target under lock, writes
  the proposal with its outbox row and commits (``BEGIN``, claim, read, write, ``COMMIT``), then sends the proposal;
  this process records the request, claim and insert in one statement (an implicit transaction).
- apply: this process writes the decision with its outbox row in one statement and sends it; the owner applies it
  as above; this process claims the outcome and resolves the request (``BEGIN``, claim, update, ``COMMIT``).

The legs are timed here from the first send (propose) or the decision's statement (apply) until the last commit.
The system's legs do this and more: every message is an envelope parsed and checked, a transaction holds the
session's lock, the owner's kind decides, the outbox relay publishes after commit, and the gateway tells the
client. The raw legs measure how far the framework and the domain are from the unavoidable work, and how close
that work alone comes to the leg floor (Kafka round trips and commits measured in one process, back to back).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

_TABLES = """
CREATE TABLE IF NOT EXISTS raw_inbox (message_id uuid PRIMARY KEY);
CREATE TABLE IF NOT EXISTS raw_outbox (id bigserial PRIMARY KEY, topic text, payload bytea);
CREATE TABLE IF NOT EXISTS raw_target (id text PRIMARY KEY, version integer, body text);
CREATE TABLE IF NOT EXISTS raw_request (id uuid PRIMARY KEY, status text, body text);
INSERT INTO raw_target VALUES ('t', 0, '') ON CONFLICT DO NOTHING;
"""

_OWNER = """
import asyncio, sys, uuid, uvloop, asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

async def owner(bootstrap, dsn, inbound, outbound):
    conn = await asyncpg.connect(dsn)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(inbound, 0)
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    await consumer.position(tp)
    print("ready", flush=True)
    while True:
        record = await consumer.getone()
        if record.value == b"stop":
            break
        message_id = uuid.UUID(bytes=record.value[:16])
        async with conn.transaction():
            claimed = await conn.fetchval(
                "INSERT INTO raw_inbox VALUES ($1) ON CONFLICT DO NOTHING RETURNING message_id", message_id
            )
            if claimed is None:
                continue
            version = await conn.fetchval("SELECT version FROM raw_target WHERE id = 't' FOR UPDATE")
            await conn.execute(
                "WITH w AS (UPDATE raw_target SET version = $1, body = $2 WHERE id = 't')"
                " INSERT INTO raw_outbox (topic, payload) VALUES ($3, $4)",
                version + 1, "x" * 200, outbound, record.value,
            )
        await producer.send(outbound, uuid.uuid4().bytes + record.value[16:], key=b"k")
    await consumer.stop()
    await producer.stop()
    await conn.close()

uvloop.run(owner(*sys.argv[1:]))
"""

WARM_UP = 100


@asynccontextmanager
async def scratch_topics(bootstrap: str, n: int) -> AsyncIterator[list[str]]:
    """``n`` new topics of one partition each, deleted when the block ends."""
    names = [f"bench.raw.{uuid.uuid4().hex[:8]}" for _ in range(n)]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1) for name in names])
        try:
            yield names
        finally:
            await admin.delete_topics(names)
    finally:
        await admin.close()


async def raw_legs(bootstrap: str, dsn: str, n: int, idle: float = 0.001) -> dict[str, list[float]]:
    """``n`` samples of each raw leg, in seconds (``propose``, ``apply``), taken in turn, ``idle`` seconds apart
    (as between a round's legs: the other process has gone idle). ``dsn`` is a plain PostgreSQL URL."""
    async with scratch_topics(bootstrap, 2) as (there, back):
        return await _raw_legs(bootstrap, dsn, n, idle, there, back)


async def _raw_legs(bootstrap: str, dsn: str, n: int, idle: float, there: str, back: str) -> dict[str, list[float]]:
    conn = await asyncpg.connect(dsn)
    await conn.execute(_TABLES)
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _OWNER, bootstrap, dsn, there, back, stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    assert (await owner.stdout.readline()).strip() == b"ready"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(back, 0)
    consumer.assign([tp])
    await consumer.seek_to_end(tp)
    await consumer.position(tp)
    body = b"x" * 600
    samples: dict[str, list[float]] = {"propose": [], "apply": []}
    requests: list[uuid.UUID] = []

    async def propose() -> float:
        start = time.perf_counter()
        await producer.send(there, uuid.uuid4().bytes + body, key=b"k")
        record = await consumer.getone()
        requests.append(uuid.UUID(bytes=record.value[:16]))
        await conn.execute(
            "WITH claimed AS (INSERT INTO raw_inbox VALUES ($1) ON CONFLICT DO NOTHING RETURNING message_id)"
            " INSERT INTO raw_request SELECT message_id, 'pending', $2 FROM claimed",
            requests[-1],
            "x" * 200,
        )
        return time.perf_counter() - start

    async def apply() -> float:
        start = time.perf_counter()
        await conn.execute(
            "WITH d AS (UPDATE raw_request SET body = $1 WHERE id = $2)"
            " INSERT INTO raw_outbox (topic, payload) VALUES ($3, $4)",
            "decided",
            requests[-1],
            there,
            body,
        )
        await producer.send(there, uuid.uuid4().bytes + body, key=b"k")
        record = await consumer.getone()
        async with conn.transaction():
            await conn.fetchval(
                "INSERT INTO raw_inbox VALUES ($1) ON CONFLICT DO NOTHING RETURNING message_id",
                uuid.UUID(bytes=record.value[:16]),
            )
            await conn.execute("UPDATE raw_request SET status = 'applied' WHERE id = $1", requests[-1])
        return time.perf_counter() - start

    try:
        for i in range(n + WARM_UP):
            for leg, run in (("propose", propose), ("apply", apply)):
                took = await run()
                if i >= WARM_UP:
                    samples[leg].append(took)
                await asyncio.sleep(idle)
        await producer.send_and_wait(there, b"stop", key=b"k")
        await owner.wait()
    finally:
        if owner.returncode is None:
            owner.kill()
        await consumer.stop()
        await producer.stop()
        await conn.execute("DROP TABLE raw_inbox, raw_outbox, raw_target, raw_request")
        await conn.close()
    return samples
