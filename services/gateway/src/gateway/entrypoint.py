"""Wires the gateway: projection handlers on their topics, the Redis event feed, the public HTTP API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from assent.service import ServiceRuntime
from assent.topics import PROPOSALS_APPLIED, PROPOSALS_PROPOSED, STUDIO_SESSIONS, STUDIO_TURNS, TOOL_RESULTS

from . import api, handlers
from .adapters import tables
from .adapters.notify import EventFeed
from .adapters.owners import Owners
from .settings import GatewaySettings

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def create_app(settings: GatewaySettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        outbox_table=tables.outbox,
        inbox_table=tables.inbox,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
    )
    events = EventFeed(settings.redis_url, f"{settings.topic_prefix}assent:events")
    owners = Owners(settings.edits_url)
    deps = handlers.Deps(runtime.engine, runtime.outbox, settings, events)
    runtime.subscribe(STUDIO_SESSIONS, lambda message: handlers.on_session_event(message, deps))
    runtime.subscribe(PROPOSALS_PROPOSED, lambda message: handlers.on_proposed(message, deps))
    runtime.subscribe(TOOL_RESULTS, lambda message: handlers.on_tool_result(message, deps))
    runtime.subscribe(PROPOSALS_APPLIED, lambda message: handlers.on_outcome(message, deps))
    runtime.subscribe(STUDIO_TURNS, lambda message: handlers.on_step_ended(message, deps))

    @asynccontextmanager
    async def feed_and_owners() -> AsyncIterator[None]:
        await events.start()
        try:
            yield
        finally:
            await events.stop()
            await owners.close()

    app = runtime.app(
        title="Assent",
        description="AI agents propose changes; people decide them. The public HTTP API.",
        extra=feed_and_owners,
    )
    api.install(app, deps, owners)
    return app
