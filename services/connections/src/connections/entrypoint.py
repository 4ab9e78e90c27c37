"""Wires the connections service: the login kind on the shared runtime, its read copy of the workspace, its routes,
the pool of MCP client sessions and the runner of proxied calls, and what it does as it starts (the platform's
logins; credentials encrypted again under a new first key)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from assent.runtime import ServiceRuntime

from . import api, workspace
from .adapters import tables
from .adapters.crypto import CredentialBox
from .adapters.mcp import McpPool, quiet_sdk_logs
from .adapters.repository import LoginsRepository
from .calls import CallRunner
from .kinds.login import ConnectionsKit, LoginKind
from .settings import ConnectionsSettings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # inside the package: installed with it
log = logging.getLogger(__name__)


def create_app(settings: ConnectionsSettings) -> FastAPI:
    box = CredentialBox(settings.credentials_key)  # refuses to start without ASSENT_CREDENTIALS_KEY
    runtime = ServiceRuntime(
        settings,
        tables=tables.shared,
        migrations=MIGRATIONS,
        schema=tables.SCHEMA,
        stores=[LoginsRepository],
    )
    quiet_sdk_logs()
    pool = McpPool(timeout=settings.mcp_timeout_seconds, idle_per_login=settings.mcp_idle_sessions)
    login = LoginKind(box, pool)
    # A runner that has not answered a call in twice the MCP timeout (and a margin) has stopped: another takes it.
    lease = 2 * settings.mcp_timeout_seconds + 30
    runner = CallRunner(runtime.unit_of_work, login, lease_seconds=lease, max_result_bytes=settings.max_message_bytes)
    kit = ConnectionsKit(settings.service_name, login, runner.start, max_result_bytes=settings.max_message_bytes)
    runtime.serve_kinds(kit)
    runtime.keep_workspace_copy()

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with runtime.unit_of_work() as uow:
            await workspace.keep_platform_logins(uow, settings.platform_logins, box)
        async with runtime.unit_of_work() as uow:
            again = await workspace.encrypt_again(uow, box)
        if again:
            log.info("encrypted the credentials of %d logins again under the first key", again)
        sweeping = asyncio.create_task(runner.sweep_forever(), name="proxied-calls-sweep")
        try:
            yield
        finally:
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
            await runner.close()
            await pool.close()

    app = runtime.app(title="Assent connections service (internal)", extra=running)
    api.install(app, runtime, box, kit)
    return app
