"""Wires the access service: the access kind on the shared runtime, its read copies of the workspace and of the
connections' catalogs (``connections.catalogs``), and its public routes."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from assent.runtime import OwnerKit, ServiceRuntime
from assent.runtime.uow import UnitOfWork
from connections_contract.messages import ConnectionCatalog
from connections_contract.topics import CONNECTIONS_CATALOGS

from . import routes
from .adapters import tables
from .adapters.repository import AccessRepository
from .kinds.access import AccessKind
from .settings import AccessSettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it


async def keep_catalog(message: ConnectionCatalog, uow: UnitOfWork) -> None:
    await uow.store(AccessRepository).apply_catalog(message)


def create_app(settings: AccessSettings) -> FastAPI:
    runtime = ServiceRuntime(
        settings,
        tables=tables.shared,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
        stores=[AccessRepository],
    )
    runtime.serve_kinds(OwnerKit(settings.service_name, [AccessKind()], max_result_bytes=settings.max_message_bytes))
    runtime.keep_workspace_copy()
    runtime.consume(CONNECTIONS_CATALOGS, keep_catalog, label="catalog")
    app = runtime.app(title="Assent access service (internal)")
    routes.install(app, runtime)
    return app
