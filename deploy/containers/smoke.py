"""Smoke check of the container images: each started by testcontainers, each used the way the suite uses it.

Run by hand on a machine with the engine up and the images built:

    export "$(deploy/containers/engine.sh start)"
    deploy/containers/base-images.sh
    uv run python deploy/containers/smoke.py

It documents the images' contracts:

  - assent/postgres:18 works with `PostgresContainer(image, driver="asyncpg")`: the container makes the
    superuser and database from POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB, answers testcontainers' readiness
    check (`psql` inside it), takes password logins over TCP, lets that user create databases, allows 200
    connections, and runs as the postgres user, not root.
  - assent/redis:7 works with `RedisContainer(image)`, with and without a password (with one, testcontainers
    replaces the command with `redis-server --requirepass ...`), and runs as the redis user.
  - assent/kafka:3.9.1 is started as a plain container with the host port bound to 9092 and
    KAFKA_ADVERTISED_LISTENERS naming it; it is ready when it logs "Kafka Server started". Topics are created
    explicitly (no auto-creation); an idempotent producer's record is read back by a consumer group, and a
    transactional producer's committed record is read by a read_committed consumer.

Ryuk (testcontainers' reaper) is disabled: its image can be neither pulled nor built here. Every container is
removed when its `with` block ends. Exits non-zero, with the reason, at the first check that fails.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from testcontainers.community.postgres import PostgresContainer
from testcontainers.community.redis import RedisContainer
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

POSTGRES_IMAGE = "assent/postgres:18"
REDIS_IMAGE = "assent/redis:7"
KAFKA_IMAGE = "assent/kafka:3.9.1"


@contextmanager
def step(name: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    print(f"ok  {name} ({time.monotonic() - started:.1f} s)", flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def uid_of_pid1(container: DockerContainer) -> str:
    return container.exec(["sh", "-c", "awk '/^Uid:/ {print $2}' /proc/1/status"]).output.decode().strip()


async def check_postgres(pg: PostgresContainer) -> None:
    url = pg.get_connection_url(driver=None)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute('CREATE DATABASE "smoke_check"')
        max_connections = await conn.fetchval("SHOW max_connections")
        check(max_connections == "200", f"max_connections is {max_connections}, not 200")
        listen = await conn.fetchval("SHOW listen_addresses")
        check(listen == "*", f"listen_addresses is {listen!r}, not '*'")
    finally:
        await conn.close()
    other = await asyncpg.connect(url.rsplit("/", 1)[0] + "/smoke_check")
    try:
        check(await other.fetchval("SELECT current_database()") == "smoke_check", "the new database is not reached")
    finally:
        await other.close()
    try:
        await asyncpg.connect(url.replace(f":{pg.password}@", ":wrong-password@"))
    except asyncpg.InvalidPasswordError:
        pass
    else:
        raise SystemExit("FAILED: PostgreSQL took a wrong password over TCP")


async def check_kafka(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("smoke", num_partitions=1, replication_factor=1)])
        check("smoke" in await admin.list_topics(), "the topic was not created")
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait("smoke", b"idempotent", key=b"k")
    finally:
        await producer.stop()

    transactional = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="smoke-tx")
    await transactional.start()
    try:
        async with transactional.transaction():
            await transactional.send("smoke", b"transactional", key=b"k")
    finally:
        await transactional.stop()

    consumer = AIOKafkaConsumer(
        "smoke",
        bootstrap_servers=bootstrap,
        group_id="smoke-group",
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        async with asyncio.timeout(30):
            while len(values) < 2:
                batch = await consumer.getmany(timeout_ms=1000)
                values += [record.value for records in batch.values() for record in records if record.value]
        check(values == [b"idempotent", b"transactional"], f"read back {values}")
        await consumer.commit()
    finally:
        await consumer.stop()


def main() -> None:
    if not os.environ.get("DOCKER_HOST"):
        raise SystemExit('DOCKER_HOST is not set: export "$(deploy/containers/engine.sh start)" first')
    started = time.monotonic()

    with step("PostgreSQL: started, readiness check passed"):
        pg = PostgresContainer(POSTGRES_IMAGE, driver="asyncpg").start()
    try:
        with step("PostgreSQL: asyncpg logs in, creates a database and reaches it; a wrong password is refused"):
            asyncio.run(check_postgres(pg))
        check(uid_of_pid1(pg) != "0", "PostgreSQL runs as root")
    finally:
        pg.stop()

    with step("Redis: started, PING answered, runs as non-root"):
        with RedisContainer(REDIS_IMAGE) as redis:
            check(redis.get_client().ping() is True, "Redis did not answer PING")
            check(uid_of_pid1(redis) != "0", "Redis runs as root")
    with step("Redis with a password: started, PING answered with it"):
        with RedisContainer(REDIS_IMAGE, password="smoke-secret") as redis:
            check(redis.get_client().ping() is True, "Redis did not answer PING")

    port = free_port()
    kafka = (
        DockerContainer(KAFKA_IMAGE)
        .with_bind_ports(9092, port)
        .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
        .waiting_for(LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(90))
    )
    with step("Kafka: formatted and started"):
        kafka.start()
    try:
        check(uid_of_pid1(kafka) != "0", "Kafka runs as root")
        with step("Kafka: topic created; idempotent and transactional records read back by a consumer group"):
            asyncio.run(check_kafka(f"127.0.0.1:{port}"))
    finally:
        kafka.stop()

    print(f"all checks passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
