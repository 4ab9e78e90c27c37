"""Wires the gateway: settings → engine, outbox, broker, projection consumers, relay, Redis feed, HTTP app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from assent.contracts import Message
from assent.db import create_engine, migrate
from assent.messaging import ensure_topics, make_broker, start_broker, subscribe
from assent.outbox import Outbox, OutboxRelay
from assent.telemetry import setup_telemetry
from assent.topics import PROPOSALS_APPLIED, PROPOSALS_PROPOSED, STUDIO_SESSIONS, STUDIO_TURNS, TOOL_RESULTS, Topic
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from . import api, handlers
from .adapters import tables
from .adapters.notify import EventFeed
from .adapters.owners import Owners
from .settings import GatewaySettings

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def create_app(settings: GatewaySettings) -> FastAPI:
    provider = setup_telemetry(settings.service_name, settings.otlp_endpoint)
    engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
    outbox = Outbox(tables.outbox, settings.topic_prefix)
    broker = make_broker(
        settings.kafka_bootstrap_servers,
        client_id=settings.service_name,
        idempotent=settings.kafka_idempotence,
        tracer_provider=provider,
    )
    prefix = settings.topic_prefix
    events = EventFeed(settings.redis_url, f"{prefix}assent:events")
    owners = Owners(settings.edits_url)
    deps = handlers.Deps(engine, outbox, settings, events)

    def bind(handler: Callable[..., Awaitable[None]]) -> Callable[[Message], Awaitable[None]]:
        async def handle(message: Message) -> None:
            await handler(message, deps)

        return handle

    routes: tuple[tuple[Topic, Callable[..., Awaitable[None]]], ...] = (
        (STUDIO_SESSIONS, handlers.on_session_event),
        (PROPOSALS_PROPOSED, handlers.on_proposed),
        (TOOL_RESULTS, handlers.on_tool_result),
        (PROPOSALS_APPLIED, handlers.on_outcome),
        (STUDIO_TURNS, handlers.on_step_ended),
    )
    for topic, handler in routes:
        subscribe(broker, topic, prefix=prefix, group_id=f"{prefix}gateway:{topic.name}", handler=bind(handler))
    relay = OutboxRelay(engine, outbox, broker, poll_seconds=settings.outbox_poll_seconds)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await migrate(engine, MIGRATIONS, tables.SCHEMA)
        await ensure_topics(settings.kafka_bootstrap_servers, prefix)
        await events.start()
        await start_broker(broker)
        relay.start()
        try:
            yield
        finally:
            await relay.stop()
            await broker.stop()
            await events.stop()
            await owners.close()
            await engine.dispose()

    app = FastAPI(
        title="Assent",
        version="0.1.0",
        description="AI agents propose changes; people decide them. The public HTTP API.",
        lifespan=lifespan,
    )
    api.install(app, deps, owners)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider)
    return app
