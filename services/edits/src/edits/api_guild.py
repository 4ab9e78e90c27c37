"""The guild text's direct write for people: ``PATCH /internal/guilds/{guild_id}`` on the edits service.

Not a proposal: the operator's (or a test's) own change of the guild's short description (``about``) and
description, under the same field limits as a request. It logs who changed which field, moves the guild's
revision and publishes ``GuildChanged``, so a pending request bound to the old text turns stale.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from assent.contracts import Id, Text
from assent.runtime import ServiceRuntime

from . import workspace
from .adapters.repository import EditsRepository
from .domain import guild as rules
from .settings import EditsSettings

PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class GuildTextPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    about: Text | None = None
    description: Text | None = None
    actor: Id


def install(app: FastAPI, runtime: ServiceRuntime, settings: EditsSettings) -> None:
    router = APIRouter(prefix="/internal", tags=["workspace"])

    @router.patch("/guilds/{guild_id}")
    async def update_guild_text(guild_id: PathId, body: GuildTextPatch) -> JSONResponse:
        given = {name: value for name in rules.FIELDS if (value := getattr(body, name)) is not None}
        if not given:
            return JSONResponse({"detail": "give about, description, or both", "code": "no_fields"}, status_code=422)
        refusal = rules.check_lengths(given)
        if refusal is not None:
            return JSONResponse({"detail": refusal.message, "code": refusal.code}, status_code=422)
        async with runtime.unit_of_work() as uow:
            guild = await uow.workspace.guild(guild_id, for_update=True)
            if guild is None:
                return JSONResponse({"detail": f"guild {guild_id!r} does not exist"}, status_code=404)
            changes = rules.changed(guild, given)
            guild = await workspace.update_guild_text(uow, guild_id, changes)
            repo: EditsRepository = uow.store("edits")
            for name in changes:
                await repo.log_guild_change(guild_id, name, body.actor, tool_call_id=None, session_id=None, seq=None)
        view: dict[str, Any] = {**workspace.guild_view(guild), "revision": guild.revision, "changed": list(changes)}
        return JSONResponse(view)

    app.include_router(router)
