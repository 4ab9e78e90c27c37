"""Wires the edits service: settings → engine, outbox, broker, subscribers, relay, internal HTTP app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from assent.contracts import DecisionMade, Message, SessionClosed, SessionOpened, ToolCall
from assent.db import create_engine, migrate
from assent.messaging import ensure_topics, make_broker, start_broker, subscribe
from assent.outbox import Outbox, OutboxRelay
from assent.telemetry import setup_telemetry
from assent.topics import EDITS_TOOL_CALLS, PROPOSALS_DECIDED, STUDIO_SESSIONS
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from . import api, handlers
from .adapters import tables
from .settings import EditsSettings

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def create_app(settings: EditsSettings) -> FastAPI:
    provider = setup_telemetry(settings.service_name, settings.otlp_endpoint)
    engine = create_engine(settings.database_url, pool_size=settings.db_pool_size)
    outbox = Outbox(tables.outbox, settings.topic_prefix)
    broker = make_broker(
        settings.kafka_bootstrap_servers,
        client_id=settings.service_name,
        idempotent=settings.kafka_idempotence,
        tracer_provider=provider,
    )
    deps = handlers.Deps(engine, outbox, settings)
    prefix = settings.topic_prefix

    async def sessions(message: Message) -> None:
        assert isinstance(message, SessionOpened | SessionClosed)
        await handlers.on_session_event(message, deps)

    async def tool_calls(message: Message) -> None:
        assert isinstance(message, ToolCall)
        await handlers.on_tool_call(message, deps)

    async def decisions(message: Message) -> None:
        assert isinstance(message, DecisionMade)
        await handlers.on_decision(message, deps)

    for topic, handler in (
        (STUDIO_SESSIONS, sessions),
        (EDITS_TOOL_CALLS, tool_calls),
        (PROPOSALS_DECIDED, decisions),
    ):
        subscribe(broker, topic, prefix=prefix, group_id=f"{prefix}edits:{topic.name}", handler=handler)
    relay = OutboxRelay(engine, outbox, broker, poll_seconds=settings.outbox_poll_seconds)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await migrate(engine, MIGRATIONS, tables.SCHEMA)
        await ensure_topics(settings.kafka_bootstrap_servers, prefix)
        await start_broker(broker)
        relay.start()
        try:
            yield
        finally:
            await relay.stop()
            await broker.stop()
            await engine.dispose()

    app = FastAPI(title="Assent edits service (internal)", version="0.1.0", lifespan=lifespan)
    api.install(app, deps)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider)
    return app
