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
