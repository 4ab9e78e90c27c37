"""The edits service's internal HTTP API: live reads for the gateway and the workspace operations.

Only the gateway calls it; it is not exposed to clients and carries no authentication of its own.
"""

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from assent.contracts import Id, Text

from . import workspace
from .handlers import Deps

Name = Id
SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]
PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class OrgIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    org_id: Name
    name: Name


class GuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guild_id: Name
    org_id: Name
    name: Name


class AgentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: Name
    org_id: Name
    guild_id: Name | None
    name: Name
    memory: Text = ""
    actor: Name


class AgentPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guild_id: Name | None = None
    live: bool = True  # sent or not; never null (exclude_unset keeps the default out)


class MemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Text
    expected_version: int | None = Field(None, ge=0)
    actor: Name


def install(app: FastAPI, deps: Deps) -> None:
    router = APIRouter(prefix="/internal")
    engine = deps.engine

    @router.post("/orgs", status_code=201)
    async def create_org(body: OrgIn) -> dict[str, Any]:
        await workspace.create_org(engine, body.org_id, body.name)
        return body.model_dump()

    @router.post("/guilds", status_code=201)
    async def create_guild(body: GuildIn) -> dict[str, Any]:
        await workspace.create_guild(engine, body.guild_id, body.org_id, body.name)
        return body.model_dump()

    @router.post("/agents", status_code=201)
    async def create_agent(body: AgentIn) -> dict[str, Any]:
        live = await workspace.create_agent(
            engine, body.agent_id, body.org_id, body.guild_id, body.name, body.memory, body.actor
        )
        return {**body.model_dump(exclude={"memory", "actor"}), "live": True, "memory": vars(live)}

    @router.get("/agents/{agent_id}")
    async def get_agent(agent_id: PathId) -> dict[str, Any]:
        return await workspace.get_agent(engine, agent_id)

    @router.patch("/agents/{agent_id}")
    async def update_agent(agent_id: PathId, body: AgentPatch) -> dict[str, Any]:
        return await workspace.update_agent(engine, agent_id, body.model_dump(exclude_unset=True))

    @router.get("/agents/{agent_id}/memory")
    async def read_memory(agent_id: PathId) -> dict[str, Any]:
        return vars(await workspace.read_memory(engine, agent_id))

    @router.put("/agents/{agent_id}/memory")
    async def write_memory(agent_id: PathId, body: MemoryIn) -> dict[str, Any]:
        return vars(await workspace.write_memory(engine, agent_id, body.content, body.expected_version, body.actor))

    @router.get("/agents/{agent_id}/memory/history")
    async def memory_history(agent_id: PathId) -> list[dict[str, Any]]:
        await workspace.read_memory(engine, agent_id)
        return await workspace.memory_history(engine, agent_id)

    app.include_router(router)

    @app.exception_handler(workspace.NotFound)
    async def not_found(_: Request, exc: workspace.NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(workspace.Conflict)
    async def conflict(_: Request, exc: workspace.Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)
