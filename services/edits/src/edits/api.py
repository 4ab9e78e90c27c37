"""The edits service's side of its public routes (:mod:`edits_contract.workspace`): the workspace directory it owns,
direct Memory and note writes.

Each declared route has its handler here, in one class per resource; :func:`assent.api.serve` serves them on the
internal API at ``/internal`` + the route's path, where only the gateway calls them, with its service credential
(``runtime.internal_router``). The live side of cards is served by the runtime (``/internal/proposals/...``).

Organisations are walls, and this owner enforces them. On every call it makes for a person, the gateway sends
that person's organisation in the header ``X-Assent-Org`` (and their user id, ``X-Assent-User``, who every write
records):

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
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from assent.api import Caller, routes_of, serve
from assent.runtime import ServiceRuntime
from assent.runtime.uow import SqlUnitOfWork
from assent.runtime.writes import actor_of
from edits_contract import workspace as answers
from edits_contract.collections import (
    AccessIn,
    Collection,
    CollectionChange,
    CollectionDeleted,
    CollectionIn,
    CollectionPage,
    CollectionPatch,
    Page,
    RecordOut,
    RecordPatch,
    RecordsAdded,
    RecordsIn,
)
from edits_contract.drafts import DraftCard, DraftEdit
from edits_contract.workspace import (
    OWNER,
    AgentIn,
    AgentPatch,
    AgentRolesIn,
    GuildIn,
    GuildTextIn,
    MemoryIn,
    NoteAt,
    NoteDelete,
    NoteIn,
    OrgIn,
)

from . import collection_workspace, draft_workspace, note_workspace, workspace
from .settings import EditsSettings

T = TypeVar("T")


class Resource:
    """A resource's handlers, with what they share: one unit of work per call, and the byte caps."""

    def __init__(self, runtime: ServiceRuntime, settings: EditsSettings) -> None:
        self.runtime = runtime
        self.memory_cap = settings.memory_max_bytes
        self.note_cap = settings.note_max_bytes
        self.task_cap = settings.task_max_bytes

    async def run(self, work: Callable[[SqlUnitOfWork], Awaitable[T]]) -> T:
        async with self.runtime.unit_of_work() as uow:
            return await work(uow)


class Orgs(Resource):
    async def create_org(self, caller: Caller, body: OrgIn) -> answers.Org:
        actor = actor_of(caller, OWNER)
        await self.run(
            lambda uow: workspace.create_org(uow, body.org_id, body.name, caller_org=caller.org, actor=actor)
        )
        return answers.Org(org_id=body.org_id, name=body.name)


class Guilds(Resource):
    async def create_guild(self, caller: Caller, body: GuildIn) -> answers.Guild:
        actor = actor_of(caller, OWNER)
        guild = await self.run(
            lambda uow: workspace.create_guild(
                uow, body.guild_id, body.org_id, body.name, caller_org=caller.org, actor=actor
            )
        )
        return workspace.guild_view(guild)

    async def get_guild(self, caller: Caller, guild_id: str) -> answers.Guild:
        return workspace.guild_view(
            await self.run(lambda uow: workspace.get_guild(uow, guild_id, caller_org=caller.org))
        )

    async def update_guild_text(self, caller: Caller, guild_id: str, body: GuildTextIn) -> answers.GuildTextChanged:
        given = body.model_dump(exclude_unset=True)
        actor = caller.actor
        guild, changed = await self.run(
            lambda uow: workspace.change_guild_text(uow, guild_id, given, actor, caller_org=caller.org)
        )
        return answers.GuildTextChanged(
            **workspace.guild_view(guild).model_dump(), revision=guild.revision, changed=changed
        )

    async def guild_changes(self, caller: Caller, guild_id: str) -> list[answers.GuildChange]:
        return await self.run(lambda uow: workspace.guild_history(uow, guild_id, caller_org=caller.org))


class Agents(Resource):
    async def create_agent(self, caller: Caller, body: AgentIn) -> answers.CreatedAgent:
        actor = caller.actor
        memory = await self.run(
            lambda uow: workspace.create_agent(
                uow,
                body.agent_id,
                body.org_id,
                body.guild_id,
                body.name,
                body.memory,
                body.task,
                actor,
                self.memory_cap,
                caller_org=caller.org,
            )
        )
        return answers.CreatedAgent(
            agent_id=body.agent_id,
            org_id=body.org_id,
            guild_id=body.guild_id,
            name=body.name,
            live=True,
            task=body.task,
            owners=[actor],
            editors=[],
            memory=memory,
        )

    async def get_agent(self, caller: Caller, agent_id: str) -> answers.Agent:
        return workspace.agent_view(
            await self.run(lambda uow: workspace.get_agent(uow, agent_id, caller_org=caller.org))
        )

    async def update_agent(self, caller: Caller, agent_id: str, body: AgentPatch) -> answers.Agent:
        actor = actor_of(caller, OWNER)
        agent = await self.run(
            lambda uow: workspace.update_agent(uow, agent_id, body, caller_org=caller.org, actor=actor)
        )
        return workspace.agent_view(agent)

    async def set_agent_roles(self, caller: Caller, agent_id: str, body: AgentRolesIn) -> answers.Agent:
        actor = actor_of(caller, OWNER)
        agent = await self.run(
            lambda uow: workspace.set_agent_roles(
                uow, agent_id, body.owners, body.editors, caller_org=caller.org, actor=actor
            )
        )
        return workspace.agent_view(agent)


class Memory(Resource):
    async def read_memory(self, caller: Caller, agent_id: str) -> answers.Memory:
        return await self.run(lambda uow: workspace.read_memory(uow, agent_id, caller_org=caller.org))

    async def write_memory(self, caller: Caller, agent_id: str, body: MemoryIn) -> answers.Memory:
        actor = caller.actor
        return await self.run(
            lambda uow: workspace.write_memory(
                uow, agent_id, body.content, body.expected_version, actor, self.memory_cap, caller_org=caller.org
            )
        )

    async def memory_history(self, caller: Caller, agent_id: str) -> list[answers.MemoryRevision]:
        return await self.run(lambda uow: workspace.memory_history(uow, agent_id, caller_org=caller.org))


class Notes(Resource):
    async def list_notes(self, caller: Caller, org_id: str) -> list[answers.NoteSummary]:
        return await self.run(lambda uow: note_workspace.list_notes(uow, org_id, caller_org=caller.org))

    async def read_note(self, caller: Caller, org_id: str, query: NoteAt) -> answers.Note:
        return await self.run(lambda uow: note_workspace.read_note(uow, org_id, query.path, caller_org=caller.org))

    async def write_note(self, caller: Caller, org_id: str, query: NoteAt, body: NoteIn) -> answers.Note:
        actor = caller.actor
        return await self.run(
            lambda uow: note_workspace.write_note(
                uow,
                org_id,
                query.path,
                body.content,
                body.title,
                body.expected_version,
                actor,
                self.note_cap,
                caller_org=caller.org,
            )
        )

    async def delete_note(self, caller: Caller, org_id: str, query: NoteDelete) -> answers.NoteDeleted:
        actor = caller.actor
        return await self.run(
            lambda uow: note_workspace.delete_note(
                uow, org_id, query.path, query.expected_version, actor, caller_org=caller.org
            )
        )

    async def note_history(self, caller: Caller, org_id: str, query: NoteAt) -> answers.NoteHistory:
        return await self.run(lambda uow: note_workspace.note_history(uow, org_id, query.path, caller_org=caller.org))


class Collections(Resource):
    async def list_collections(self, caller: Caller, org_id: str) -> list[Collection]:
        return await self.run(lambda uow: collection_workspace.list_collections(uow, org_id, caller_org=caller.org))

    async def create_collection(self, caller: Caller, org_id: str, body: CollectionIn) -> Collection:
        return await self.run(
            lambda uow: collection_workspace.create_collection(
                uow,
                org_id,
                body.name,
                body.purpose,
                body.scope,
                body.guild_id,
                body.columns,
                caller.actor,
                caller_org=caller.org,
            )
        )

    async def read_collection(self, caller: Caller, org_id: str, collection_id: str, query: Page) -> CollectionPage:
        return await self.run(
            lambda uow: collection_workspace.read_collection(
                uow, org_id, collection_id, query.offset, query.limit, caller_org=caller.org
            )
        )

    async def update_collection(
        self, caller: Caller, org_id: str, collection_id: str, body: CollectionPatch
    ) -> Collection:
        return await self.run(
            lambda uow: collection_workspace.update_collection(
                uow, org_id, collection_id, body, caller.actor, caller_org=caller.org
            )
        )

    async def delete_collection(self, caller: Caller, org_id: str, collection_id: str) -> CollectionDeleted:
        return await self.run(
            lambda uow: collection_workspace.delete_collection(
                uow, org_id, collection_id, caller.actor, caller_org=caller.org
            )
        )

    async def add_collection_records(
        self, caller: Caller, org_id: str, collection_id: str, body: RecordsIn
    ) -> RecordsAdded:
        return await self.run(
            lambda uow: collection_workspace.add_records(
                uow, org_id, collection_id, body.records, caller.actor, caller_org=caller.org
            )
        )

    async def update_collection_record(
        self, caller: Caller, org_id: str, collection_id: str, body: RecordPatch
    ) -> RecordOut:
        return await self.run(
            lambda uow: collection_workspace.update_record(
                uow, org_id, collection_id, body.record_id, body.values, caller.actor, caller_org=caller.org
            )
        )

    async def set_collection_access(
        self, caller: Caller, org_id: str, collection_id: str, body: AccessIn
    ) -> Collection:
        return await self.run(
            lambda uow: collection_workspace.set_access(
                uow, org_id, collection_id, body.kind, body.subject_id, body.mode, caller.actor, caller_org=caller.org
            )
        )

    async def collection_changes(self, caller: Caller, org_id: str, collection_id: str) -> list[CollectionChange]:
        return await self.run(
            lambda uow: collection_workspace.collection_changes(uow, org_id, collection_id, caller_org=caller.org)
        )


class Drafts(Resource):
    async def read_draft(self, caller: Caller, session_id: str, seq: int) -> DraftCard:
        return await self.run(lambda uow: draft_workspace.read_draft(uow, session_id, seq, caller_org=caller.org))

    async def edit_draft(self, caller: Caller, session_id: str, seq: int, body: DraftEdit) -> DraftCard:
        actor = caller.actor
        return await self.run(
            lambda uow: draft_workspace.edit_draft(
                uow, session_id, seq, body.content, body.expected_version, actor, self.task_cap, caller_org=caller.org
            )
        )


RESOURCES = (Orgs, Guilds, Agents, Memory, Notes, Collections, Drafts)
"""The classes that handle the edits service's declared routes, one per resource."""


def install(app: FastAPI, runtime: ServiceRuntime, settings: EditsSettings) -> None:
    router = runtime.internal_router(tags=["workspace"])
    serve(router, routes_of(OWNER), *(resource(runtime, settings) for resource in RESOURCES))
    app.include_router(router)

    @app.exception_handler(workspace.Conflict)
    async def conflict(_: Request, exc: workspace.Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(workspace.Refused)
    async def refused(_: Request, exc: workspace.Refused) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "code": exc.code}, status_code=422)
