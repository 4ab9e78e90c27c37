"""Client round trips that decide whether a server is up: Kafka metadata, PostgreSQL SELECT 1, Redis PING."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

Kind = Literal["kafka", "postgres", "redis"]

T = TypeVar("T")


def port_open(port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, even when the caller is inside an event loop."""

    async def main() -> T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def probe(kind: Kind, endpoint: str, timeout: float = 5.0, **client_kwargs: Any) -> bool:
    """True when the server of `kind` at `endpoint` answers within `timeout` seconds; never raises.

    `client_kwargs` go to Kafka's admin client (e.g. a SASL listener's credentials).
    """
    # Kafka's endpoint may be a bootstrap list (a cluster's brokers, comma-separated): one answering is enough.
    addresses = endpoint.split(",") if kind == "kafka" else [endpoint]
    ports = [urlsplit(a if "://" in a else f"tcp://{a.strip()}").port for a in addresses]
    # A plain TCP connect first keeps the client libraries from logging connection errors while a
    # server is still booting.
    if not any(port is not None and port_open(port, timeout) for port in ports):
        return False
    checks: dict[str, Callable[[str, float], Awaitable[bool]]] = {
        "kafka": functools.partial(_kafka, **client_kwargs),
        "postgres": _postgres,
        "redis": _redis,
    }
    check = checks[kind]
    try:
        return run_async(lambda: asyncio.wait_for(check(endpoint, timeout), timeout))
    except Exception:
        return False


async def _kafka(bootstrap: str, timeout: float, **client_kwargs: Any) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), **client_kwargs)
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
        return bool(cluster.get("brokers"))
    finally:
        await admin.close()


async def _postgres(url: str, timeout: float) -> bool:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(url), timeout=timeout)
    try:
        return bool(await conn.fetchval("SELECT 1") == 1)
    finally:
        await conn.close()


async def _redis(url: str, timeout: float) -> bool:
    from redis.asyncio import Redis

    client = Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(await client.ping())
    finally:
        await client.aclose()


def asyncpg_dsn(url: str) -> str:
    """The SQLAlchemy-style `postgresql+asyncpg://` URL in the form asyncpg itself accepts."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)
