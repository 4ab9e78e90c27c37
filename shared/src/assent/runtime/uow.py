"""The unit of work a handler gets: one transaction, the stores over it, and the events it emits.

A handler never opens a transaction: the runtime opens one per message (so it can later take a batch of
messages in one transaction), claims the envelope id in the inbox, hands the handler a
:class:`UnitOfWork`, and commits. Everything the handler emits goes to the outbox in that same transaction
and is published after commit. Unit tests hand the same handlers :class:`assent.testing.FakeUnitOfWork`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from .. import inbox
from ..contracts import AgentChanged, GuildChanged, Message, OrgChanged, SessionClosed, SessionContext, SessionOpened
from ..db import session_key, session_lock, session_locks
from ..domain import Agent, Guild, Session
from ..outbox import Outbox
from ..topics import Topic
from .tables import SharedTables


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
    async def by_tool_call(self, tool_call_id: str) -> StoredProposal | None: ...
    async def at_seq(self, session_id: str, seq: int) -> StoredProposal | None: ...
    async def clashing(self, session_id: str, seq: int, tool_call_id: str) -> list[StoredProposal]:
        """Proposals of this tool call, or at this session's ``seq``, in one read."""
        ...

    async def add(self, proposal: StoredProposal) -> None: ...
    async def update(self, proposal_id: str, **fields: Any) -> None: ...


class WorkspaceStore(Protocol):
    async def org(self, org_id: str) -> str | None: ...
    async def guild(self, guild_id: str, *, for_update: bool = False) -> Guild | None: ...
    async def agent(self, agent_id: str) -> Agent | None: ...
    async def agents_of_guild(self, guild_id: str) -> list[Agent]: ...
    async def agents_of_org(self, org_id: str) -> list[Agent]: ...
    async def apply(self, event: OrgChanged | GuildChanged | AgentChanged) -> bool: ...


class UnitOfWork(Protocol):
    """What a handler may use. ``store(name)`` is a kind's own repository over the same transaction."""

    sessions: SessionStore
    proposals: ProposalStore
    workspace: WorkspaceStore

    def store(self, name: str) -> Any: ...
    async def emit(self, topic: Topic, key: str, message: Message) -> None: ...
    async def lock_session(self, session_id: str) -> None: ...
    def on_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once the transaction has committed (never when it rolls back): live notices."""
        ...


# --- PostgreSQL ----------------------------------------------------------------------------------------


class SqlSessions:
    def __init__(self, conn: AsyncConnection, tables: SharedTables) -> None:
        self.conn, self.t = conn, tables.sessions
        self.guilds = tables.guilds

    async def get(self, session_id: str) -> Session | None:
        row = (await self.conn.execute(select(self.t).where(self.t.c.session_id == session_id))).first()
        if row is None:
            return None
        return Session(
            row.session_id,
            row.org_id,
            row.source_guild_id,
            row.operator_user_id,
            row.closed_at is not None,
            row.source_guild_snapshot,
        )

    async def _insert(self, session_id: str, org_id: str, guild_id: str, operator: str) -> None:
        g = self.guilds
        snapshot = (
            select(
                func.jsonb_build_object(
                    "guild_id", g.c.guild_id, "name", g.c.name, "about", g.c.about, "description", g.c.description
                )
            )
            .where(g.c.guild_id == guild_id)
            .scalar_subquery()
        )
        await self.conn.execute(
            insert(self.t)
            .values(
                session_id=session_id,
                org_id=org_id,
                source_guild_id=guild_id,
                operator_user_id=operator,
                source_guild_snapshot=snapshot,
            )
            .on_conflict_do_nothing()
        )

    async def ensure(self, session_id: str, context: SessionContext) -> None:
        await self._insert(session_id, context.org_id, context.source_guild_id, context.operator_user_id)

    async def record(self, message: SessionOpened | SessionClosed) -> None:
        """Apply one session event; applying it twice changes nothing more."""
        if isinstance(message, SessionOpened):
            await self._insert(message.session_id, message.org_id, message.source_guild_id, message.operator_user_id)
            return
        await self.conn.execute(
            self.t.update()
            .where(self.t.c.session_id == message.session_id, self.t.c.closed_at.is_(None))
            .values(closed_at=message.ts)
        )

    async def set_snapshot(self, session_id: str, snapshot: dict[str, Any]) -> None:
        await self.conn.execute(
            self.t.update().where(self.t.c.session_id == session_id).values(source_guild_snapshot=snapshot)
        )


def _proposal(row: Any) -> StoredProposal:
    return StoredProposal(**{name: getattr(row, name) for name in StoredProposal.__dataclass_fields__})


class SqlProposals:
    def __init__(self, conn: AsyncConnection, tables: SharedTables) -> None:
        self.conn, self.t = conn, tables.proposals

    async def get(self, proposal_id: str, *, for_update: bool = False) -> StoredProposal | None:
        query = select(self.t).where(self.t.c.proposal_id == proposal_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else _proposal(row)

    async def by_tool_call(self, tool_call_id: str) -> StoredProposal | None:
        row = (await self.conn.execute(select(self.t).where(self.t.c.tool_call_id == tool_call_id))).first()
        return None if row is None else _proposal(row)

    async def at_seq(self, session_id: str, seq: int) -> StoredProposal | None:
        query = select(self.t).where(self.t.c.session_id == session_id, self.t.c.seq == seq)
        row = (await self.conn.execute(query)).first()
        return None if row is None else _proposal(row)

    async def clashing(self, session_id: str, seq: int, tool_call_id: str) -> list[StoredProposal]:
        query = select(self.t).where(
            (self.t.c.tool_call_id == tool_call_id) | ((self.t.c.session_id == session_id) & (self.t.c.seq == seq))
        )
        return [_proposal(row) for row in await self.conn.execute(query)]

    async def add(self, proposal: StoredProposal) -> None:
        await self.conn.execute(self.t.insert().values(**vars(proposal)))

    async def update(self, proposal_id: str, **fields: Any) -> None:
        await self.conn.execute(self.t.update().where(self.t.c.proposal_id == proposal_id).values(**fields))


def _agent(row: Any) -> Agent:
    return Agent(
        row.agent_id,
        row.org_id,
        row.guild_id,
        row.name,
        row.live,
        row.task,
        row.revision,
        tuple(row.owners),
        tuple(row.editors),
    )


def _guild(row: Any) -> Guild:
    return Guild(row.guild_id, row.org_id, row.name, row.about, row.description, row.revision)


class SqlWorkspace:
    """The workspace directory: the owner's own tables, or another service's read copy of them."""

    def __init__(self, conn: AsyncConnection, tables: SharedTables) -> None:
        self.conn, self.t = conn, tables

    async def org(self, org_id: str) -> str | None:
        return await self.conn.scalar(select(self.t.orgs.c.name).where(self.t.orgs.c.org_id == org_id))

    async def guild(self, guild_id: str, *, for_update: bool = False) -> Guild | None:
        query = select(self.t.guilds).where(self.t.guilds.c.guild_id == guild_id)
        row = (await self.conn.execute(query.with_for_update() if for_update else query)).first()
        return None if row is None else _guild(row)

    async def agent(self, agent_id: str) -> Agent | None:
        row = (await self.conn.execute(select(self.t.agents).where(self.t.agents.c.agent_id == agent_id))).first()
        return None if row is None else _agent(row)

    async def agents_of_guild(self, guild_id: str) -> list[Agent]:
        query = select(self.t.agents).where(self.t.agents.c.guild_id == guild_id).order_by(self.t.agents.c.agent_id)
        return [_agent(row) for row in await self.conn.execute(query)]

    async def agents_of_org(self, org_id: str) -> list[Agent]:
        query = select(self.t.agents).where(self.t.agents.c.org_id == org_id).order_by(self.t.agents.c.agent_id)
        return [_agent(row) for row in await self.conn.execute(query)]

    async def apply(self, event: OrgChanged | GuildChanged | AgentChanged) -> bool:
        """Upsert the entity the event carries unless the copy already holds this revision or a newer one."""
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
        statement = insert(table).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=[key],
            set_={name: statement.excluded[name] for name in values},
            where=table.c.revision < statement.excluded.revision,
        ).returning(table.c[key])
        return (await self.conn.execute(statement)).first() is not None


@dataclass
class SqlUnitOfWork:
    """A unit of work over one open transaction (``conn``) of a service's database."""

    conn: AsyncConnection
    outbox: Outbox
    tables: SharedTables
    owner: str
    store_factories: dict[str, Callable[[AsyncConnection], Any]] = field(default_factory=dict)
    _stores: dict[str, Any] = field(default_factory=dict)
    _locked: set[str] = field(default_factory=set)
    committed: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sessions = SqlSessions(self.conn, self.tables)
        self.proposals = SqlProposals(self.conn, self.tables)
        self.workspace = SqlWorkspace(self.conn, self.tables)

    def store(self, name: str) -> Any:
        if name not in self._stores:
            self._stores[name] = self.store_factories[name](self.conn)
        return self._stores[name]

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
