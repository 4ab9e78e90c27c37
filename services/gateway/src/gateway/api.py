"""The public HTTP API: the seed's studio endpoints, pending items, Continue, and the workspace API.

Every endpoint needs a bearer token. Client mistakes get 4xx with a ``detail`` that says why; an owner that
does not answer is 503; a decision whose outcome is late is 504 and still stands.
"""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from assent.contracts import Id, ProposalOutcome, Text
from assent.hashing import line_counts, unified_diff
from assent.http import RETRY_AFTER_SECONDS
from assent.kinds import KINDS, WORKSPACE_OWNER, decisions_at

from . import deploys, handlers, proposals
from .adapters.owners import Owners, OwnerUnavailable, segment
from .auth import Authenticator, Unauthenticated
from .domain.items import summarize
from .domain.roles import Identity
from .handlers import Deps

Name = Id
SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]
PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
bearer = HTTPBearer(auto_error=False, description="An API token of the operator")
KEEP_ALIVE_SECONDS = 15.0
"""A live stream with nothing to say writes a comment this often (proxies keep it open; a gone client is found)."""


class EditDecision(BaseModel):
    """A decision on an edit-like request (memory, note, guild text, collection, routine, access)."""

    model_config = ConfigDict(extra="forbid")
    decision: Literal[decisions_at("edits")]  # type: ignore[valid-type]
    via: Literal["card", "tray", "item", "chat"] = "card"


class FieldDiff(BaseModel):
    """One field of a card: the live text now beside the proposal, and a unified diff between them."""

    name: str
    live: str | None
    proposal: str | None
    diff: str
    lines: dict[str, int]


class Resolution(BaseModel):
    status: str
    resolved_by: str | None
    resolved_at: Any


class EditCard(BaseModel):
    """A card: the target, the proposal, the live side now as the owner tells it, and one diff per field."""

    session_id: str
    seq: int
    proposal_id: str
    kind: str
    action: str
    status: str
    stale: bool
    target: dict[str, Any]
    base: dict[str, Any]
    lines: dict[str, int]
    reason: str
    apply_label: str
    decline_label: str
    live: dict[str, Any]
    proposal: dict[str, Any]
    diff: str
    fields: list[FieldDiff]
    notes: list[str]
    effects: list[str]
    resolution: Resolution | None


class PendingItem(BaseModel):
    seq: int
    proposal_id: str
    turn_id: str
    kind: str
    action: str
    section: str
    agent_id: str | None
    target: dict[str, Any]
    base: dict[str, Any]
    lines: dict[str, int]
    widens: bool
    stale: bool
    apply_label: str
    decline_label: str
    reason: str
    proposed_at: Any


class Pending(BaseModel):
    """Every open request of a session, with counts per section and per agent ("Waiting on N decisions")."""

    session_id: str
    waiting_on: int
    summary: str
    sections: dict[str, int]
    agents: dict[str, int]
    items: list[PendingItem]


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
    task: Text = ""


class AgentRolesIn(BaseModel):
    """Who owns and who edits an agent, by user id; owners and editors may change the agent and decide its requests."""

    model_config = ConfigDict(extra="forbid")
    owners: list[Name] = Field(default_factory=list, max_length=100)
    editors: list[Name] = Field(default_factory=list, max_length=100)


class GuildTextIn(BaseModel):
    """A direct change of a guild's short description (``about``), description, or both."""

    model_config = ConfigDict(extra="forbid")
    about: Text | None = None
    description: Text | None = None


class AgentPatch(BaseModel):
    """Move an agent (``guild_id``; null: no guild), retire it (``live: false``), rename it or set its Task."""

    model_config = ConfigDict(extra="forbid")
    guild_id: Name | None = None
    live: bool = True  # sent or not; never null (exclude_unset keeps the default out)
    name: Name = "agent"
    task: Text = ""


class MemoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Text
    expected_version: int | None = Field(None, ge=0)


class NoteIn(BaseModel):
    """Write a note directly: its whole text, an optional title, and the version it must be at (if any)."""

    model_config = ConfigDict(extra="forbid")
    content: Text
    title: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    expected_version: int | None = Field(None, ge=0, le=2_147_483_647)


NotePath = Annotated[str, Query(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A note's display path: ``agent/<agent_id>/<key>``, ``guild/<guild_id>/<key>`` or ``org/<key>``."""


def _resolution(request: dict[str, Any]) -> dict[str, Any]:
    return {"status": request["status"], "resolved_by": request["resolved_by"], "resolved_at": request["resolved_at"]}


def install(app: FastAPI, deps: Deps, owners: Owners) -> None:
    authenticator = Authenticator(deps.settings)

    async def person(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Identity:
        """Who asks, from their bearer token; 401 without a valid one, 403 without any role."""
        try:
            identity = await authenticator.identify(credentials.credentials if credentials is not None else None)
        except Unauthenticated as exc:
            raise HTTPException(401, exc.reason, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
        if not identity.may_read():
            raise HTTPException(403, "the token carries no role in its organisation")
        return identity

    async def changer(identity: Annotated[Identity, Depends(person)]) -> Identity:
        if not identity.may_write_workspace():
            raise HTTPException(403, "changing the workspace needs the admin or developer role")
        return identity

    User = Annotated[Identity, Depends(person)]
    Changer = Annotated[Identity, Depends(changer)]

    async def may_change_agent(user: Identity, agent_id: str) -> None:
        """Admins and developers may change any agent of their organisation; its owners and editors may change it.

        For anyone else the gateway's copy of the workspace decides: an agent it does not know in the caller's
        organisation is 404 (as the owner would answer), one the caller neither owns nor edits is 403.
        """
        if user.may_write_workspace():
            return
        agent = await handlers.agent_copy(deps, agent_id)
        if agent is None or agent.org_id != user.org_id:
            raise handlers.NotFound(f"agent {agent_id!r} does not exist")
        if not user.may_change_agent(agent.owners, agent.editors):
            raise HTTPException(403, "changing this agent needs the admin or developer role, or to own or edit it")

    studio = APIRouter(prefix="/api/studio/sessions", tags=["studio"])
    workspace = APIRouter(prefix="/api/workspace", tags=["workspace"])

    @studio.get("/{session_id}/pending", response_model=Pending)
    async def pending(session_id: PathId, user: User) -> dict[str, Any]:
        """Every open request of the session, with counts per section and per agent ("Waiting on N")."""
        await handlers.check_session(deps, session_id, user.org_id)
        items = await handlers.pending_items(deps, session_id)
        for item in items:
            item["decline_label"] = KINDS[item["kind"]].decline_label
        return {"session_id": session_id, **summarize(items), "items": items}

    @studio.get("/{session_id}/events", response_class=StreamingResponse)
    async def live_events(session_id: PathId, user: User) -> StreamingResponse:
        """Server-sent events of the session: ``request.proposed``, ``request.decided``, ``turn.step_ended``,
        ``turn.continued``. The first event, ``ready``, comes once the stream is listening. Events are hints
        to re-read the pending items, not a record: a client that reconnects re-reads."""
        await handlers.check_session(deps, session_id, user.org_id)

        async def stream() -> AsyncIterator[str]:
            # The server ends the stream when the client goes: under ASGI 2.3 (uvicorn) the response cancels it at
            # once, from 2.4 its next write fails, and a keep-alive is written at least every KEEP_ALIVE_SECONDS.
            # So no event waits for a check of the connection (an extra receive per event).
            async with deps.events.listen(session_id) as queue:
                yield "event: ready\ndata: {}\n\n"
                while True:
                    try:
                        async with asyncio.timeout(KEEP_ALIVE_SECONDS):
                            event = await queue.get()
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    chunk = [event]
                    while not queue.empty():  # what arrived meanwhile goes in the same write
                        chunk.append(queue.get_nowait())
                    yield "".join(
                        f"event: {event['event']}\ndata: {json.dumps(event, default=str)}\n\n" for event in chunk
                    )

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @studio.get("/{session_id}/edits/{seq}", response_model=EditCard)
    async def read_edit(session_id: PathId, seq: SeqPath, user: User) -> dict[str, Any]:
        """The live side now beside the proposal, the stale flag and a unified diff per field.

        The owner of the request's kind tells the live side and whether the request is stale; the gateway
        shows it. ``diff`` is the whole target's diff; ``fields`` splits it where a card shows one per field.
        """
        request = await handlers.request_at(deps, session_id, seq, user.org_id)
        card = request["card"]
        live = await owners.live_card(request["kind"], request["proposal_id"], org=user.org_id)
        if live is None:
            raise OwnerUnavailable(f"the owner of {request['proposal_id']!r} does not know it")
        label = request["target"]["label"]
        fields = [
            FieldDiff(
                name=field.name,
                live=field.before,
                proposal=field.after,
                diff=unified_diff(field.before or "", field.after or "", field.name),
                lines=dict(zip(("added", "removed"), line_counts(field.before or "", field.after or ""), strict=True)),
            )
            for field in live.fields
        ]
        live_text = "".join(field.before or "" for field in live.fields) if live.live_hash is not None else None
        return {
            "session_id": session_id,
            "seq": seq,
            "proposal_id": request["proposal_id"],
            "kind": request["kind"],
            "action": request["action"],
            "status": request["status"],
            "stale": live.stale,
            "target": request["target"],
            "base": request["base"],
            "lines": request["lines"],
            "reason": request["reason"],
            "apply_label": card["apply_label"],
            "decline_label": KINDS[request["kind"]].decline_label,
            "live": {"text": live_text, "version": live.live_version, "hash": live.live_hash},
            "proposal": {"text": card["after"], "hash": request["proposed_hash"]},
            "diff": unified_diff(live_text or "", card["after"], label),
            "fields": fields,
            "notes": list(live.notes),
            "effects": list(card.get("effects", [])),
            "resolution": None if request["status"] == "pending" else _resolution(request),
        }

    @studio.post(
        "/{session_id}/edits/{seq}",
        responses={
            200: {"model": ProposalOutcome, "description": "The outcome: applied or declined"},
            404: {"description": "No edit request at that seq"},
            409: {
                "model": ProposalOutcome,
                "description": "The target changed since the coach read it (or a rule such as an embedding Task "
                "refuses it now); the request stays pending",
            },
            422: {"description": "Already decided, or a decision that does not fit the request"},
            504: {"description": "The owner has not answered yet; the decision stands"},
        },
    )
    async def decide_edit(session_id: PathId, seq: SeqPath, body: EditDecision, user: User) -> JSONResponse:
        """Apply or decline one request. Answers when the owning service has applied or refused it."""
        request = await handlers.request_at(deps, session_id, seq, user.org_id)
        if not user.may_decide(request["owners"], request["editors"]):
            raise HTTPException(
                403,
                f"deciding a {request['kind']} request needs the admin or developer role, or to own or edit its agent",
            )
        outcome = await handlers.decide(deps, request, body.decision, user.user_id, body.via)
        status = outcome["status"] if outcome["outcome"] != "failed" else 502
        return JSONResponse(outcome, status_code=status)

    @studio.post("/{session_id}/continue")
    async def continue_turn(session_id: PathId, user: Changer) -> dict[str, Any]:
        """Send the latest paused turn's continuation again (the coach drops a copy it already has)."""
        await handlers.check_session(deps, session_id, user.org_id)
        return await handlers.resend_continuation(deps, session_id)

    async def forward(owner: str, method: str, path: str, user: Identity, body: Any = None) -> JSONResponse:
        """Ask the owner on behalf of ``user``: the owner answers 404 for another organisation's entities."""
        reply = await owners.call(owner, method, path, body, org=user.org_id)
        return JSONResponse(reply.body, status_code=reply.status)

    directory = WORKSPACE_OWNER  # orgs, guilds, agents, membership, Tasks
    memory_owner = KINDS["memory"].owner

    @workspace.post("/orgs", status_code=201)
    async def create_org(body: OrgIn, user: Changer) -> JSONResponse:
        return await forward(directory, "POST", "/internal/orgs", user, body.model_dump())

    @workspace.post("/guilds", status_code=201)
    async def create_guild(body: GuildIn, user: Changer) -> JSONResponse:
        return await forward(directory, "POST", "/internal/guilds", user, body.model_dump())

    @workspace.post("/agents", status_code=201)
    async def create_agent(body: AgentIn, user: Changer) -> JSONResponse:
        return await forward(directory, "POST", "/internal/agents", user, {**body.model_dump(), "actor": user.user_id})

    @workspace.get("/agents/{agent_id}")
    async def get_agent(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(directory, "GET", f"/internal/agents/{segment(agent_id)}", user)

    @workspace.patch("/agents/{agent_id}")
    async def update_agent(agent_id: PathId, body: AgentPatch, user: User) -> JSONResponse:
        await may_change_agent(user, agent_id)
        return await forward(
            directory, "PATCH", f"/internal/agents/{segment(agent_id)}", user, body.model_dump(exclude_unset=True)
        )

    @workspace.put("/agents/{agent_id}/roles")
    async def set_agent_roles(agent_id: PathId, body: AgentRolesIn, user: User) -> JSONResponse:
        """Say who owns and who edits an agent (user ids); an organisation admin's decision."""
        if not user.may_set_agent_roles():
            raise HTTPException(403, "setting an agent's owners and editors needs the admin role")
        return await forward(directory, "PUT", f"/internal/agents/{segment(agent_id)}/roles", user, body.model_dump())

    @workspace.get("/agents/{agent_id}/memory")
    async def read_memory(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(memory_owner, "GET", f"/internal/agents/{segment(agent_id)}/memory", user)

    @workspace.put("/agents/{agent_id}/memory")
    async def write_memory(agent_id: PathId, body: MemoryIn, user: User) -> JSONResponse:
        """Write Memory directly, as the operator (not a proposal)."""
        await may_change_agent(user, agent_id)
        return await forward(
            memory_owner,
            "PUT",
            f"/internal/agents/{segment(agent_id)}/memory",
            user,
            {**body.model_dump(), "actor": user.user_id},
        )

    @workspace.get("/agents/{agent_id}/memory/history")
    async def memory_history(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(memory_owner, "GET", f"/internal/agents/{segment(agent_id)}/memory/history", user)

    @workspace.get("/guilds/{guild_id}")
    async def get_guild(guild_id: PathId, user: User) -> JSONResponse:
        """A guild with its short description (``about``) and description."""
        return await forward(directory, "GET", f"/internal/guilds/{segment(guild_id)}", user)

    @workspace.patch("/guilds/{guild_id}")
    async def update_guild_text(guild_id: PathId, body: GuildTextIn, user: Changer) -> JSONResponse:
        """Change the guild's text directly, as the operator (not a proposal); the change log records it."""
        return await forward(
            directory,
            "PATCH",
            f"/internal/guilds/{segment(guild_id)}",
            user,
            {**body.model_dump(), "actor": user.user_id},
        )

    @workspace.get("/guilds/{guild_id}/changes")
    async def guild_changes(guild_id: PathId, user: User) -> JSONResponse:
        """The guild text's change log: who changed which field, and from which request (no content)."""
        return await forward(directory, "GET", f"/internal/guilds/{segment(guild_id)}/changes", user)

    note_owner = KINDS["note"].owner

    @workspace.get("/orgs/{org_id}/notes")
    async def list_notes(org_id: PathId, user: User) -> JSONResponse:
        """Every live note of the organisation (display path, level, title, version, hash)."""
        return await forward(note_owner, "GET", f"/internal/orgs/{segment(org_id)}/notes", user)

    @workspace.get("/orgs/{org_id}/note")
    async def read_note(org_id: PathId, path: NotePath, user: User) -> JSONResponse:
        """One note by display path, with its text."""
        return await forward(
            note_owner, "GET", f"/internal/orgs/{segment(org_id)}/note?{urlencode({'path': path})}", user
        )

    @workspace.put("/orgs/{org_id}/note")
    async def write_note(org_id: PathId, path: NotePath, body: NoteIn, user: Changer) -> JSONResponse:
        """Create or replace a note directly, as the operator (not a proposal); 409 if not at expected_version."""
        query = urlencode({"path": path})
        return await forward(
            note_owner,
            "PUT",
            f"/internal/orgs/{segment(org_id)}/note?{query}",
            user,
            {**body.model_dump(), "actor": user.user_id},
        )

    @workspace.delete("/orgs/{org_id}/note")
    async def delete_note(
        org_id: PathId,
        path: NotePath,
        user: Changer,
        expected_version: Annotated[int | None, Query(ge=0, le=2_147_483_647)] = None,
    ) -> JSONResponse:
        """Delete a note directly; 409 while a Task of the organisation embeds it."""
        params: dict[str, Any] = {"path": path, "actor": user.user_id}
        if expected_version is not None:
            params["expected_version"] = expected_version
        return await forward(note_owner, "DELETE", f"/internal/orgs/{segment(org_id)}/note?{urlencode(params)}", user)

    @workspace.get("/orgs/{org_id}/note/history")
    async def note_history(org_id: PathId, path: NotePath, user: User) -> JSONResponse:
        """Every write of the note at that path: revisions and file changes, with the request behind each."""
        return await forward(
            note_owner, "GET", f"/internal/orgs/{segment(org_id)}/note/history?{urlencode({'path': path})}", user
        )

    app.include_router(studio)
    app.include_router(workspace)
    proposals.install(app, deps, User, forward, may_change_agent, owners)
    deploys.install(app, User, forward, may_change_agent, owners)

    @app.exception_handler(handlers.NotFound)
    async def not_found(_: Request, exc: handlers.NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(handlers.Refused)
    async def refused(_: Request, exc: handlers.Refused) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(handlers.OutcomePending)
    async def late(_: Request, exc: handlers.OutcomePending) -> JSONResponse:
        return JSONResponse(
            {"detail": "the decision was sent; its outcome has not arrived yet", "decision_id": exc.decision_id},
            status_code=504,
        )

    @app.exception_handler(OwnerUnavailable)
    async def unavailable(_: Request, exc: OwnerUnavailable) -> JSONResponse:
        if exc.retry:
            return JSONResponse(
                {"detail": str(exc), "retry": True},
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        return JSONResponse({"detail": str(exc)}, status_code=503)
