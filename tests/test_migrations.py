"""Each service's migrations build exactly the schema its table definitions describe."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData

from assent.db import create_engine, migrate
from edits.adapters import tables as edits_tables
from edits.entrypoint import MIGRATIONS as EDITS_MIGRATIONS
from gateway.adapters import tables as gateway_tables
from gateway.entrypoint import MIGRATIONS as GATEWAY_MIGRATIONS
from tests.conftest import create_database

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("metadata", "migrations", "schema"),
    [
        (edits_tables.metadata, EDITS_MIGRATIONS, edits_tables.SCHEMA),
        (gateway_tables.metadata, GATEWAY_MIGRATIONS, gateway_tables.SCHEMA),
    ],
    ids=["edits", "gateway"],
)
async def test_migrations_match_the_models(endpoints: Any, metadata: MetaData, migrations: Path, schema: str) -> None:
    url = await create_database(endpoints.database_url, f"migrations_{uuid.uuid4().hex[:8]}")
    engine = create_engine(url)
    try:
        await migrate(engine, migrations, schema)
        await migrate(engine, migrations, schema)  # a second run (another replica) finds nothing to do

        def differences(connection: Any) -> list[Any]:
            context = MigrationContext.configure(
                connection,
                opts={
                    "include_schemas": True,
                    "include_name": lambda name, type_, _parent: (
                        (type_ != "schema" or name == schema) and (type_, name) != ("table", "alembic_version")
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
        await migrate(engine, EDITS_MIGRATIONS, edits_tables.SCHEMA)
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
