"""The access service's side of its public routes (:mod:`access_contract.routes`): each method the handler of the
declared route of its name.

Organisations are walls: for a person (``X-Assent-Org``), an agent, guild or organisation of another organisation
is answered 404 with the words a missing one gets, and nothing is read or written.

A write that changes bindings is recorded for the organisation's history in its transaction
(:func:`assent.runtime.writes.record_write`), with the hashes of the scope's resolved access before and after: for an
agent, the hash an access request binds; for a guild or the organisation, that of an agent of it with no bindings of
its own.
"""

from __future__ import annotations

from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from access_contract.routes import OWNER, AgentAccess, BindingsIn, ScopeBindings
from assent.api import Caller, routes_of, serve
from assent.domain import Agent, Refusal
from assent.runtime import ServiceRuntime
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import agent_in, guild_in, org_in
from assent.runtime.writes import record_write

from .adapters.repository import AccessRepository
from .current import current
from .domain.access import Access, Scope, resolve, wanted_changes
from .views import binding_view, line_view


class Refused(Exception):
    def __init__(self, status: int, detail: str, code: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.code = status, detail, code


def store(uow: UnitOfWork) -> AccessRepository:
    return uow.store(AccessRepository)


class AccessRoutes:
    """The handlers: one unit of work per call."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self.runtime = runtime

    async def _agent_view(self, uow: UnitOfWork, agent: Agent) -> AgentAccess:
        now = await current(store(uow), agent)
        return AgentAccess(
            agent_id=agent.agent_id,
            hash=now.access.hash,
            text=now.access.text(),
            lines=[line_view(line) for line in now.access.lines],
            bindings=[binding_view(h) for h in now.held],
        )

    async def _scope_view(
        self, uow: UnitOfWork, org_id: str, scope: Literal["org", "guild"], scope_id: str
    ) -> ScopeBindings:
        held = await store(uow).bindings_of(org_id, scope_id if scope == "guild" else None, None)
        return ScopeBindings(
            scope=scope,
            scope_id=scope_id,
            bindings=[binding_view(h) for h in held if h.binding.scope == scope],
        )

    async def _write(
        self, uow: UnitOfWork, actor: str, org_id: str, scope: Scope, scope_id: str, access: Access, body: BindingsIn
    ) -> int:
        """Write the bindings ``body`` asks of the scope; answers how many changed."""
        repo = store(uow)
        held = await repo.bindings_of(
            org_id, scope_id if scope == "guild" else None, scope_id if scope == "agent" else None
        )
        changes = wanted_changes(
            access,
            [h.binding for h in held],
            scope,
            body.native_tools or {},
            body.connections or {},
            body.connection_tools or {},
        )
        if isinstance(changes, Refusal):
            raise Refused(changes.status, changes.message, changes.code)
        await repo.write(org_id, scope, scope_id, changes, actor=actor)
        return len(changes)

    async def agent_access(self, caller: Caller, agent_id: str) -> AgentAccess:
        async with self.runtime.unit_of_work() as uow:
            return await self._agent_view(uow, await agent_in(uow, agent_id, caller.org))

    async def set_agent_access(self, caller: Caller, agent_id: str, body: BindingsIn) -> AgentAccess:
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            await store(uow).lock_org(agent.org_id)
            now = await current(store(uow), agent)
            changed = await self._write(uow, actor, agent.org_id, "agent", agent.agent_id, now.access, body)
            view = await self._agent_view(uow, agent)
            if changed:
                await record_write(
                    uow,
                    "set_agent_access",
                    org_id=agent.org_id,
                    guild_id=agent.guild_id,
                    agent_id=agent.agent_id,
                    kind="access",
                    action="edit",
                    target=f"Access of {agent.name}",
                    actor=actor,
                    hash_before=now.access.hash,
                    hash_after=view.hash,
                    detail=_changed(changed),
                )
            return view

    async def guild_access(self, caller: Caller, guild_id: str) -> ScopeBindings:
        async with self.runtime.unit_of_work() as uow:
            org_id = (await guild_in(uow, guild_id, caller.org)).org_id
            return await self._scope_view(uow, org_id, "guild", guild_id)

    async def set_guild_access(self, caller: Caller, guild_id: str, body: BindingsIn) -> ScopeBindings:
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            guild = await guild_in(uow, guild_id, caller.org)
            org_id = guild.org_id
            repo = store(uow)
            await repo.lock_org(org_id)
            access = resolve(await repo.reachable(org_id, guild_id, None), [])
            before = await _scope_access(repo, org_id, guild_id)
            changed = await self._write(uow, actor, org_id, "guild", guild_id, access, body)
            if changed:
                after = await _scope_access(repo, org_id, guild_id)
                await record_write(
                    uow,
                    "set_guild_access",
                    org_id=org_id,
                    guild_id=guild_id,
                    kind="access",
                    action="edit",
                    target=f"Access of guild {guild.name}",
                    actor=actor,
                    hash_before=before.hash,
                    hash_after=after.hash,
                    detail=_changed(changed),
                )
            return await self._scope_view(uow, org_id, "guild", guild_id)

    async def org_access(self, caller: Caller, org_id: str) -> ScopeBindings:
        async with self.runtime.unit_of_work() as uow:
            await org_in(uow, org_id, caller.org)
            return await self._scope_view(uow, org_id, "org", org_id)

    async def set_org_access(self, caller: Caller, org_id: str, body: BindingsIn) -> ScopeBindings:
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            await org_in(uow, org_id, caller.org)
            if caller.org is not None and "admin" not in caller.roles:
                raise Refused(403, "binding at the organisation needs the admin role", "admin_only")
            repo = store(uow)
            await repo.lock_org(org_id)
            access = resolve(await repo.reachable(org_id, None, None), [])
            before = await _scope_access(repo, org_id, None)
            changed = await self._write(uow, actor, org_id, "org", org_id, access, body)
            if changed:
                after = await _scope_access(repo, org_id, None)
                await record_write(
                    uow,
                    "set_org_access",
                    org_id=org_id,
                    kind="access",
                    action="edit",
                    target="Access of the organisation",
                    actor=actor,
                    hash_before=before.hash,
                    hash_after=after.hash,
                    detail=_changed(changed),
                )
            return await self._scope_view(uow, org_id, "org", org_id)


async def _scope_access(repo: AccessRepository, org_id: str, guild_id: str | None) -> Access:
    """The access an agent of the guild (None: of the organisation, in no guild) with no bindings of its own
    resolves: what a write at the guild's or the organisation's scope changes."""
    held = await repo.bindings_of(org_id, guild_id, None)
    return resolve(await repo.reachable(org_id, guild_id, None), [h.binding for h in held])


def _changed(n: int) -> str:
    return f"{n} binding{'s' if n != 1 else ''} changed"


def install(app: FastAPI, runtime: ServiceRuntime) -> None:
    """Serve the declared routes on the internal API, with their refusals as JSON errors."""
    router = runtime.internal_router()
    serve(router, routes_of(OWNER), AccessRoutes(runtime))
    app.include_router(router)

    @app.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "code": exc.code}, status_code=exc.status)
