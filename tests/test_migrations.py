"""Each service's migrations, after the shared history, build exactly the schema its tables describe."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from assent.db import create_engine, migrate
from assent.runtime.tables import MIGRATIONS as SHARED_MIGRATIONS
from assent.runtime.tables import VERSION_TABLE
from assent_devstack.system import service_list
from tests.conftest import create_database

pytestmark = pytest.mark.integration

SERVICES = [spec.name for spec in service_list()]


@pytest.mark.parametrize("service", SERVICES)
async def test_migrations_match_the_models(endpoints: Any, service: str) -> None:
    tables = importlib.import_module(f"{service}.adapters.tables")
    migrations = importlib.import_module(f"{service}.entrypoint").MIGRATIONS
    metadata, schema = tables.metadata, tables.SCHEMA
    url = await create_database(endpoints.database_url, f"migrations_{uuid.uuid4().hex[:8]}")
    engine = create_engine(url)
    try:
        for _ in range(2):  # a second run (another replica) finds nothing to do
            await migrate(engine, SHARED_MIGRATIONS, schema, version_table=VERSION_TABLE)
            await migrate(engine, migrations, schema)

        def differences(connection: Any) -> list[Any]:
            context = MigrationContext.configure(
                connection,
                opts={
                    "include_schemas": True,
                    "include_name": lambda name, type_, _parent: (
                        (type_ != "schema" or name == schema)
                        and not (type_ == "table" and name.startswith("alembic_version"))
                    ),
                },
            )
            return compare_metadata(context, metadata)

        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
    finally:
        await engine.dispose()


async def test_the_inbox_forgets_only_what_is_older_than_its_retention(endpoints: Any) -> None:
    from datetime import timedelta

    from sqlalchemy import func, select

    from assent.inbox import claim, prune

    url = await create_database(endpoints.database_url, f"inbox_{uuid.uuid4().hex[:8]}")
    engine = create_engine(url)
    try:
        await migrate(engine, SHARED_MIGRATIONS, "edits", version_table=VERSION_TABLE)
        from edits.adapters import tables as edits_tables

        inbox = edits_tables.inbox
        old, recent = uuid.uuid4(), uuid.uuid4()
        async with engine.begin() as conn:
            assert await claim(conn, inbox, "c", old)
            assert await claim(conn, inbox, "c", recent)
            assert not await claim(conn, inbox, "c", recent)
            await conn.execute(
                inbox.update().where(inbox.c.message_id == old).values(received_at=func.now() - timedelta(days=15))
            )
        assert await prune(engine, inbox, timedelta(days=14)) == 1
        async with engine.connect() as conn:
            assert (await conn.execute(select(inbox.c.message_id))).scalars().all() == [recent]
    finally:
        await engine.dispose()


async def test_a_migration_job_lets_the_service_run_without_rights_to_change_the_schema(
    stack: Any, tmp_path: Any
) -> None:
    """``python -m <service> migrate`` (the Helm hook and the base's Job) brings the tables to the newest
    revision with a role that owns the schema; the service then starts with ``ASSENT_MIGRATE_ON_START=false`` as a
    role that may read and write rows but create nothing, and is ready."""
    import asyncio
    import os
    import subprocess
    import sys

    import asyncpg
    from sqlalchemy.engine import make_url

    from assent_devstack.system import ServiceProcess, free_port
    from tests.conftest import fresh_prefix

    owner_url = await create_database(stack.endpoints.database_url, f"job_{uuid.uuid4().hex[:8]}")
    env = {**os.environ, **stack.system.env, "DATABASE_URL": owner_url, "ASSENT_TOPIC_PREFIX": fresh_prefix("job")}
    job = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "edits", "migrate"], env=env, capture_output=True, timeout=120
    )
    assert job.returncode == 0, job.stderr.decode()[-2000:]

    role, password = f"app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    owner = make_url(owner_url)
    schema = importlib.import_module("edits.adapters.tables").SCHEMA
    dsn = owner.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        for statement in (
            f"CREATE ROLE {role} LOGIN PASSWORD '{password}'",
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
            f'GRANT USAGE ON SCHEMA "{schema}" TO {role}',
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO {role}',
            f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO {role}',
        ):
            await conn.execute(statement)
    finally:
        await conn.close()
    app_url = owner.set(username=role, password=password).render_as_string(hide_password=False)

    as_app = await asyncpg.connect(make_url(app_url).set(drivername="postgresql").render_as_string(hide_password=False))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await as_app.execute(f'CREATE TABLE "{schema}".not_allowed (id int)')
    finally:
        await as_app.close()

    service = ServiceProcess(
        "edits",
        free_port(),
        {**env, "DATABASE_URL": app_url, "ASSENT_MIGRATE_ON_START": "false"},
        tmp_path / "edits.log",
    )
    try:
        await asyncio.to_thread(service.start)  # waits for /readyz: 200
    finally:
        await asyncio.to_thread(service.stop)
