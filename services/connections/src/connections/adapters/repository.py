"""Queries over the connections schema. A repository works inside the caller's transaction (a unit of work's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter
from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from assent.contracts import ToolCall

from ..domain.grants import Grant
from ..domain.logins import Login
from ..domain.policy import ToolSpec
from . import tables as t

__all__ = ["TOOLS", "Grant", "LoginsRepository", "StoredCredentials"]


@dataclass(frozen=True)
class StoredCredentials:
    """A login's credentials as stored: the Fernet token and the fingerprint of the key that made it."""

    login_id: str
    token: str
    key_id: str | None


TOOLS: TypeAdapter[tuple[ToolSpec, ...]] = TypeAdapter(tuple[ToolSpec, ...])
"""A login's manifest as its ``tools`` column holds it: a JSON list of its tools' fields."""


def _login(row: Any) -> Login:
    return Login(
        login_id=row.login_id,
        org_id=row.org_id,
        scope=row.scope,
        scope_id=row.scope_id,
        name=row.name,
        server_url=row.server_url,
        account=row.account,
        connected=row.connected,
        verified=row.verified,
        tools=TOOLS.validate_python(row.tools),
        revision=row.revision,
        has_credentials=row.credentials is not None,
        updated_by=row.updated_by,
        updated_at=row.updated_at,
    )


_LOGIN_COLUMNS = [c for c in t.logins.c if c.name not in ("key_id", "created_at")]


class LoginsRepository:
    """Logins, their stored credentials, and sessions' grants."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    # --- logins -------------------------------------------------------------------------------------------------

    async def get(self, login_id: str, *, for_update: bool = False) -> Login | None:
        query = select(*_LOGIN_COLUMNS).where(t.logins.c.login_id == login_id)
        if for_update:
            query = query.with_for_update()
        row = (await self.conn.execute(query)).first()
        return None if row is None else _login(row)

    async def of_org(self, org_id: str) -> list[Login]:
        """The logins an organisation holds (any scope), and the platform's."""
        query = (
            select(*_LOGIN_COLUMNS)
            .where(or_(t.logins.c.org_id == org_id, t.logins.c.scope == "platform"))
            .order_by(t.logins.c.login_id)
        )
        return [_login(row) for row in await self.conn.execute(query)]

    async def reachable(self, org_id: str, guild_id: str, agent_ids: Sequence[str]) -> list[Login]:
        """Every login of the platform, of ``org_id``, of the guild ``guild_id`` and of the agents ``agent_ids``."""
        c = t.logins.c
        query = (
            select(*_LOGIN_COLUMNS)
            .where(
                or_(
                    c.scope == "platform",
                    and_(
                        c.org_id == org_id,
                        or_(
                            c.scope == "org",
                            and_(c.scope == "guild", c.scope_id == guild_id),
                            and_(c.scope == "agent", c.scope_id.in_(list(agent_ids))),
                        ),
                    ),
                )
            )
            .order_by(c.login_id)
        )
        return [_login(row) for row in await self.conn.execute(query)]

    async def create(self, login: Login, credentials: str | None, key_id: str | None) -> bool:
        """Record ``login`` (revision 1); False when a login of that id exists (anywhere)."""
        row = (
            await self.conn.execute(
                insert(t.logins)
                .values(
                    login_id=login.login_id,
                    org_id=login.org_id,
                    scope=login.scope,
                    scope_id=login.scope_id,
                    name=login.name,
                    server_url=login.server_url,
                    account=login.account,
                    connected=login.connected,
                    verified=login.verified,
                    tools=TOOLS.dump_python(login.tools, mode="json"),
                    credentials=credentials,
                    key_id=key_id if credentials is not None else None,
                    revision=1,
                    updated_by=login.updated_by,
                )
                .on_conflict_do_nothing(index_elements=[t.logins.c.login_id])
                .returning(t.logins.c.login_id)
            )
        ).first()
        return row is not None

    async def change(self, login: Login, actor: str) -> Login:
        """Write what may change of ``login`` (its name, server, account, whether it is connected or verified, its
        tools; its credentials apart: :meth:`set_credentials`) with the next revision."""
        row = (
            await self.conn.execute(
                update(t.logins)
                .where(t.logins.c.login_id == login.login_id)
                .values(
                    name=login.name,
                    server_url=login.server_url,
                    account=login.account,
                    connected=login.connected,
                    verified=login.verified,
                    tools=TOOLS.dump_python(login.tools, mode="json"),
                    revision=t.logins.c.revision + 1,
                    updated_by=actor,
                    updated_at=func.now(),
                )
                .returning(*_LOGIN_COLUMNS)
            )
        ).one()
        return _login(row)

    async def delete(self, login_id: str) -> None:
        """Delete the login and every grant of it."""
        await self.conn.execute(delete(t.grants).where(t.grants.c.login_id == login_id))
        await self.conn.execute(delete(t.logins).where(t.logins.c.login_id == login_id))

    async def platform_ids(self) -> list[str]:
        query = select(t.logins.c.login_id).where(t.logins.c.scope == "platform")
        return list((await self.conn.execute(query)).scalars())

    # --- credentials ----------------------------------------------------------------------------------------------

    async def credentials(self, login_id: str) -> StoredCredentials | None:
        query = select(t.logins.c.credentials, t.logins.c.key_id).where(t.logins.c.login_id == login_id)
        row = (await self.conn.execute(query)).first()
        if row is None or row.credentials is None:
            return None
        return StoredCredentials(login_id, row.credentials, row.key_id)

    async def encrypted_otherwise(self, key_id: str, limit: int | None = None) -> list[StoredCredentials]:
        """The stored credentials (up to ``limit``) made with another key than ``key_id``, locked for re-encrypting
        (those another replica holds are passed over: it encrypts them)."""
        c = t.logins.c
        query = (
            select(c.login_id, c.credentials, c.key_id)
            .where(c.credentials.is_not(None), or_(c.key_id.is_(None), c.key_id != key_id))
            .order_by(c.login_id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return [StoredCredentials(row.login_id, row.credentials, row.key_id) for row in await self.conn.execute(query)]

    async def set_credentials(self, login_id: str, token: str | None, key_id: str | None) -> None:
        """Store the login's credentials (encrypted again, as the deployment lists them, or as a change gives them):
        the login's revision stays, as its catalog does."""
        statement = update(t.logins).where(t.logins.c.login_id == login_id).values(credentials=token, key_id=key_id)
        await self.conn.execute(statement)

    # --- grants -----------------------------------------------------------------------------------------------------

    async def grant(
        self,
        session_id: str,
        login_id: str,
        actor: str,
        via: str,
        seq: int | None,
        at: datetime,
        expires_at: datetime | None = None,
    ) -> None:
        """Grant the login to the session until ``expires_at`` (None: until the session closes), again after a revoke
        or once a grant lapsed (at ``at``); a grant it holds stays as it was."""
        g = t.grants
        statement = (
            insert(g)
            .values(
                session_id=session_id,
                login_id=login_id,
                granted_by=actor,
                granted_at=at,
                via=via,
                seq=seq,
                expires_at=expires_at,
            )
            .on_conflict_do_update(
                index_elements=[g.c.session_id, g.c.login_id],
                set_={
                    "granted_by": actor,
                    "granted_at": at,
                    "via": via,
                    "seq": seq,
                    "revoked_by": None,
                    "revoked_at": None,
                    "expires_at": expires_at,
                },
                where=or_(g.c.revoked_at.is_not(None), g.c.expires_at <= at),
            )
        )
        await self.conn.execute(statement)

    async def revoke(self, session_id: str, login_id: str, actor: str, at: datetime) -> bool:
        """Revoke the session's grant of the login; False when it held none."""
        g = t.grants
        statement = (
            update(g)
            .where(g.c.session_id == session_id, g.c.login_id == login_id, g.c.revoked_at.is_(None))
            .values(revoked_by=actor, revoked_at=at)
            .returning(g.c.login_id)
        )
        return (await self.conn.execute(statement)).first() is not None

    async def grants_of(self, session_id: str) -> dict[str, Grant]:
        g = t.grants
        query = select(g).where(g.c.session_id == session_id)
        return {
            row.login_id: Grant(
                row.login_id,
                row.granted_by,
                row.granted_at,
                row.via,
                row.seq,
                row.revoked_by,
                row.revoked_at,
                row.expires_at,
            )
            for row in await self.conn.execute(query)
        }

    async def end_grants(self, session_id: str) -> None:
        """The session closed: its grants end."""
        await self.conn.execute(delete(t.grants).where(t.grants.c.session_id == session_id))

    # --- login requests -----------------------------------------------------------------------------------------------

    async def pending_proposals(self, session_id: str, login_id: str) -> list[str]:
        """The proposal ids of the session's login requests of ``login_id`` that wait for an answer."""
        p = t.shared.proposals
        query = (
            select(p.c.proposal_id)
            .where(
                p.c.session_id == session_id,
                p.c.kind == "login",
                p.c.status == "pending",
                p.c.payload["connection_id"].astext == login_id,
            )
            .order_by(p.c.seq)
        )
        return list((await self.conn.execute(query)).scalars())

    # --- proxied calls ----------------------------------------------------------------------------------------------

    async def add_call(self, call_id: UUID, session_id: str, call: ToolCall, trace: dict[str, str]) -> None:
        """Record an admitted call for its runner (a call recorded already stays as it is)."""
        statement = (
            insert(t.calls)
            .values(call_id=call_id, session_id=session_id, call=call.model_dump(mode="json"), trace=trace)
            .on_conflict_do_nothing(index_elements=[t.calls.c.call_id])
        )
        await self.conn.execute(statement)

    async def take_call(self, call_id: UUID, now: datetime, until: datetime) -> Any | None:
        """Take the call until ``until`` (its ``call`` and ``trace``); None when it was answered, or another runner
        holds it (until its time is up)."""
        c = t.calls.c
        statement = (
            update(t.calls)
            .where(c.call_id == call_id, or_(c.taken_until.is_(None), c.taken_until < now))
            .values(taken_until=until)
            .returning(c.call, c.trace)
        )
        return (await self.conn.execute(statement)).first()

    async def calls_due(self, now: datetime, limit: int) -> list[UUID]:
        """Calls no runner holds: left by a process that stopped, or never started (oldest first)."""
        c = t.calls.c
        query = (
            select(c.call_id)
            .where(or_(c.taken_until.is_(None), c.taken_until < now))
            .order_by(c.created_at)
            .limit(limit)
        )
        return list((await self.conn.execute(query)).scalars())

    async def finish_call(self, call_id: UUID) -> bool:
        """Delete the call as it is answered; False when another runner answered it first."""
        statement = delete(t.calls).where(t.calls.c.call_id == call_id).returning(t.calls.c.call_id)
        return (await self.conn.execute(statement)).first() is not None
