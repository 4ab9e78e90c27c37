"""PostgreSQL for a service: one async engine per process, the service's own schema, and its migrations."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg
import sqlalchemy.exc
from prometheus_client import Counter
from sqlalchemy import JSON, Table, event, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .faults import record_statements

CONNECTIONS_DISCARDED = Counter(
    "assent_db_connections_discarded_total", "Pooled connections the server had closed, replaced at checkout"
)


def create_engine(database_url: str, *, pool_size: int = 10, max_overflow: int = 0) -> AsyncEngine:
    """The service's engine. Tables name their schema explicitly, so no ``search_path`` is relied on.

    The pool keeps ``pool_size`` connections open; beyond them a checkout waits for one to come back. Overflow
    connections are closed as soon as they are returned, so under a load that needs them every checkout would
    pay for a new PostgreSQL backend, a login and the driver's type introspection (measured: about a third of
    the database's CPU in the throughput benchmark when the pool overflowed).
    """
    engine = create_async_engine(database_url, pool_size=pool_size, max_overflow=max_overflow, pool_recycle=3600)
    discard_closed_connections(engine)
    record_statements(engine)
    return engine


def discard_closed_connections(engine: AsyncEngine) -> None:
    """Never hand out a pooled connection that the server closed: the pool replaces it with a new one.

    Statements sent on the driver's connection directly (:func:`driver_connection`) bypass SQLAlchemy's handling
    of a dropped connection, which would invalidate it: after PostgreSQL restarted, every pooled connection
    would go back to the pool dead and fail each checkout after. asyncpg knows, with no round trip, when the
    server closed a connection (a restart's shutdown, or the backend's exit when the postmaster dies, closes the
    socket); a checkout that finds one raises :class:`~sqlalchemy.exc.DisconnectionError`, which makes the pool
    discard it and take another, up to three times before it connects anew. (``pool_pre_ping`` would also find
    a silent loss, at the cost of a round trip per checkout on the hot path; a connection that broke without
    a word fails its one statement, and is closed from then on.)
    """

    @event.listens_for(engine.sync_engine, "checkout")
    def discard_if_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if dbapi_connection.driver_connection.is_closed():
            CONNECTIONS_DISCARDED.inc()
            raise DisconnectionError("the server closed this pooled connection")


async def migrate(
    engine: AsyncEngine, migrations_dir: Path, schema: str, *, version_table: str = "alembic_version"
) -> None:
    """Bring ``schema`` to the newest revision in ``migrations_dir``.

    Safe to run from several replicas at once: an advisory lock serialises them, and the loser finds the
    schema already at head. Several histories may share one schema, each with its own ``version_table``.
    """
    # Imported here, not at the top: a process that does not migrate (the migration job ran already) need not pay
    # for alembic's import at every start.
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir))
    cfg.attributes["schema"] = schema
    cfg.attributes["version_table"] = version_table

    def upgrade(sync_connection: object) -> None:
        cfg.attributes["connection"] = sync_connection
        command.upgrade(cfg, "head")

    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"migrate:{schema}"})
        await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        await conn.run_sync(upgrade)


def run_migrations_in_env(
    target_metadata: object, *, version_table: str = "alembic_version", exclude_tables: frozenset[str] = frozenset()
) -> None:
    """The body of a ``migrations/env.py``.

    Runs on the connection that :func:`migrate` hands over; from the ``alembic`` command line it connects
    to ``DATABASE_URL`` itself. ``exclude_tables`` are tables another history of the same schema owns.
    """
    import asyncio
    import os

    from alembic import context

    cfg = context.config
    schema = cfg.attributes.get("schema") or cfg.get_main_option("schema")
    version_table = cfg.attributes.get("version_table") or version_table

    def run(connection: object) -> None:
        context.configure(
            connection=connection,  # type: ignore[arg-type]  # alembic's own objects, typed as object here
            target_metadata=target_metadata,  # type: ignore[arg-type]  # alembic's own objects, typed as object here
            version_table=version_table,
            version_table_schema=schema,
            include_schemas=True,
            # Each service owns one schema; never diff (or drop) another service's or history's tables.
            include_name=lambda name, type_, _parent: (
                (type_ != "schema" or name == schema)
                and not (type_ == "table" and (name in exclude_tables or (name or "").startswith("alembic_version")))
            ),
            include_object=lambda obj, name, type_, _reflected, _compare_to: (
                not (type_ == "table" and name in exclude_tables)
            ),
        )
        with context.begin_transaction():
            context.run_migrations()

    connection = cfg.attributes.get("connection")
    if connection is not None:
        run(connection)
        return

    async def standalone() -> None:
        engine = create_async_engine(os.environ["DATABASE_URL"])
        async with engine.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            await conn.run_sync(run)
        await engine.dispose()

    asyncio.run(standalone())


# --- telling an outage from a failed query ------------------------------------------------------------------------

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,  # no pooled connection came free in time
    sqlalchemy.exc.DisconnectionError,
    asyncpg.exceptions.PostgresConnectionError,  # SQLSTATE class 08, and a connection the server dropped
    asyncpg.exceptions.CannotConnectNowError,  # 57P03: starting up, shutting down, in recovery
    asyncpg.exceptions.AdminShutdownError,  # 57P01
    asyncpg.exceptions.CrashShutdownError,  # 57P02
    asyncpg.exceptions.TooManyConnectionsError,
    # A connection whose protocol an outage left mid-exchange (an error read, the rest of the answer never came):
    # "another operation is in progress" until the server's close reaches it, and then it is discarded.
    asyncpg.exceptions.InternalClientError,
)

_DATABASE_PACKAGES = frozenset({"asyncpg", "sqlalchemy"})


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the database cannot be reached, rather than that a query failed.

    One answer for every caller: an outage is retried without bound by consumers, answered 503 with ``retry`` by
    the HTTP API, and waited out by the outbox relay; a failed query is none of these. Besides the drivers'
    connection errors, however wrapped (SQLAlchemy's, its asyncpg adapter's, asyncpg's own), that is a
    ``ConnectionError``/``OSError``/``TimeoutError`` raised while connecting: one that passed through asyncpg's or
    SQLAlchemy's frames.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _UNAVAILABLE):
            return True
        if isinstance(current, sqlalchemy.exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, asyncpg.exceptions.InterfaceError) and "connection is closed" in str(current):
            return True
        if isinstance(current, OSError) and _raised_by_database_driver(current.__traceback__):
            return True
        current = current.__cause__
    return False


def _raised_by_database_driver(tb: TracebackType | None) -> bool:
    # The error may surface from the event loop's own code (uvloop's connect), below the driver's frames.
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).partition(".")[0] in _DATABASE_PACKAGES:
            return True
        tb = tb.tb_next
    return False


_DRIVER = "assent.driver_connection"


async def driver_connection(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under ``conn``, inside the transaction ``conn`` has begun.

    Hot statements run on it directly: asyncpg prepares each statement text once per connection (its statement
    cache) and binds parameters in C, where SQLAlchemy spends about three times as much CPU per statement on its
    compiled-cache lookup, parameter and result processing and greenlet switch. What is written on it commits or
    rolls back with ``conn``'s transaction. SQLAlchemy's asyncpg adapter sends BEGIN lazily, with the first
    statement it executes; when nothing has gone through it yet, BEGIN is sent here, through the adapter, so
    the adapter knows its transaction and commits it.

    Values cross as asyncpg takes them: JSON and JSONB as text (the engine's codecs; reads come back parsed),
    arrays as lists, UUIDs as ``uuid.UUID``.
    """
    adapter: Any = conn.info.get(_DRIVER)
    if adapter is None:  # info lives as long as the physical connection
        adapter = conn.info[_DRIVER] = (await conn.get_raw_connection()).dbapi_connection
    if adapter._transaction is None and conn.in_transaction():
        # The adapter's own lazy BEGIN (what its cursor does before a first statement), private to SQLAlchemy's
        # asyncpg dialect (pinned in uv.lock): every integration test fails if it changes.
        await adapter._start_transaction()
    return adapter.driver_connection


def session_key(owner: str, session_id: str) -> str:
    """The name of ``owner``'s lock on a studio session (the lock is ``hashtext`` of it)."""
    return f"{owner}:session:{session_id}"


async def session_lock(conn: AsyncConnection, owner: str, session_id: str) -> None:
    """Hold ``owner``'s lock on a studio session until the transaction ends.

    Writes for one session go one at a time within a service; services do not block each other.
    """
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": session_key(owner, session_id)})


_LOCK_MANY = text(
    "SELECT count(pg_advisory_xact_lock(k)) FROM"
    " (SELECT DISTINCT hashtext(key) AS k FROM unnest(CAST(:keys AS text[])) AS key ORDER BY 1 OFFSET 0) AS ks"
)


async def session_locks(conn: AsyncConnection, owner: str, session_ids: Iterable[str]) -> None:
    """:func:`session_lock` for several sessions in one statement, taken in ascending lock order.

    Two transactions that take their locks this way cannot deadlock on them, whatever their sessions.
    """
    keys = [session_key(owner, session_id) for session_id in session_ids]
    if keys:
        await conn.execute(_LOCK_MANY, {"keys": keys})


def json_param(value: Any) -> str:
    """``value`` as a JSON or JSONB parameter of a statement on :func:`driver_connection`: compact JSON text.

    ``None`` becomes JSON ``null``, not SQL NULL, as SQLAlchemy's JSON types store it; pass ``None`` itself
    (not through here) for SQL NULL.
    """
    return json.dumps(value, separators=(",", ":"))


# Many rows in one statement: one array per column, through ``unnest``. (``executemany`` sends a statement per row
# in one round trip; this is one statement, so it can also go inside another, as :meth:`Outbox.write_last` does.)


def _array_type(table: Table, name: str) -> str:
    column_type = table.c[name].type
    if isinstance(column_type, JSON):
        return "text"  # JSON values cross as text (json_param) and are cast per element
    return str(column_type.compile(dialect=postgresql.dialect())).lower()


def _value(table: Table, name: str) -> str:
    return f"r.{name}::jsonb" if isinstance(table.c[name].type, JSON) else f"r.{name}"


def _unnest(table: Table, names: Sequence[str], n: int) -> str:
    arrays = ", ".join(f"${n + i}::{_array_type(table, name)}[]" for i, name in enumerate(names))
    return f"unnest({arrays}) AS r({', '.join(names)})"


@functools.cache
def insert_rows(table: Table, names: tuple[str, ...], n: int = 1) -> str:
    """``INSERT`` of the columns ``names`` of many rows, given as one array per column (``$n``, ``$n+1``, …; JSON
    columns as JSON text, see :func:`json_param`): the arguments are :func:`column_arrays` of the rows."""
    values = ", ".join(_value(table, name) for name in names)
    return f"INSERT INTO {table.fullname} ({', '.join(names)}) SELECT {values} FROM {_unnest(table, names, n)}"


@functools.cache
def update_rows(table: Table, keys: tuple[str, ...], names: tuple[str, ...], n: int = 1) -> str:
    """``UPDATE`` of the columns ``names`` of many rows, each found by its ``keys``: one array per key, then per column
    (``$n``, …), as :func:`insert_rows` takes them. A row named twice is updated once: collapse changes first."""
    assignments = ", ".join(f"{name} = {_value(table, name)}" for name in names)
    found = " AND ".join(f"t.{key} = r.{key}" for key in keys)
    return f"UPDATE {table.fullname} AS t SET {assignments} FROM {_unnest(table, (*keys, *names), n)} WHERE {found}"


def column_arrays(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """``rows`` (each a sequence of values, in column order) as one list per column."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else []
