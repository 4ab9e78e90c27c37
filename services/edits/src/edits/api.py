"""The edits service's internal HTTP API: the workspace directory it owns, direct Memory and note writes.

Only the gateway calls it, with its service credential (``runtime.internal_router``). The live side of
cards is served by the runtime (``/internal/proposals/...``).

Organisations are walls, and this owner enforces them. On every call it makes for a person, the gateway sends
that person's organisation in the header ``X-Assent-Org``:

* present: the call sees only that organisation. An agent, guild or note of another organisation is answered
  404 with the very wording a missing one gets (``agent 'a' does not exist``, ``guild 'g' does not exist``,
  ``org 'o' does not exist`` for an ``/orgs/{org_id}/...`` route whose ``org_id`` is not the header's), so the
  answer does not tell whether the other organisation's entity exists; nothing is written. A create
  (``POST /orgs``, ``/guilds``, ``/agents``) whose body names another ``org_id`` is answered as a create in an
  org that does not exist: 404 ``org 'o' does not exist`` (for ``/agents`` with a ``guild_id``,
  ``guild 'g' does not exist in org 'o'``), even for ``POST /orgs`` where the org would be new: a person
  creates only their own org, and a 403 or a 409 would tell another org's existence. A ``guild_id`` of another
  org in ``PATCH /agents/{id}`` is a guild that does not exist in the agent's org (404). The entity's org is
  checked in the unit of work of the read or write itself, not in a separate request.
* present but not an identifier (empty, too long, control characters): 422; the wall never silently opens.
* absent: a service's own call (tests of the internal API, tools): no wall applies. The service credential
  (``runtime.internal_router``) is what admits a caller at all; only services hold it, and the gateway is the
  one that must send the header for people.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from assent.contracts import Id, Text
from assent.runtime import ServiceRuntime
from assent.runtime.uow import SqlUnitOfWork
from assent.runtime.walls import CallerOrg

from . import note_workspace, workspace
from .settings import EditsSettings

PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
T = TypeVar("T")


class OrgIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    org_id: Id
    name: Id


class GuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guild_id: Id
    org_id: Id
    name: Id


class AgentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: Id
    org_id: Id
    guild_id: Id | None
    name: Id
    memory: Text = ""
    task: Text = ""
    actor: Id


class AgentPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guild_id: Id | None = None
    live: bool = True  # sent or not; never null (exclude_unset keeps the default out)
    name: Id = "agent"
    task: Text = ""


class GuildTextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    about: Text | None = None
    description: Text | None = None
    actor: Id


class AgentRolesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    owners: list[Id] = Field(default_factory=list, max_length=100)
    editors: list[Id] = Field(default_factory=list, max_length=100)


class MemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Text
    expected_version: int | None = Field(None, ge=0, le=2_147_483_647)
    actor: Id


class NoteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Text
    title: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    expected_version: int | None = Field(None, ge=0, le=2_147_483_647)
    actor: Id


NotePath = Annotated[str, Query(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A note's display path: ``agent/<agent_id>/<key>``, ``guild/<guild_id>/<key>`` or ``org/<key>``."""


def install(app: FastAPI, runtime: ServiceRuntime, settings: EditsSettings) -> None:
    router = runtime.internal_router(tags=["workspace"])
    cap = settings.memory_max_bytes

    async def run(work: Callable[[SqlUnitOfWork], Awaitable[T]]) -> T:
        async with runtime.unit_of_work() as uow:
            return await work(uow)

    @router.post("/orgs", status_code=201)
    async def create_org(body: OrgIn, org: CallerOrg) -> dict[str, Any]:
        await run(lambda uow: workspace.create_org(uow, body.org_id, body.name, caller_org=org))
        return body.model_dump()

    @router.post("/guilds", status_code=201)
    async def create_guild(body: GuildIn, org: CallerOrg) -> dict[str, Any]:
        guild = await run(
            lambda uow: workspace.create_guild(uow, body.guild_id, body.org_id, body.name, caller_org=org)
        )
        return workspace.guild_view(guild)

    @router.get("/guilds/{guild_id}")
    async def get_guild(guild_id: PathId, org: CallerOrg) -> dict[str, Any]:
        return workspace.guild_view(await run(lambda uow: workspace.get_guild(uow, guild_id, caller_org=org)))

    @router.patch("/guilds/{guild_id}")
    async def update_guild_text(guild_id: PathId, body: GuildTextIn, org: CallerOrg) -> dict[str, Any]:
        given = body.model_dump(exclude={"actor"}, exclude_none=True)
        guild, changed = await run(
            lambda uow: workspace.change_guild_text(uow, guild_id, given, body.actor, caller_org=org)
        )
        return {**workspace.guild_view(guild), "revision": guild.revision, "changed": changed}

    @router.get("/guilds/{guild_id}/changes")
    async def guild_changes(guild_id: PathId, org: CallerOrg) -> list[dict[str, Any]]:
        return await run(lambda uow: workspace.guild_history(uow, guild_id, caller_org=org))

    @router.post("/agents", status_code=201)
    async def create_agent(body: AgentIn, org: CallerOrg) -> dict[str, Any]:
        live = await run(
            lambda uow: workspace.create_agent(
                uow,
                body.agent_id,
                body.org_id,
                body.guild_id,
                body.name,
                body.memory,
                body.task,
                body.actor,
                cap,
                caller_org=org,
            )
        )
        return {**body.model_dump(exclude={"memory", "actor"}), "live": True, "memory": vars(live)}

    @router.get("/agents/{agent_id}")
    async def get_agent(agent_id: PathId, org: CallerOrg) -> dict[str, Any]:
        return workspace.agent_view(await run(lambda uow: workspace.get_agent(uow, agent_id, caller_org=org)))

    @router.put("/agents/{agent_id}/roles")
    async def set_agent_roles(agent_id: PathId, body: AgentRolesIn, org: CallerOrg) -> dict[str, Any]:
        return workspace.agent_view(
            await run(lambda uow: workspace.set_agent_roles(uow, agent_id, body.owners, body.editors, caller_org=org))
        )

    @router.patch("/agents/{agent_id}")
    async def update_agent(agent_id: PathId, body: AgentPatch, org: CallerOrg) -> dict[str, Any]:
        changes = body.model_dump(exclude_unset=True)
        return workspace.agent_view(
            await run(lambda uow: workspace.update_agent(uow, agent_id, changes, caller_org=org))
        )

    @router.get("/agents/{agent_id}/memory")
    async def read_memory(agent_id: PathId, org: CallerOrg) -> dict[str, Any]:
        return vars(await run(lambda uow: workspace.read_memory(uow, agent_id, caller_org=org)))

    @router.put("/agents/{agent_id}/memory")
    async def write_memory(agent_id: PathId, body: MemoryIn, org: CallerOrg) -> dict[str, Any]:
        view = await run(
            lambda uow: workspace.write_memory(
                uow, agent_id, body.content, body.expected_version, body.actor, cap, caller_org=org
            )
        )
        return vars(view)

    @router.get("/agents/{agent_id}/memory/history")
    async def memory_history(agent_id: PathId, org: CallerOrg) -> list[dict[str, Any]]:
        return await run(lambda uow: workspace.memory_history(uow, agent_id, caller_org=org))

    note_cap = settings.note_max_bytes

    @router.get("/orgs/{org_id}/notes")
    async def list_notes(org_id: PathId, org: CallerOrg) -> list[dict[str, Any]]:
        return await run(lambda uow: note_workspace.list_notes(uow, org_id, caller_org=org))

    @router.get("/orgs/{org_id}/note")
    async def read_note(org_id: PathId, path: NotePath, org: CallerOrg) -> dict[str, Any]:
        return await run(lambda uow: note_workspace.read_note(uow, org_id, path, caller_org=org))

    @router.put("/orgs/{org_id}/note")
    async def write_note(org_id: PathId, path: NotePath, body: NoteIn, org: CallerOrg) -> dict[str, Any]:
        return await run(
            lambda uow: note_workspace.write_note(
                uow,
                org_id,
                path,
                body.content,
                body.title,
                body.expected_version,
                body.actor,
                note_cap,
                caller_org=org,
            )
        )

    @router.delete("/orgs/{org_id}/note")
    async def delete_note(
        org_id: PathId,
        path: NotePath,
        actor: Annotated[str, Query(min_length=1, max_length=200)],
        org: CallerOrg,
        expected_version: Annotated[int | None, Query(ge=0, le=2_147_483_647)] = None,
    ) -> dict[str, Any]:
        return await run(
            lambda uow: note_workspace.delete_note(uow, org_id, path, expected_version, actor, caller_org=org)
        )

    @router.get("/orgs/{org_id}/note/history")
    async def note_history(org_id: PathId, path: NotePath, org: CallerOrg) -> dict[str, Any]:
        return await run(lambda uow: note_workspace.note_history(uow, org_id, path, caller_org=org))

    app.include_router(router)

    @app.exception_handler(workspace.NotFound)
    async def not_found(_: Request, exc: workspace.NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(workspace.Conflict)
    async def conflict(_: Request, exc: workspace.Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(workspace.Refused)
    async def refused(_: Request, exc: workspace.Refused) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "code": exc.code}, status_code=422)
