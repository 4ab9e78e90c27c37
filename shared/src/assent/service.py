"""What every Assent service process is made of: telemetry, its engine and outbox, a broker with its
subscriptions, the outbox relay, and one HTTP app whose lifespan starts and stops them all.

A service's ``entrypoint.py`` builds a :class:`ServiceRuntime`, subscribes its handlers, adds its routes to
:meth:`ServiceRuntime.app`, and its ``__main__`` calls :func:`serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from sqlalchemy import Table, text

from . import inbox
from .contracts import Message
from .db import create_engine, migrate
from .messaging import ensure_topics, make_broker, start_broker, subscribe
from .outbox import Outbox, OutboxRelay
from .settings import ServiceSettings
from .telemetry import setup_telemetry
from .topics import Topic

log = logging.getLogger(__name__)


class ServiceRuntime:
    """The parts of one service process. Nothing connects until the app's lifespan starts."""

    def __init__(
        self, settings: ServiceSettings, *, outbox_table: Table, inbox_table: Table, migrations: Path, schema: str
    ) -> None:
        self.settings = settings
        self.provider = setup_telemetry(settings.service_name, settings.otlp_endpoint)
        self.engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
        self.outbox = Outbox(outbox_table, settings.topic_prefix)
        self.broker = make_broker(
            settings.kafka_bootstrap_servers,
            client_id=settings.service_name,
            idempotent=settings.kafka_idempotence,
            tracer_provider=self.provider,
        )
        self.relay = OutboxRelay(self.engine, self.outbox, self.broker, poll_seconds=settings.outbox_poll_seconds)
        self.inbox_table = inbox_table
        self.migrations = migrations
        self.schema = schema

    def subscribe(self, topic: Topic, handler: Callable[[Any], Awaitable[None]]) -> None:
        """Consume ``topic`` in this service's own consumer group for it (see :func:`assent.messaging.subscribe`)."""
        prefix = self.settings.topic_prefix

        async def handle(message: Message) -> None:
            await handler(message)

        group_id = f"{prefix}{self.settings.service_name}:{topic.name}"
        subscribe(self.broker, topic, prefix=prefix, group_id=group_id, handler=handle)

    def app(
        self,
        *,
        title: str,
        description: str = "",
        include_health_in_schema: bool = False,
        extra: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    ) -> FastAPI:
        """The process's HTTP app: migrations, topics, consumers and relay start with it and stop with it.

        ``extra`` adds the service's own resources (opened after the database and topics, before consumers).
        ``/livez`` answers while the process runs (the liveness probe); ``/readyz`` answers 200 only while
        the database and the broker answer (the readiness probe), else 503 with which check failed.
        """

        @asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[None]:
            await migrate(self.engine, self.migrations, self.schema)
            await ensure_topics(self.settings.kafka_bootstrap_servers, self.settings.topic_prefix)
            async with extra() if extra is not None else _nothing():
                await start_broker(self.broker)
                self.relay.start()
                pruner = asyncio.create_task(self._prune_inbox(), name="inbox-pruner")
                try:
                    yield
                finally:
                    pruner.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pruner
                    await self.relay.stop()
                    await self.broker.stop()
            await self.engine.dispose()

        app = FastAPI(title=title, description=description, version="0.1.0", lifespan=lifespan)

        @app.get("/livez", include_in_schema=include_health_in_schema)
        async def livez() -> dict[str, str]:
            return {"service": self.settings.service_name, "status": "live"}

        @app.get("/readyz", include_in_schema=include_health_in_schema)
        async def readyz() -> JSONResponse:
            checks = await self.readiness()
            ready = all(ok for ok in checks.values())
            body = {
                "service": self.settings.service_name,
                "status": "ready" if ready else "unready",
                "checks": {k: "ok" if v else "down" for k, v in checks.items()},
            }
            return JSONResponse(body, status_code=200 if ready else 503)

        FastAPIInstrumentor.instrument_app(app, tracer_provider=self.provider)
        return app

    async def readiness(self, timeout: float = 2.0) -> dict[str, bool]:
        """Whether the database and the broker answer within ``timeout`` seconds each."""

        async def database() -> bool:
            try:
                async with asyncio.timeout(timeout):
                    async with self.engine.connect() as conn:
                        await conn.execute(text("SELECT 1"))
                return True
            except Exception:
                return False

        async def broker() -> bool:
            try:
                return bool(await self.broker.ping(timeout=timeout))
            except Exception:
                return False

        db_ok, kafka_ok = await asyncio.gather(database(), broker())
        return {"database": db_ok, "kafka": kafka_ok}

    async def _prune_inbox(self) -> None:
        retention = timedelta(days=self.settings.inbox_retention_days)
        while True:
            try:
                pruned = await inbox.prune(self.engine, self.inbox_table, retention)
                if pruned:
                    log.info("forgot %d inbox entries older than %s", pruned, retention)
            except Exception:
                log.warning("could not prune the inbox; trying again later", exc_info=True)
            await asyncio.sleep(3600)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def serve(app: FastAPI, settings: ServiceSettings) -> None:
    """Run ``app`` until SIGTERM or Ctrl-C, logging as ``settings.log_level``."""
    logging.basicConfig(
        level=settings.log_level,
        format=f"%(asctime)s {settings.service_name} %(levelname)s %(name)s: %(message)s",
    )
    uvicorn.run(
        app, host=settings.http_host, port=settings.http_port, log_level="warning", loop="uvloop", http="httptools"
    )
