"""Wires the edits service: its handlers on its topics, its internal HTTP API, one runtime around both."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from assent.service import ServiceRuntime
from assent.topics import EDITS_TOOL_CALLS, PROPOSALS_DECIDED, STUDIO_SESSIONS

from . import api, handlers
from .adapters import tables
from .settings import EditsSettings

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def create_app(settings: EditsSettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        outbox_table=tables.outbox,
        inbox_table=tables.inbox,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
    )
    deps = handlers.Deps(runtime.engine, runtime.outbox, settings)
    runtime.subscribe(STUDIO_SESSIONS, lambda message: handlers.on_session_event(message, deps))
    runtime.subscribe(EDITS_TOOL_CALLS, lambda message: handlers.on_tool_call(message, deps))
    runtime.subscribe(PROPOSALS_DECIDED, lambda message: handlers.on_decision(message, deps))
    app = runtime.app(title="Assent edits service (internal)")
    api.install(app, deps)
    return app
