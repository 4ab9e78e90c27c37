"""Queries over the access schema. A repository works inside the caller's transaction (a unit of work's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from connections_contract.messages import ConnectionCatalog

from ..domain.access import Binding, CatalogTool, Change, Connection, Scope
from . import tables as t


@dataclass(frozen=True)
class HeldBinding:
    """A binding as stored, with who wrote it last and the proposal behind it, if any."""

    binding: Binding
    scope_id: str
    updated_by: str
    studio_session_id: str | None
    studio_seq: int | None


def _connection(row: Any) -> Connection:
    tools = tuple(
        CatalogTool(tool["name"], bool(tool["changes_data"]), bool(tool.get("default_off", False)))
        for tool in row.tools
    )
    return Connection(row.connection_id, row.name, tools, row.server)


def _held(row: Any) -> HeldBinding:
    return HeldBinding(
        Binding(row.scope, row.kind, row.subject, row.on, row.connection_id),
        row.scope_id,
        row.updated_by,
        row.studio_session_id,
        row.studio_seq,
    )


class AccessRepository:
    """Bindings at every scope, their history, and the copy of the connections' catalogs."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def lock_org(self, org_id: str) -> None:
        """Serialise the writes of bindings in one organisation (a binding at the organisation moves every agent's
        access): a check against the access read and the write it allows see the same bindings."""
        await self.conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"access/{org_id}"}
        )

    async def reachable(self, org_id: str, guild_id: str | None, agent_id: str | None) -> list[Connection]:
        """The live logins reachable from an agent (platform, its organisation's, its guild's, its own); with
        ``agent_id`` None, from a guild; with both None, every login of the organisation and the platform."""
        c = t.connections
        if guild_id is None and agent_id is None:
            where = or_(c.c.scope == "platform", c.c.org_id == org_id)
        else:
            where = or_(
                c.c.scope == "platform",
                and_(
                    c.c.org_id == org_id,
                    or_(
                        c.c.scope == "org",
                        and_(c.c.scope == "guild", c.c.scope_id == guild_id),
                        and_(c.c.scope == "agent", c.c.scope_id == agent_id),
                    ),
                ),
            )
        statement = select(c).where(c.c.deleted.is_(False), where).order_by(c.c.connection_id)
        return [_connection(row) for row in await self.conn.execute(statement)]

    async def bindings_of(self, org_id: str, guild_id: str | None, agent_id: str | None) -> list[HeldBinding]:
        """The bindings of the organisation, of ``guild_id`` and of ``agent_id`` (each when given)."""
        b = t.bindings
        scopes = [and_(b.c.scope == "org", b.c.scope_id == org_id)]
        if guild_id is not None:
            scopes.append(and_(b.c.scope == "guild", b.c.scope_id == guild_id))
        if agent_id is not None:
            scopes.append(and_(b.c.scope == "agent", b.c.scope_id == agent_id))
        statement = select(b).where(or_(*scopes)).order_by(b.c.scope, b.c.kind, b.c.subject)
        return [_held(row) for row in await self.conn.execute(statement)]

    async def settings_before(
        self, agent_id: str, session_id: str, seq: int, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """What each agent-level binding of ``keys`` (kind, subject) said before request ``seq`` of ``session_id``
        wrote it: the setting of the change logged before that request's, or ``inherit`` (no binding) when none was."""
        c = t.binding_changes
        at_agent = and_(c.c.scope == "agent", c.c.scope_id == agent_id)
        written = (
            select(func.min(c.c.change_id))
            .where(at_agent, c.c.studio_session_id == session_id, c.c.studio_seq == seq)
            .scalar_subquery()
        )
        before: dict[tuple[str, str], str] = {}
        for kind, subject in keys:
            statement = (
                select(c.c.setting)
                .where(at_agent, c.c.kind == kind, c.c.subject == subject, c.c.change_id < written)
                .order_by(c.c.change_id.desc())
                .limit(1)
            )
            setting = (await self.conn.execute(statement)).scalar_one_or_none()
            before[(kind, subject)] = "inherit" if setting is None else str(setting)
        return before

    async def write(
        self,
        org_id: str,
        scope: Scope,
        scope_id: str,
        changes: Sequence[Change],
        *,
        actor: str,
        session_id: str | None = None,
        seq: int | None = None,
    ) -> None:
        """Write ``changes`` at one scope (on and off upsert the binding, inherit deletes it) and log each."""
        b = t.bindings
        for change in changes:
            key = and_(
                b.c.scope == scope, b.c.scope_id == scope_id, b.c.kind == change.kind, b.c.subject == change.subject
            )
            if change.setting == "inherit":
                await self.conn.execute(delete(b).where(key))
            else:
                values = {
                    "on": change.setting == "on",
                    "connection_id": change.connection_id,
                    "updated_by": actor,
                    "studio_session_id": session_id,
                    "studio_seq": seq,
                }
                statement = insert(b).values(
                    scope=scope, scope_id=scope_id, kind=change.kind, subject=change.subject, org_id=org_id, **values
                )
                await self.conn.execute(
                    statement.on_conflict_do_update(
                        index_elements=[b.c.scope, b.c.scope_id, b.c.kind, b.c.subject],
                        set_={**values, "updated_at": func.now()},
                    )
                )
        if changes:
            await self.conn.execute(
                insert(t.binding_changes),
                [
                    {
                        "scope": scope,
                        "scope_id": scope_id,
                        "kind": change.kind,
                        "subject": change.subject,
                        "org_id": org_id,
                        "setting": change.setting,
                        "connection_id": change.connection_id,
                        "actor": actor,
                        "studio_session_id": session_id,
                        "studio_seq": seq,
                    }
                    for change in changes
                ],
            )

    async def apply_catalog(self, message: ConnectionCatalog) -> None:
        """Keep the newest revision of a login's catalog; an older message changes nothing. When the catalog names
        the login's server, a connection binding still keyed by the login (written while its catalog named none)
        becomes that server's binding, naming the login, unless the scope already binds the server."""
        c = t.connections
        values = {
            "org_id": message.org_id,
            "scope": message.scope,
            "scope_id": message.scope_id,
            "name": message.name,
            "server": message.server,
            "revision": message.revision,
            "deleted": message.deleted,
            "tools": [
                {"name": tool.name, "changes_data": tool.changes_data, "default_off": tool.default_off}
                for tool in message.tools
            ],
        }
        statement = insert(c).values(connection_id=message.connection_id, **values)
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=[c.c.connection_id], set_=values, where=c.c.revision < statement.excluded.revision
            )
        )
        if message.server is not None and not message.deleted:
            await self.conn.execute(
                text(
                    "UPDATE access.bindings AS b SET subject = :server, connection_id = :login "
                    "WHERE b.kind = 'connection' AND b.subject = :login AND NOT EXISTS ("
                    "SELECT 1 FROM access.bindings AS o WHERE o.scope = b.scope AND o.scope_id = b.scope_id "
                    "AND o.kind = 'connection' AND o.subject = :server)"
                ),
                {"server": message.server, "login": message.connection_id},
            )
