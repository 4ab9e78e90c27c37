"""Wires the routines service: the routine kind on the shared runtime, its read copy of the workspace, its public
routes and the scheduler."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from assent.runtime import OwnerKit, ServiceRuntime

from . import routes
from .adapters import tables
from .adapters.repository import RoutinesRepository
from .kinds.routine import RoutineKind
from .scheduler import Scheduler
from .settings import RoutinesSettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it


def create_app(settings: RoutinesSettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        tables=tables.shared,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
        stores=[RoutinesRepository],
    )
    runtime.serve_kinds(OwnerKit(settings.service_name, [RoutineKind()], max_result_bytes=settings.max_message_bytes))
    runtime.keep_workspace_copy()
    scheduler = Scheduler(
        runtime.unit_of_work,
        runtime.relay.claim,
        poll_seconds=settings.scheduler_poll_seconds,
        batch=settings.scheduler_batch,
    )
    app = runtime.app(title="Assent routines service (internal)", extra=scheduler.running)
    routes.install(app, runtime)
    return app
