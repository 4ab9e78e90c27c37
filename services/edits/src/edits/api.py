"""The edits service's internal HTTP API: the workspace directory it owns, direct Memory and note writes.

Only the gateway calls it, with its service credential (``runtime.internal_router``). The live side of
cards is served by the runtime (``/internal/proposals/...``).
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
    async def create_org(body: OrgIn) -> dict[str, Any]:
        await run(lambda uow: workspace.create_org(uow, body.org_id, body.name))
        return body.model_dump()

    @router.post("/guilds", status_code=201)
    async def create_guild(body: GuildIn) -> dict[str, Any]:
        guild = await run(lambda uow: workspace.create_guild(uow, body.guild_id, body.org_id, body.name))
        return workspace.guild_view(guild)

    @router.get("/guilds/{guild_id}")
    async def get_guild(guild_id: PathId) -> dict[str, Any]:
        return workspace.guild_view(await run(lambda uow: workspace.get_guild(uow, guild_id)))

    @router.patch("/guilds/{guild_id}")
    async def update_guild_text(guild_id: PathId, body: GuildTextIn) -> dict[str, Any]:
        given = body.model_dump(exclude={"actor"}, exclude_none=True)
        guild, changed = await run(lambda uow: workspace.change_guild_text(uow, guild_id, given, body.actor))
        return {**workspace.guild_view(guild), "revision": guild.revision, "changed": changed}

    @router.get("/guilds/{guild_id}/changes")
    async def guild_changes(guild_id: PathId) -> list[dict[str, Any]]:
        return await run(lambda uow: workspace.guild_history(uow, guild_id))

    @router.post("/agents", status_code=201)
    async def create_agent(body: AgentIn) -> dict[str, Any]:
        live = await run(
            lambda uow: workspace.create_agent(
                uow, body.agent_id, body.org_id, body.guild_id, body.name, body.memory, body.task, body.actor, cap
            )
        )
        return {**body.model_dump(exclude={"memory", "actor"}), "live": True, "memory": vars(live)}

    @router.get("/agents/{agent_id}")
    async def get_agent(agent_id: PathId) -> dict[str, Any]:
        return workspace.agent_view(await run(lambda uow: workspace.get_agent(uow, agent_id)))

    @router.patch("/agents/{agent_id}")
    async def update_agent(agent_id: PathId, body: AgentPatch) -> dict[str, Any]:
        changes = body.model_dump(exclude_unset=True)
        return workspace.agent_view(await run(lambda uow: workspace.update_agent(uow, agent_id, changes)))

    @router.get("/agents/{agent_id}/memory")
    async def read_memory(agent_id: PathId) -> dict[str, Any]:
        return vars(await run(lambda uow: workspace.read_memory(uow, agent_id)))

    @router.put("/agents/{agent_id}/memory")
    async def write_memory(agent_id: PathId, body: MemoryIn) -> dict[str, Any]:
        view = await run(
            lambda uow: workspace.write_memory(uow, agent_id, body.content, body.expected_version, body.actor, cap)
        )
        return vars(view)

    @router.get("/agents/{agent_id}/memory/history")
    async def memory_history(agent_id: PathId) -> list[dict[str, Any]]:
        return await run(lambda uow: workspace.memory_history(uow, agent_id))

    note_cap = settings.note_max_bytes

    @router.get("/orgs/{org_id}/notes")
    async def list_notes(org_id: PathId) -> list[dict[str, Any]]:
        return await run(lambda uow: note_workspace.list_notes(uow, org_id))

    @router.get("/orgs/{org_id}/note")
    async def read_note(org_id: PathId, path: NotePath) -> dict[str, Any]:
        return await run(lambda uow: note_workspace.read_note(uow, org_id, path))

    @router.put("/orgs/{org_id}/note")
    async def write_note(org_id: PathId, path: NotePath, body: NoteIn) -> dict[str, Any]:
        return await run(
            lambda uow: note_workspace.write_note(
                uow, org_id, path, body.content, body.title, body.expected_version, body.actor, note_cap
            )
        )

    @router.delete("/orgs/{org_id}/note")
    async def delete_note(
        org_id: PathId,
        path: NotePath,
        actor: Annotated[str, Query(min_length=1, max_length=200)],
        expected_version: Annotated[int | None, Query(ge=0, le=2_147_483_647)] = None,
    ) -> dict[str, Any]:
        return await run(lambda uow: note_workspace.delete_note(uow, org_id, path, expected_version, actor))

    @router.get("/orgs/{org_id}/note/history")
    async def note_history(org_id: PathId, path: NotePath) -> dict[str, Any]:
        return await run(lambda uow: note_workspace.note_history(uow, org_id, path))

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
