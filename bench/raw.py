"""The raw measurements the approval round is compared with: what Kafka, PostgreSQL and the legs' unavoidable work
cost with raw aiokafka and asyncpg, and nothing else.

- :func:`kafka_round_trips`: a produce → consume round trip in one process (acks=all, idempotent, one partition).
- :func:`kafka_hops_between_processes`: half of a round trip through an echo in another process.
- :func:`pg_commits`: a commit of one row plus one outbox row.
- :func:`raw_legs`: each leg done by hand. Two processes stand in for the gateway (this one) and an owner (another
  process, :func:`owner`), each with its own producer, consumer and database connection, and make the hops and the
  transactions the design asks of a leg, one statement per round trip: no envelope, validation, kind, telemetry
  or pool.
  - propose: this process sends the tool call; the owner claims it in its inbox, reads the target under lock,
    writes the proposal with its outbox row and commits (``BEGIN``, claim, read, write, ``COMMIT``), then sends
    the proposal; this process records the request, claim and insert in one statement.
  - apply: this process writes the decision with its outbox row in one statement and sends it; the owner applies
    it as above; this process claims the outcome and resolves the request (``BEGIN``, claim, update, ``COMMIT``).
  A leg is timed from its first send (propose) or the decision's statement (apply) to the last commit. The
  system's legs do this and more: every message is an envelope parsed and checked, a transaction holds the
  session's lock, the owner's kind decides, the outbox relay publishes after commit, and the gateway tells the
  client. A system leg over its raw leg is what the framework and the domain add to the unavoidable work.

The other process's roles run as ``python bench/raw.py echo|owner ARGS...``.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg
import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

WARM_UP = 300  # a freshly started broker's JVM is slow until its hot paths are compiled
BODY = b"x" * 600
"""A message about the size of the round's."""


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


@asynccontextmanager
async def clients(bootstrap: str, inbound: str) -> AsyncIterator[tuple[AIOKafkaProducer, AIOKafkaConsumer]]:
    """A producer as the services' (acks=all, idempotent, no linger), and a consumer of ``inbound`` from its end."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
    await producer.start()
    try:
        await consumer.start()
        try:
            tp = TopicPartition(inbound, 0)
            consumer.assign([tp])
            await consumer.seek_to_end(tp)
            await consumer.position(tp)
            yield producer, consumer
        finally:
            await consumer.stop()
    finally:
        await producer.stop()


@asynccontextmanager
async def other_process(*args: str) -> AsyncIterator[None]:
    """This module's role ``args`` (:func:`main`) in another process, ready when the block starts."""
    process = await asyncio.create_subprocess_exec(sys.executable, __file__, *args, stdout=asyncio.subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert (await process.stdout.readline()).strip() == b"ready"
        yield
        await process.wait()  # the block has sent it its stop
    finally:
        if process.returncode is None:
            process.kill()


async def kafka_round_trips(bootstrap: str, n: int) -> list[float]:
    async with scratch_topics(bootstrap, 1) as (topic,), clients(bootstrap, topic) as (producer, consumer):
        samples = []
        for i in range(n + WARM_UP):
            start = time.perf_counter()
            await producer.send_and_wait(topic, BODY, key=b"k")
            await consumer.getone()
            if i >= WARM_UP:
                samples.append(time.perf_counter() - start)
        return samples


async def kafka_hops_between_processes(bootstrap: str, n: int, idle: float) -> list[float]:
    """Half of a produce → consume → produce → consume round trip through an echo in another process: one hop
    between two processes, as each of the system's hops is (the raw round trip stays in one process), ``idle``
    seconds after the last (on a virtual machine, waking a process that has gone idle costs more the longer it
    slept)."""
    async with (
        scratch_topics(bootstrap, 2) as (there, back),
        clients(bootstrap, back) as (producer, consumer),
        other_process("echo", bootstrap, there, back),
    ):
        samples = []
        for i in range(n + WARM_UP):
            start = time.perf_counter()
            await producer.send(there, BODY, key=b"k")
            await consumer.getone()
            if i >= WARM_UP:
                samples.append((time.perf_counter() - start) / 2)
            await asyncio.sleep(idle)  # as between a round's hops: the other process has gone idle
        await producer.send_and_wait(there, b"stop", key=b"k")
        return samples


async def pg_commits(dsn: str, n: int) -> list[float]:
    """``n`` commits of one row and one outbox row; ``dsn`` is a plain PostgreSQL URL."""
    conn = await asyncpg.connect(dsn)
    samples = []
    try:
        await conn.execute(
            "CREATE TEMP TABLE row_ (id uuid primary key, body text);"
            "CREATE TEMP TABLE outbox_ (id bigserial primary key, payload bytea, headers jsonb)"
        )
        for i in range(n + 20):
            start = time.perf_counter()
            async with conn.transaction():
                await conn.execute("INSERT INTO row_ VALUES ($1, $2)", uuid.uuid4(), "x" * 200)
                await conn.execute("INSERT INTO outbox_ (payload, headers) VALUES ($1, '{}')", BODY)
            if i >= 20:
                samples.append(time.perf_counter() - start)
    finally:
        await conn.close()
    return samples


_TABLES = """
CREATE TABLE IF NOT EXISTS raw_inbox (message_id uuid PRIMARY KEY);
CREATE TABLE IF NOT EXISTS raw_outbox (id bigserial PRIMARY KEY, topic text, payload bytea);
CREATE TABLE IF NOT EXISTS raw_target (id text PRIMARY KEY, version integer, body text);
CREATE TABLE IF NOT EXISTS raw_request (id uuid PRIMARY KEY, status text, body text);
INSERT INTO raw_target VALUES ('t', 0, '') ON CONFLICT DO NOTHING;
"""

_CLAIM = "INSERT INTO raw_inbox VALUES ($1) ON CONFLICT DO NOTHING RETURNING message_id"


async def raw_legs(bootstrap: str, dsn: str, n: int, idle: float = 0.001) -> dict[str, list[float]]:
    """``n`` samples of each raw leg, in seconds (``propose``, ``apply``), taken in turn, ``idle`` seconds apart
    (as between a round's legs: the other process has gone idle). ``dsn`` is a plain PostgreSQL URL; the tables
    are made and dropped in its database."""
    conn = await asyncpg.connect(dsn)
    await conn.execute(_TABLES)
    try:
        async with (
            scratch_topics(bootstrap, 2) as (there, back),
            clients(bootstrap, back) as (producer, consumer),
            other_process("owner", bootstrap, dsn, there, back),
        ):
            requests: list[uuid.UUID] = []

            async def propose() -> None:
                await producer.send(there, uuid.uuid4().bytes + BODY, key=b"k")
                record = await consumer.getone()
                requests.append(uuid.UUID(bytes=record.value[:16]))
                await conn.execute(
                    f"WITH claimed AS ({_CLAIM}) INSERT INTO raw_request SELECT message_id, 'pending', $2 FROM claimed",
                    requests[-1],
                    "x" * 200,
                )

            async def apply() -> None:
                await conn.execute(
                    "WITH d AS (UPDATE raw_request SET body = $1 WHERE id = $2)"
                    " INSERT INTO raw_outbox (topic, payload) VALUES ($3, $4)",
                    "decided",
                    requests[-1],
                    there,
                    BODY,
                )
                await producer.send(there, uuid.uuid4().bytes + BODY, key=b"k")
                record = await consumer.getone()
                async with conn.transaction():
                    await conn.fetchval(_CLAIM, uuid.UUID(bytes=record.value[:16]))
                    await conn.execute("UPDATE raw_request SET status = 'applied' WHERE id = $1", requests[-1])

            legs: dict[str, Callable[[], Awaitable[None]]] = {"propose": propose, "apply": apply}
            samples: dict[str, list[float]] = {leg: [] for leg in legs}
            for i in range(n + WARM_UP // 3):
                for leg, run in legs.items():
                    start = time.perf_counter()
                    await run()
                    if i >= WARM_UP // 3:
                        samples[leg].append(time.perf_counter() - start)
                    await asyncio.sleep(idle)
            await producer.send_and_wait(there, b"stop", key=b"k")
            return samples
    finally:
        await conn.execute("DROP TABLE raw_inbox, raw_outbox, raw_target, raw_request")
        await conn.close()


# --- the other process's roles -------------------------------------------------------------------------


async def echo(bootstrap: str, inbound: str, outbound: str) -> None:
    """Send each message of ``inbound`` on to ``outbound`` until ``stop``."""
    async with clients(bootstrap, inbound) as (producer, consumer):
        print("ready", flush=True)
        while (record := await consumer.getone()).value != b"stop":
            await producer.send_and_wait(outbound, record.value, key=b"k")


async def owner(bootstrap: str, dsn: str, inbound: str, outbound: str) -> None:
    """The owner of the raw legs: each message of ``inbound`` claimed, applied under lock with its outbox row and
    committed, then answered on ``outbound``, until ``stop``."""
    conn = await asyncpg.connect(dsn)
    try:
        async with clients(bootstrap, inbound) as (producer, consumer):
            print("ready", flush=True)
            while (record := await consumer.getone()).value != b"stop":
                async with conn.transaction():
                    if await conn.fetchval(_CLAIM, uuid.UUID(bytes=record.value[:16])) is None:
                        continue
                    version = await conn.fetchval("SELECT version FROM raw_target WHERE id = 't' FOR UPDATE")
                    await conn.execute(
                        "WITH w AS (UPDATE raw_target SET version = $1, body = $2 WHERE id = 't')"
                        " INSERT INTO raw_outbox (topic, payload) VALUES ($3, $4)",
                        version + 1,
                        "x" * 200,
                        outbound,
                        record.value,
                    )
                await producer.send(outbound, uuid.uuid4().bytes + record.value[16:], key=b"k")
    finally:
        await conn.close()


if __name__ == "__main__":
    role, *arguments = sys.argv[1:]
    uvloop.run({"echo": echo, "owner": owner}[role](*arguments))
