"""Fixtures for the integration tier: real Kafka, PostgreSQL and Redis, and Assent's services as processes.

Where the servers come from, in order:
1. ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL`` and ``REDIS_URL``, when all three are set;
2. testcontainers, when ``ASSENT_SERVICE_IMAGES`` names a tag of the services' images (``make test-containers``):
   Kafka, PostgreSQL and Redis are containers of the images ``deploy/containers`` builds from Debian's packages,
   and the services containers of their own images (``assent_devstack.containers``);
3. otherwise the local devstack: Apache Kafka 3.9 from Maven Central jars, embedded PostgreSQL, Redis; one broker,
   or with ``KAFKA_BROKERS=3`` a cluster of three whose topics the services create replicated.

A Docker engine that merely answers changes nothing: the container run is asked for, never guessed.

Each stack of services gets its own topic prefix and its own database, so stacks never see each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy.engine import make_url

from assent.coach import CoachClient
from assent.kafka_security import KafkaSecurity, kafka_kwargs
from assent.service_auth import ServiceSigner
from assent_devstack.system import System, build_system
from tests.issuer import test_issuer

# pytest-xdist's workers are started with COLUMNS=80 and LINES=24; the CLI's consoles read COLUMNS once, when it
# is imported, so a test that gives one run of the CLI a width of its own (or none) would get 80 on a worker.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

TOKEN = "test-token"
OPERATOR = "operator@example.com"
STATIC_ORG = "org_static"
API_TOKENS = json.dumps({TOKEN: {"user": OPERATOR, "org": STATIC_ORG, "roles": ["admin"]}})
"""The static token of the tests: an admin of ``STATIC_ORG``. Worlds get tokens of their own organisation."""


@dataclass(frozen=True)
class Endpoints:
    kafka: str
    database_url: str
    redis_url: str


CONTAINERS = bool(os.environ.get("ASSENT_SERVICE_IMAGES"))
"""Whether this run is ``make test-containers``'s: the servers and the services in containers."""
INFRA_IMAGES = {"kafka": "assent/kafka:3.9.1", "postgres": "assent/postgres:18", "redis": "assent/redis:7"}
"""The servers' images (``deploy/containers/base-images.sh``); ``ASSENT_<NAME>_IMAGE`` names another."""
collect_ignore = [] if CONTAINERS else ["containers"]  # the images' own tests, where the images are


@contextlib.contextmanager
def servers_in_containers() -> Iterator[Endpoints]:
    """Kafka, PostgreSQL and Redis as testcontainers of the images :data:`INFRA_IMAGES` names."""
    from testcontainers.community.postgres import PostgresContainer
    from testcontainers.community.redis import RedisContainer
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    from assent_devstack.system import free_port

    image = {name: os.environ.get(f"ASSENT_{name.upper()}_IMAGE", default) for name, default in INFRA_IMAGES.items()}
    # The broker advertises the host's port, so that port is chosen before it starts.
    kafka_port = free_port()
    kafka = (
        DockerContainer(image["kafka"])
        .with_bind_ports(9092, kafka_port)
        .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{kafka_port}")
        .waiting_for(LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(120))
    )
    with (
        kafka,
        PostgresContainer(image["postgres"], driver="asyncpg") as postgres,
        RedisContainer(image["redis"]) as redis,
    ):
        yield Endpoints(
            f"127.0.0.1:{kafka_port}",
            postgres.get_connection_url(),
            f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(6379)}/0",
        )


CREATED_DATABASES: list[str] = []
"""The databases the suite made (:func:`create_database`)."""
TOPIC_PREFIXES: list[str] = []
"""The topic prefixes the suite named (:func:`fresh_prefix`)."""


def fresh_prefix(label: str) -> str:
    """A topic prefix of its own, ``<label><hex>.``; on servers the suite was given, its topics go when it ends."""
    prefix = f"{label}{uuid.uuid4().hex[:8]}."
    TOPIC_PREFIXES.append(prefix)
    return prefix


LONGEST_FIRST = (
    "test_devstack_stop",
    "test_postgres_restarts",
    "test_delivery",
    "test_kafka_cluster",
    "test_service_scaffold",
    "test_api_fuzz",
    "test_console",
    "test_webhooks",
    "test_policy_faults",
    "test_runtime",
    "test_auth",
)
"""The files that take longest (``--durations``), in that order. Where the suite is spread over workers a file at a
time (``make test``: ``--dist loadfile``), they are handed out first, so no worker is left with one of them at the
end while the others wait."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("dist", "no") == "no":
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    given = [os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")]
    if all(given):
        kafka, database_url, redis_url = given
        servers = Endpoints(kafka, database_url, redis_url)  # type: ignore[arg-type]
        try:
            yield servers
        finally:
            # Servers the suite was given outlive it: leave them as they were.
            asyncio.run(forget_what_the_suite_made(servers))
        return
    if CONTAINERS:
        with servers_in_containers() as servers:
            yield servers
        return
    from assent_devstack import start_all

    # KAFKA_BROKERS=3 (make test KAFKA_BROKERS=3): the whole suite on a cluster of three brokers, every service's
    # topics replicated (the ASSENT_TOPIC_* settings of the stack's env, which every service started inherits).
    brokers = int(os.environ.get("KAFKA_BROKERS") or 1)
    stack = start_all(tmp_path_factory.mktemp("devstack"), kafka_brokers=brokers)
    try:
        env = stack.env()
        os.environ.update({key: value for key, value in env.items() if key.startswith("ASSENT_TOPIC_")})
        yield Endpoints(env["KAFKA_BOOTSTRAP_SERVERS"], env["DATABASE_URL"], env["REDIS_URL"])
    finally:
        stack.stop()


@pytest.fixture(scope="session", autouse=True)
def tracer_provider() -> TracerProvider:
    """A real tracer in the test process, so the coach's tool calls start traces that the services continue."""
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    return provider


async def create_database(admin_url: str, name: str) -> str:
    url = make_url(admin_url)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
        CREATED_DATABASES.append(name)
    finally:
        await conn.close()
    return url.set(database=name).render_as_string(hide_password=False)


async def forget_what_the_suite_made(servers: Endpoints) -> None:
    """Drop the databases the suite made and delete the topics of the prefixes it named (a failure is a warning:
    the cleanup of shared servers, not what the tests check)."""
    url = make_url(servers.database_url)
    try:
        conn = await asyncpg.connect(
            host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
        )
        try:
            for name in CREATED_DATABASES:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
    except Exception as exc:
        warnings.warn(f"could not drop the suite's databases {CREATED_DATABASES}: {exc!r}", stacklevel=1)
    for prefix in TOPIC_PREFIXES:
        try:
            await drop_topics(servers.kafka, prefix)
        except Exception as exc:
            warnings.warn(f"could not delete the topics {prefix}*: {exc!r}", stacklevel=1)


async def drop_topics(kafka: str, prefix: str, security: KafkaSecurity | None = None) -> None:
    """Delete the topics named with ``prefix``: a broker that outlives the suite (``make up``) would otherwise keep
    every run's topics, and with them an open file per partition segment, until it runs out of files."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka, **kafka_kwargs(security))
    await admin.start()
    try:
        mine = [name for name in await admin.list_topics() if name.startswith(prefix)]
        if mine:
            await admin.delete_topics(mine)
    finally:
        await admin.close()


@dataclass
class Stack:
    """One running Assent (edits + gateway) with its own topics and database."""

    endpoints: Endpoints
    system: System
    prefix: str
    database_url: str

    @property
    def gateway_url(self) -> str:
        return self.system.gateway.url

    def http(self, timeout: float = 60.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.gateway_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout
        )

    def service_headers(self, owner: str = "edits", caller: str = "gateway") -> dict[str, str]:
        """A service credential for a direct call on ``owner``'s internal API, as ``caller`` would present it."""
        return ServiceSigner(caller, self.system.env["ASSENT_SERVICE_KEY"]).headers(owner)

    def coach(self) -> CoachClient:
        return CoachClient(self.endpoints.kafka, topic_prefix=self.prefix)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    async def records(
        self, topic: str, match: Callable[[ConsumerRecord[bytes, bytes]], bool] = lambda _: True
    ) -> list[ConsumerRecord[bytes, bytes]]:
        """Every record on ``topic`` (full name) so far that ``match`` accepts, read from the beginning."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.endpoints.kafka, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            producer_meta = AIOKafkaProducer(bootstrap_servers=self.endpoints.kafka)
            await producer_meta.start()
            try:
                partitions = [TopicPartition(topic, p) for p in sorted(await producer_meta.partitions_for(topic))]
            finally:
                await producer_meta.stop()
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            found: list[ConsumerRecord[bytes, bytes]] = []
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    found.extend(r for r in records if match(r))
            return found
        finally:
            await consumer.stop()


SECRETS: set[str] = {TOKEN}
"""Secrets the suite handed to the services (tokens, service keys): none may appear in their logs."""
LOG_DIRS: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def secrets_stay_out_of_logs() -> Iterator[None]:
    """After the whole suite, grep every service log it wrote for every secret it used."""
    yield
    secrets = SECRETS | set(test_issuer().minted)
    leaks = [
        f"{path}: {secret[:6]}..."
        for directory in LOG_DIRS
        for path in directory.rglob("*.log")
        for text in [path.read_text(errors="replace")]
        for secret in secrets
        if secret in text
    ]
    assert leaks == [], f"secrets in service logs: {leaks[:10]}"


@contextlib.asynccontextmanager
async def running_stack(
    endpoints: Endpoints, log_dir: Path, extra_env: dict[str, str] | None = None
) -> AsyncIterator[Stack]:
    name = uuid.uuid4().hex[:10]
    database_url = await create_database(endpoints.database_url, f"assent_{name}")
    system = build_system(
        kafka_bootstrap_servers=endpoints.kafka,
        database_url=database_url,
        redis_url=endpoints.redis_url,
        log_dir=log_dir,
        topic_prefix=f"t{name}.",
        api_tokens=API_TOKENS,
        # The trail: a log line per message and request, in its trace (tests/test_json_logs.py reads a round's).
        extra_env={**test_issuer().env(), "ASSENT_LOG_TRAIL": "true", **(extra_env or {})},
    )
    SECRETS.add(system.env["ASSENT_SERVICE_KEY"])
    SECRETS.add(system.env["ASSENT_CREDENTIALS_KEY"])
    if system.env["ASSENT_HISTORY_SIGNING_KEY"]:
        SECRETS.add(system.env["ASSENT_HISTORY_SIGNING_KEY"])
    LOG_DIRS.append(log_dir)
    await asyncio.to_thread(system.start)
    try:
        yield Stack(endpoints, system, f"t{name}.", database_url)
    finally:
        await asyncio.to_thread(system.stop)
        try:
            await drop_topics(endpoints.kafka, f"t{name}.", KafkaSecurity.from_env(system.env))
        except Exception as exc:  # the cleanup of a shared broker, not what the tests check
            warnings.warn(f"could not delete the topics t{name}.*: {exc!r}", stacklevel=1)


@pytest.fixture(scope="session")
async def stack(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with running_stack(endpoints, tmp_path_factory.mktemp("stack")) as running:
        yield running


@dataclass(frozen=True)
class World:
    """A fresh organisation with a source guild, two live member agents and an agent of another guild."""

    org_id: str
    guild_id: str
    agent_id: str
    other_agent_id: str
    outsider_id: str


def as_admin_of(http: httpx.AsyncClient, org_id: str, user: str = OPERATOR, roles: tuple[str, ...] = ("admin",)) -> str:
    """Make ``http`` act for ``user`` with ``roles`` in ``org_id`` (an access token of the test issuer)."""
    token = test_issuer().mint(user, org_id, roles)
    http.headers["Authorization"] = f"Bearer {token}"
    return token


async def new_world(http: httpx.AsyncClient, memory: str = "Prefer short answers.\n") -> World:
    """A fresh organisation; ``http`` acts as its admin from now on (organisations are walls)."""
    n = uuid.uuid4().hex[:8]
    world = World(f"org_{n}", f"guild_{n}", f"agent_{n}", f"agent2_{n}", f"outsider_{n}")
    as_admin_of(http, world.org_id)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("/api/workspace/orgs", {"org_id": world.org_id, "name": "Acme"}),
        ("/api/workspace/guilds", {"guild_id": world.guild_id, "org_id": world.org_id, "name": "Support"}),
        ("/api/workspace/guilds", {"guild_id": f"{world.guild_id}_b", "org_id": world.org_id, "name": "Sales"}),
        (
            "/api/workspace/agents",
            {
                "agent_id": world.agent_id,
                "org_id": world.org_id,
                "guild_id": world.guild_id,
                "name": "Ada",
                "memory": memory,
            },
        ),
        (
            "/api/workspace/agents",
            {
                "agent_id": world.other_agent_id,
                "org_id": world.org_id,
                "guild_id": world.guild_id,
                "name": "Bo",
                "memory": "Greet by name.\n",
            },
        ),
        (
            "/api/workspace/agents",
            {
                "agent_id": world.outsider_id,
                "org_id": world.org_id,
                "guild_id": f"{world.guild_id}_b",
                "name": "Cy",
                "memory": "Sell.\n",
            },
        ),
    ]
    for path, body in calls:
        response = await http.post(path, json=body)
        assert response.status_code == 201, response.text
    return world


async def wait_for(probe: Callable[[], Any], *, timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Poll ``probe`` (sync or async) until it returns something truthy; fail after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
