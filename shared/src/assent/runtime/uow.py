"""The unit of work a handler gets: one transaction, the stores over it, and the events it emits.

A handler never opens a transaction: the runtime opens one per message (so it can later take a batch of
messages in one transaction), claims the envelope id in the inbox, hands the handler a
:class:`UnitOfWork`, and commits. Everything the handler emits goes to the outbox in that same transaction
and is published after commit. Unit tests hand the same handlers :class:`assent.testing.FakeUnitOfWork`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

from sqlalchemy import JSON, Table, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from .. import inbox
from ..contracts import AgentChanged, GuildChanged, Message, OrgChanged, SessionClosed, SessionContext, SessionOpened
from ..db import (
    column_arrays,
    driver_connection,
    insert_rows,
    json_param,
    session_key,
    session_lock,
    session_locks,
    update_rows,
)
from ..domain import Agent, Guild, Session
from ..outbox import Outbox
from ..topics import Topic
from .tables import SharedTables

log = logging.getLogger(__name__)

PUBLICATION_WAIT_SECONDS = 5.0
"""The longest a write waits for Kafka after it commits (:meth:`UnitOfWork.answer_once_published`)."""

S = TypeVar("S")
"""A repository class a service registers with its runtime (see :meth:`UnitOfWork.store`)."""


@dataclass
class StoredProposal:
    """A request as its owner recorded it, and how it was resolved."""

    proposal_id: str
    session_id: str
    seq: int
    turn_id: str
    step: int
    tool_call_id: str
    tool: str
    kind: str
    action: str
    agent_id: str | None
    target: dict[str, Any]
    base: dict[str, Any]
    proposed_hash: str
    payload: dict[str, Any]
    result: dict[str, Any]
    status: str = "pending"
    stale: bool = False
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    resolution: dict[str, Any] | None = None


class SessionStore(Protocol):
    async def get(self, session_id: str) -> Session | None: ...
    async def ensure(self, session_id: str, context: SessionContext) -> None: ...
    async def record(self, message: SessionOpened | SessionClosed) -> None: ...
    async def set_snapshot(self, session_id: str, snapshot: dict[str, Any]) -> None: ...


class ProposalStore(Protocol):
    async def get(self, proposal_id: str, *, for_update: bool = False) -> StoredProposal | None: ...
    async def get_many(self, proposal_ids: Sequence[str], *, for_update: bool = False) -> dict[str, StoredProposal]:
        """The proposals of ``proposal_ids`` that exist, by id, in one read (locked with ``for_update``)."""
        ...

    async def by_tool_call(self, tool_call_id: str) -> StoredProposal | None: ...
    async def at_seq(self, session_id: str, seq: int) -> StoredProposal | None: ...
    async def add(self, proposal: StoredProposal) -> None: ...
    async def update(self, proposal_id: str, **fields: Any) -> None: ...
    async def add_many(self, proposals: Sequence[StoredProposal], *, last: bool = False) -> None:
        """:meth:`add` each of ``proposals``, in one statement; with ``last`` (nothing later in the unit of work reads
        them), held to go with the outbox rows at commit, in the same round trip."""
        ...

    async def update_many(self, changes: Sequence[tuple[str, dict[str, Any]]], *, last: bool = False) -> None:
        """:meth:`update` each (proposal id, fields) of ``changes``, in order, in one statement per set of fields
        (the changes of one proposal taken together); with ``last``, the last of them as :meth:`add_many` does."""
        ...


class WorkspaceStore(Protocol):
    async def org(self, org_id: str) -> str | None: ...
    async def guild(self, guild_id: str, *, for_update: bool = False) -> Guild | None: ...
    async def agent(self, agent_id: str) -> Agent | None: ...
    async def agents_of_guild(self, guild_id: str) -> list[Agent]: ...
    async def agents_of_org(self, org_id: str) -> list[Agent]: ...
    async def apply(self, event: OrgChanged | GuildChanged | AgentChanged) -> bool: ...


@dataclass(frozen=True)
class CallContext:
    """What a tool call is checked against: its session, and the proposals of the call or at the session's seq."""

    session: Session | None
    clashing: list[StoredProposal]


class UnitOfWork(Protocol):
    """What a handler may use. ``store(name)`` is a kind's own repository over the same transaction."""

    @property
    def sessions(self) -> SessionStore: ...
    @property
    def proposals(self) -> ProposalStore: ...
    @property
    def workspace(self) -> WorkspaceStore: ...

    async def call_contexts(self, calls: Sequence[tuple[str, int, str]]) -> list[CallContext]:
        """For each call (session id, seq, tool call id), in order: its session, and the proposals of the call or at
        the session's ``seq``, all in one read: every batch of tool calls starts with it."""
        ...

    def store(self, kind: type[S]) -> S:
        """This service's repository of class ``kind`` over the unit of work's transaction (the classes a service
        registers with its runtime, ``ServiceRuntime(stores=[EditsRepository, ...])``)."""
        ...

    async def emit(self, topic: Topic, key: str, message: Message) -> None: ...
    async def lock_session(self, session_id: str) -> None: ...
    def on_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once the transaction has committed (never when it rolls back): live notices."""
        ...

    def answer_once_published(self) -> None:
        """Once the transaction commits, wait until Kafka holds its messages (bounded) before the caller goes on:
        for a write that other services' read copies must show as soon as it is answered."""
        ...


# --- PostgreSQL ----------------------------------------------------------------------------------------


# The stores' statements run on the asyncpg connection under the unit of work's transaction
# (:func:`assent.db.driver_connection`): they are on every approval round, and a fixed statement text is
# prepared once per connection where SQLAlchemy would build and process each call. The texts are built once
# per table from its name and columns. JSONB values go as JSON text (:func:`assent.db.json_param`).


def _json_columns(table: Table) -> frozenset[str]:
    return frozenset(column.name for column in table.c if isinstance(column.type, JSON))


@dataclass(frozen=True)
class _SessionSql:
    select: str
    insert: str
    close: str
    set_snapshot: str


@functools.cache
def _session_sql(sessions: Table, guilds: Table) -> _SessionSql:
    s, g = sessions.fullname, guilds.fullname
    return _SessionSql(
        select=(
            "SELECT session_id, org_id, source_guild_id, operator_user_id, closed_at, source_guild_snapshot"
            f" FROM {s} WHERE session_id = $1"
        ),
        # The session keeps its source guild's text as it was when the session was first seen: a guild of its own
        # organisation only (another organisation's guild leaves no snapshot, and its reads are refused).
        insert=(
            f"INSERT INTO {s} (session_id, org_id, source_guild_id, operator_user_id, source_guild_snapshot)"
            " VALUES ($1, $2, $3, $4, (SELECT jsonb_build_object('guild_id', g.guild_id, 'name', g.name,"
            f" 'about', g.about, 'description', g.description) FROM {g} AS g WHERE g.guild_id = $3"
            " AND g.org_id = $2))"
            " ON CONFLICT DO NOTHING"
        ),
        close=f"UPDATE {s} SET closed_at = $2 WHERE session_id = $1 AND closed_at IS NULL",
        set_snapshot=f"UPDATE {s} SET source_guild_snapshot = $2 WHERE session_id = $1",
    )


class SqlSessions:
    def __init__(self, conn: AsyncConnection, tables: SharedTables) -> None:
        self.conn, self.t = conn, tables.sessions
        self.guilds = tables.guilds
        self.sql = _session_sql(tables.sessions, tables.guilds)

    async def get(self, session_id: str) -> Session | None:
        row = await (await driver_connection(self.conn)).fetchrow(self.sql.select, session_id)
        if row is None:
            return None
        return Session(
            row["session_id"],
            row["org_id"],
            row["source_guild_id"],
            row["operator_user_id"],
            row["closed_at"] is not None,
            row["source_guild_snapshot"],
        )

    async def _insert(self, session_id: str, org_id: str, guild_id: str, operator: str) -> None:
        await (await driver_connection(self.conn)).execute(self.sql.insert, session_id, org_id, guild_id, operator)

    async def ensure(self, session_id: str, context: SessionContext) -> None:
        await self._insert(session_id, context.org_id, context.source_guild_id, context.operator_user_id)

    async def record(self, message: SessionOpened | SessionClosed) -> None:
        """Apply one session event; applying it twice changes nothing more."""
        if isinstance(message, SessionOpened):
            await self._insert(message.session_id, message.org_id, message.source_guild_id, message.operator_user_id)
            return
        await (await driver_connection(self.conn)).execute(self.sql.close, message.session_id, message.ts)

    async def set_snapshot(self, session_id: str, snapshot: dict[str, Any]) -> None:
        await (await driver_connection(self.conn)).execute(self.sql.set_snapshot, session_id, json_param(snapshot))


_PROPOSAL_FIELDS = tuple(StoredProposal.__dataclass_fields__)


def _proposal(row: Any) -> StoredProposal:
    """A proposal from a row that supports ``row[name]`` (an asyncpg record)."""
    return StoredProposal(**{name: row[name] for name in _PROPOSAL_FIELDS})


@dataclass(frozen=True)
class _ProposalSql:
    table: str
    json_columns: frozenset[str]
    get: str
    get_for_update: str
    by_tool_call: str
    at_seq: str
    add: str
    get_many: str
    get_many_for_update: str


@functools.cache
def _proposal_sql(proposals: Table) -> _ProposalSql:
    p, columns = proposals.fullname, ", ".join(_PROPOSAL_FIELDS)
    select_ = f"SELECT {columns} FROM {p}"
    values = ", ".join(f"${n}" for n in range(1, len(_PROPOSAL_FIELDS) + 1))
    return _ProposalSql(
        table=p,
        json_columns=_json_columns(proposals),
        get=f"{select_} WHERE proposal_id = $1",
        get_for_update=f"{select_} WHERE proposal_id = $1 FOR UPDATE",
        get_many=f"{select_} WHERE proposal_id = ANY($1::text[])",
        get_many_for_update=f"{select_} WHERE proposal_id = ANY($1::text[]) ORDER BY proposal_id FOR UPDATE",
        by_tool_call=f"{select_} WHERE tool_call_id = $1",
        at_seq=f"{select_} WHERE session_id = $1 AND seq = $2",
        add=f"INSERT INTO {p} ({columns}) VALUES ({values})",
    )


@functools.cache
def _call_contexts_sql(proposals: Table, sessions: Table) -> str:
    """For each call ``n`` of the arrays ``$1`` (tool call ids), ``$2`` (session ids) and ``$3`` (seqs): its session
    (columns ``s_…``) beside each proposal of the call or at its seq, one row with no proposal when none clashes
    (and with no session when it is unknown). Each call's proposals are looked up on their own, by index."""
    columns = ", ".join(f"p.{name}" for name in _PROPOSAL_FIELDS)
    return (
        "SELECT c.n, s.session_id AS s_session_id, s.org_id AS s_org_id, s.source_guild_id AS s_source_guild_id,"
        " s.operator_user_id AS s_operator_user_id, s.closed_at AS s_closed_at,"
        f" s.source_guild_snapshot AS s_source_guild_snapshot, {columns}"
        " FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS c(tool_call_id, session_id, seq, n)"
        f" LEFT OUTER JOIN {sessions.fullname} AS s ON s.session_id = c.session_id"
        f" LEFT OUTER JOIN LATERAL (SELECT * FROM {proposals.fullname} AS p"
        "  WHERE p.tool_call_id = c.tool_call_id OR (p.session_id = c.session_id AND p.seq = c.seq)) AS p ON true"
    )


@functools.cache
def _proposal_update_sql(proposals: Table, names: tuple[str, ...]) -> str:
    """``UPDATE`` of the columns ``names`` (sorted) of one proposal: ``$1`` is its id, ``$2…`` the values."""
    unknown = [name for name in names if name not in proposals.c]
    if unknown or not names:
        raise ValueError(f"cannot update {proposals.fullname} columns {unknown or names!r}")
    assignments = ", ".join(f"{name} = ${n}" for n, name in enumerate(names, start=2))
    return f"UPDATE {proposals.fullname} SET {assignments} WHERE proposal_id = $1"


class SqlProposals:
    def __init__(self, conn: AsyncConnection, tables: SharedTables, outbox: Outbox) -> None:
        self.conn, self.t = conn, tables.proposals
        self.outbox = outbox
        self.sql = _proposal_sql(tables.proposals)

    def _value(self, name: str, value: Any) -> Any:
        return json_param(value) if name in self.sql.json_columns else value

    async def get(self, proposal_id: str, *, for_update: bool = False) -> StoredProposal | None:
        query = self.sql.get_for_update if for_update else self.sql.get
        row = await (await driver_connection(self.conn)).fetchrow(query, proposal_id)
        return None if row is None else _proposal(row)

    async def get_many(self, proposal_ids: Sequence[str], *, for_update: bool = False) -> dict[str, StoredProposal]:
        query = self.sql.get_many_for_update if for_update else self.sql.get_many
        rows = await (await driver_connection(self.conn)).fetch(query, list(proposal_ids))
        return {row["proposal_id"]: _proposal(row) for row in rows}

    async def by_tool_call(self, tool_call_id: str) -> StoredProposal | None:
        row = await (await driver_connection(self.conn)).fetchrow(self.sql.by_tool_call, tool_call_id)
        return None if row is None else _proposal(row)

    async def at_seq(self, session_id: str, seq: int) -> StoredProposal | None:
        row = await (await driver_connection(self.conn)).fetchrow(self.sql.at_seq, session_id, seq)
        return None if row is None else _proposal(row)

    async def add(self, proposal: StoredProposal) -> None:
        values = [self._value(name, getattr(proposal, name)) for name in _PROPOSAL_FIELDS]
        await (await driver_connection(self.conn)).execute(self.sql.add, *values)

    async def update(self, proposal_id: str, **fields: Any) -> None:
        names = tuple(sorted(fields))
        values = [self._value(name, fields[name]) for name in names]
        await (await driver_connection(self.conn)).execute(_proposal_update_sql(self.t, names), proposal_id, *values)

    async def add_many(self, proposals: Sequence[StoredProposal], *, last: bool = False) -> None:
        if proposals:
            rows = [[self._value(name, getattr(p, name)) for name in _PROPOSAL_FIELDS] for p in proposals]
            await self._write(insert_rows(self.t, _PROPOSAL_FIELDS), column_arrays(rows), last=last)

    async def update_many(self, changes: Sequence[tuple[str, dict[str, Any]]], *, last: bool = False) -> None:
        by_names: dict[tuple[str, ...], list[list[Any]]] = {}
        for names, changed in grouped_changes(changes).items():
            by_names[names] = [
                [proposal_id, *(self._value(name, fields[name]) for name in names)] for proposal_id, fields in changed
            ]
        for n, (names, rows) in enumerate(by_names.items(), start=1):
            statement = update_rows(self.t, ("proposal_id",), names)
            await self._write(statement, column_arrays(rows), last=last and n == len(by_names))

    async def _write(self, statement: str, args: Sequence[Any], *, last: bool) -> None:
        if last:
            await self.outbox.write_last(self.conn, statement, args)
        else:
            await (await driver_connection(self.conn)).execute(statement, *args)


def grouped_changes(
    changes: Sequence[tuple[str, dict[str, Any]]],
) -> dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]]:
    """``changes`` (proposal id, fields), in order, as the rows of as few one-statement updates as there are sets of
    fields: by the sorted names of the fields each updates. A proposal changed more than once is one row, its later
    values over its earlier ones (an ``UPDATE … FROM`` that names a row twice would update it once, with either)."""
    merged: dict[str, dict[str, Any]] = {}
    for proposal_id, fields in changes:
        merged.setdefault(proposal_id, {}).update(fields)
    grouped: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
    for proposal_id, fields in merged.items():
        grouped.setdefault(tuple(sorted(fields)), []).append((proposal_id, fields))
    return grouped


def agent_from_row(row: Any) -> Agent:
    """An agent from a row that supports ``row[name]`` (an asyncpg record, or a SQLAlchemy row's mapping)."""
    return Agent(
        row["agent_id"],
        row["org_id"],
        row["guild_id"],
        row["name"],
        row["live"],
        row["task"],
        row["revision"],
        tuple(row["owners"]),
        tuple(row["editors"]),
    )


def _guild(row: Any) -> Guild:
    """A guild from a row that supports ``row[name]`` (an asyncpg record)."""
    return Guild(row["guild_id"], row["org_id"], row["name"], row["about"], row["description"], row["revision"])


@dataclass(frozen=True)
class _WorkspaceSql:
    org_name: str
    guild: str
    guild_for_update: str
    agent: str


@functools.cache
def _workspace_sql(orgs: Table, guilds: Table, agents: Table) -> _WorkspaceSql:
    guild = f"SELECT guild_id, org_id, name, about, description, revision FROM {guilds.fullname} WHERE guild_id = $1"
    return _WorkspaceSql(
        org_name=f"SELECT name FROM {orgs.fullname} WHERE org_id = $1",
        guild=guild,
        guild_for_update=f"{guild} FOR UPDATE",
        agent=(
            "SELECT agent_id, org_id, guild_id, name, live, task, revision, owners, editors"
            f" FROM {agents.fullname} WHERE agent_id = $1"
        ),
    )


class SqlWorkspace:
    """The workspace directory: the owner's own tables, or another service's read copy of them.

    With ``catch_up`` (a read copy's), a lookup that finds nothing waits for the copy to catch up and looks once
    more (the transaction reads what committed since), so what the owner answered as written is found here.
    """

    def __init__(
        self, conn: AsyncConnection, tables: SharedTables, catch_up: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        self.conn, self.t = conn, tables
        self.sql = _workspace_sql(tables.orgs, tables.guilds, tables.agents)
        self.catch_up = catch_up

    async def _fetch(self, how: str, query: str, key: str) -> Any:
        pg = await driver_connection(self.conn)
        found = await getattr(pg, how)(query, key)
        if found is None and self.catch_up is not None and await self.catch_up():
            found = await getattr(pg, how)(query, key)
        return found

    async def org(self, org_id: str) -> str | None:
        return cast("str | None", await self._fetch("fetchval", self.sql.org_name, org_id))

    async def guild(self, guild_id: str, *, for_update: bool = False) -> Guild | None:
        query = self.sql.guild_for_update if for_update else self.sql.guild
        row = await self._fetch("fetchrow", query, guild_id)
        return None if row is None else _guild(row)

    async def agent(self, agent_id: str) -> Agent | None:
        row = await self._fetch("fetchrow", self.sql.agent, agent_id)
        return None if row is None else agent_from_row(row)

    async def agents_of_guild(self, guild_id: str) -> list[Agent]:
        query = select(self.t.agents).where(self.t.agents.c.guild_id == guild_id).order_by(self.t.agents.c.agent_id)
        return [agent_from_row(row._mapping) for row in await self.conn.execute(query)]

    async def agents_of_org(self, org_id: str) -> list[Agent]:
        query = select(self.t.agents).where(self.t.agents.c.org_id == org_id).order_by(self.t.agents.c.agent_id)
        return [agent_from_row(row._mapping) for row in await self.conn.execute(query)]

    async def apply(self, event: OrgChanged | GuildChanged | AgentChanged) -> bool:
        """Upsert the entity the event carries unless the copy already holds this revision or a newer one."""
        values: dict[str, Any]
        if isinstance(event, OrgChanged):
            table, key, values = self.t.orgs, "org_id", {"org_id": event.org_id, "name": event.name}
        elif isinstance(event, GuildChanged):
            table, key = self.t.guilds, "guild_id"
            values = {
                "guild_id": event.guild_id,
                "org_id": event.org_id,
                "name": event.name,
                "about": event.about,
                "description": event.description,
            }
        else:
            table, key = self.t.agents, "agent_id"
            values = {
                "agent_id": event.agent_id,
                "org_id": event.org_id,
                "guild_id": event.guild_id,
                "name": event.name,
                "live": event.live,
                "task": event.task,
                "owners": list(event.owners),
                "editors": list(event.editors),
            }
        values["revision"] = event.revision
        upsert = insert(table).values(**values)
        statement = upsert.on_conflict_do_update(
            index_elements=[key],
            set_={name: upsert.excluded[name] for name in values},
            where=table.c.revision < upsert.excluded.revision,
        ).returning(table.c[key])
        return (await self.conn.execute(statement)).first() is not None


@dataclass
class SqlUnitOfWork:
    """A unit of work over one open transaction (``conn``) of a service's database."""

    conn: AsyncConnection
    outbox: Outbox
    tables: SharedTables
    owner: str
    store_factories: Mapping[type[Any], Callable[[AsyncConnection], Any]] = field(default_factory=dict)
    _stores: dict[type[Any], Any] = field(default_factory=dict)
    _locked: set[str] = field(default_factory=set)
    committed: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    catch_up: Callable[[], Awaitable[bool]] | None = None
    """A read copy's wait for the workspace directory to catch up (:class:`SqlWorkspace`); None for the owner's."""

    def __post_init__(self) -> None:
        self.sessions = SqlSessions(self.conn, self.tables)
        self.proposals = SqlProposals(self.conn, self.tables, self.outbox)
        self.workspace = SqlWorkspace(self.conn, self.tables, self.catch_up)

    async def call_contexts(self, calls: Sequence[tuple[str, int, str]]) -> list[CallContext]:
        if not calls:
            return []
        statement = _call_contexts_sql(self.tables.proposals, self.tables.sessions)
        rows = await (await driver_connection(self.conn)).fetch(
            statement, [call[2] for call in calls], [call[0] for call in calls], [call[1] for call in calls]
        )
        contexts = [CallContext(None, []) for _ in calls]
        for row in rows:
            context = contexts[row["n"] - 1]
            if context.session is None and row["s_session_id"] is not None:
                context = contexts[row["n"] - 1] = CallContext(
                    Session(
                        row["s_session_id"],
                        row["s_org_id"],
                        row["s_source_guild_id"],
                        row["s_operator_user_id"],
                        row["s_closed_at"] is not None,
                        row["s_source_guild_snapshot"],
                    ),
                    context.clashing,
                )
            if row["proposal_id"] is not None:
                context.clashing.append(_proposal(row))
        return contexts

    def store(self, kind: type[S]) -> S:
        if kind not in self._stores:
            self._stores[kind] = self.store_factories[kind](self.conn)
        return cast(S, self._stores[kind])  # made by that class (a fake for it, in tests)

    async def emit(self, topic: Topic, key: str, message: Message) -> None:
        await self.outbox.put(self.conn, topic, key, message)

    async def lock_session(self, session_id: str) -> None:
        if session_id not in self._locked:
            await session_lock(self.conn, self.owner, session_id)
            self._locked.add(session_id)

    async def lock_sessions(self, session_ids: Iterable[str]) -> None:
        """Take the locks of several sessions at once, in the one order every transaction uses (no deadlock)."""
        wanted = sorted(set(session_ids) - self._locked)
        await session_locks(self.conn, self.owner, wanted)
        self._locked.update(wanted)

    async def claim(self, consumer: str, message_ids: Sequence[UUID], session_ids: Iterable[str]) -> set[UUID]:
        """:meth:`lock_sessions` and the inbox claim of ``message_ids`` for ``consumer``, in one statement: the ids
        delivered for the first time. Every batch a service consumes starts with it."""
        wanted = sorted(set(session_ids) - self._locked)
        keys = [session_key(self.owner, session_id) for session_id in wanted]
        fresh = await inbox.claim_many(self.conn, self.tables.inbox, consumer, message_ids, lock_keys=keys)
        self._locked.update(wanted)
        return fresh

    def on_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        self.committed.append(callback)

    def answer_once_published(self) -> None:
        if self._wait_for_publication not in self.committed:
            self.committed.append(self._wait_for_publication)

    async def _wait_for_publication(self) -> None:
        if not await self.outbox.until_published(PUBLICATION_WAIT_SECONDS):
            log.warning("answering a write before Kafka acknowledged it (the relay publishes it when it can)")
