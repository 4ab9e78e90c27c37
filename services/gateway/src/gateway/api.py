"""The public HTTP API: the studio endpoints (pending items, cards, decisions, Continue, the live event stream),
the gateway's own, and every owner's declared routes (:mod:`gateway.owner_routes`).

Every endpoint needs a bearer token (but a provider's signed webhook). Client mistakes get 4xx with an
:class:`~assent.api.Error` body that says why; an owner that does not answer is 503; a write that would send a message
while Kafka takes none of the gateway's is 503 with ``retry``, before anything is recorded
(:func:`gateway.handlers.check_kafka`); a decision whose outcome is late is 504 and still stands. The gateway names no
kind and no owner's route: the decisions it takes come from the kind registry, the owners' routes from
:data:`assent.api.ROUTES`.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel

from assent.api import ROUTES, Error, Identity, Permission
from assent.api.resolution import Resolution
from assent.contracts import DecisionSummary, LineCounts, ProposalBase, ProposalTarget
from assent.hashing import unified_diff
from assent.http import RETRY_AFTER_SECONDS, PathId
from assent.kinds import KINDS
from assent.runtime import LiveCard

from . import activity, decisions, handlers, history, owner_routes, policies, reverts, webhooks
from .adapters.owners import Owners, OwnerUnavailable
from .answers import KAFKA_STALLED, PERSON_ERRORS, awaiting_answer
from .auth import AgentNotFound, Authenticator, Gate
from .domain.events import Stream
from .domain.history import History
from .domain.proposals import Proposal
from .handlers import Deps

log = logging.getLogger(__name__)

SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]
KEEP_ALIVE_SECONDS = 15.0
"""A live stream with nothing to say writes a comment this often (proxies keep it open; a gone client is found)."""
NO_SESSION: dict[int | str, dict[str, Any]] = {
    404: {"model": Error, "description": "No such session in the caller's organisation"}
}


class FieldDiff(BaseModel):
    """One field of a card: the live text now beside the proposal, and a unified diff between them."""

    name: str
    live: str | None
    proposal: str | None
    diff: str
    lines: LineCounts


class LiveSide(BaseModel):
    """The target as its owner holds it now: its text (None: it does not exist), version and hash."""

    text: str | None
    version: int | None
    hash: str | None


class ProposedSide(BaseModel):
    """The target as the proposal would leave it: its text and hash."""

    text: str
    hash: str


class ProposalView(BaseModel):
    """A card: the target, the proposal, the live side now as the owner tells it, and one diff per field. A proposal
    that is no longer pending shows as it was proposed: its live side is the target's text when proposed (the base it
    was bound to), beside its resolution."""

    session_id: str
    seq: int
    proposal_id: str
    kind: str
    action: str
    status: str
    stale: bool
    target: ProposalTarget
    base: ProposalBase
    lines: LineCounts
    widens: bool = False
    """Whether applying it widens what an agent can do, as its owner judged it when proposing (Apply all skips it)."""
    reason: str
    apply_label: str
    decline_label: str
    live: LiveSide
    proposal: ProposedSide
    diff: str
    fields: list[FieldDiff]
    notes: list[str]
    effects: list[str]
    resolution: Resolution | None


class Continued(BaseModel):
    """The paused turn's continuation (a ``TurnContinuation``), sent again; ``sends``: how often it was sent."""

    id: str
    session_id: str
    turn_id: str
    step: int
    decisions: list[DecisionSummary]
    text: str
    sends: int


def _resolution(proposal: Proposal, history: History | None = None) -> Resolution | None:
    """How ``proposal`` was resolved, with its ``history`` (None while it is pending)."""
    if proposal.status == "pending":
        return None
    history = history or History()
    return Resolution(
        status=proposal.status,
        resolved_by=proposal.resolved_by,
        resolved_at=proposal.resolved_at,
        detail=history.detail,
        decisions=history.decisions,
        told=history.told,
    )


async def resolution_in(deps: Deps, org_id: str, answer: dict[str, Any]) -> dict[str, Any] | None:
    """The resolution of the decided proposal an owner's answer reads (None while it is pending, or when the answer
    names none of ``org_id``'s), as JSON."""
    found = await handlers.decided_in(deps, org_id, answer)
    if found is None:
        return None
    resolution = _resolution(*found)
    return None if resolution is None else resolution.model_dump(mode="json")


def install(app: FastAPI, deps: Deps, owners: Owners) -> None:
    """Add the public routes to ``app``: the studio's, the decision route of each endpoint of the kind registry
    (:mod:`gateway.decisions`) and the revert routes
    (:mod:`gateway.reverts`), the activity feed (:mod:`gateway.activity`), the live stream of agents' Proposals
    pages, and every owner's declared route."""
    gate = Gate(Authenticator(deps.settings), lambda agent_id: handlers.agent_copy(deps, agent_id))
    user = Annotated[Identity, Depends(gate.person)]
    app.include_router(studio_router(deps, owners, user))
    app.include_router(reads_router(deps, owners, user))
    app.include_router(decisions.router(deps, owners, user))
    app.include_router(reverts.router(deps, owners, user))
    app.include_router(activity.router(deps, owners, user))
    app.include_router(history.router(deps, user))
    app.include_router(policies.router(deps, user))
    app.include_router(webhooks.router(deps, user))
    app.include_router(proposal_events_router(deps, user))
    owner_routes.mount(app, ROUTES, gate, owners, resolved=lambda org, answer: resolution_in(deps, org, answer))
    errors(app)


def studio_router(deps: Deps, owners: Owners, user: Any) -> APIRouter:
    """The studio's routes: a session's live events, a card, Continue (the tray: :mod:`gateway.desk`)."""
    studio = APIRouter(prefix="/api/studio/sessions", tags=["studio"], responses={**PERSON_ERRORS, **NO_SESSION})

    @studio.get(
        "/{session_id}/events",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}}},
    )
    async def live_events(session_id: PathId, person: user) -> StreamingResponse:
        """Server-sent events of the session: ``proposal.proposed``, ``proposal.decided``, ``turn.step_ended``,
        ``turn.continued``. The first event, ``ready``, comes once the stream is listening. Events are hints
        to re-read the pending items, not a record: a client that reconnects re-reads."""
        await handlers.check_session(deps, session_id, person.org_id)
        return StreamingResponse(
            event_stream(deps, session_id), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    @studio.post(
        "/{session_id}/continue",
        responses={
            200: {"model": Continued},
            404: {"model": Error, "description": "No such session, or it has no paused turn"},
            409: {"model": Error, "description": "The turn still waits on decisions"},
            503: KAFKA_STALLED,
        },
    )
    async def continue_turn(session_id: PathId, person: user) -> JSONResponse:
        """Send the latest paused turn's continuation again (the coach drops a copy it already has)."""
        if not person.may(Permission.CHANGE_WORKSPACE):
            raise HTTPException(403, Permission.CHANGE_WORKSPACE.refusal)
        await handlers.check_session(deps, session_id, person.org_id)
        continuation, sends = await handlers.resend_continuation(deps, session_id)
        return JSONResponse({**continuation.model_dump(mode="json"), "sends": sends})

    return studio


def reads_router(deps: Deps, owners: Owners, user: Any) -> APIRouter:
    """A ``GET`` beside each decision route addressed by session and message that no owner's route reads
    (:func:`gateway.decisions.read_endpoints`): the proposal's card there, pending or decided, behind the same walls
    as the decision (another organisation's session, or a proposal decided at another endpoint, is 404)."""
    reads = APIRouter(tags=[decisions.ADDRESSES["session"].tag or "studio"], responses=PERSON_ERRORS)
    for endpoint in decisions.read_endpoints():
        reads.add_api_route(
            decisions.ADDRESSES["session"].at(endpoint),
            reading(deps, owners, user, endpoint),
            methods=["GET"],
            name="read_proposal",
            response_model=ProposalView,
            responses={
                404: {
                    "model": Error,
                    "description": "No such session in the caller's organisation, or no proposal at that seq decided "
                    f"at …/{endpoint}/{{seq}}",
                }
            },
        )
    return reads


def reading(deps: Deps, owners: Owners, user: Any, endpoint: str) -> Any:
    """The handler of ``GET …/{endpoint}/{seq}``."""

    async def read_proposal(session_id: PathId, seq: SeqPath, person: user) -> ProposalView:
        """A pending proposal: the live side now beside the proposal, the stale flag and a unified diff per field;
        the owner of the proposal's kind tells the live side and whether it is stale, the gateway shows it. ``diff``
        is the whole target's diff; ``fields`` splits it where a card shows one per field.

        A proposal no longer pending: its card as it was proposed (the live side when proposed, not stale) and its
        ``resolution``: the outcome and its reason, every decision taken on it, and what its coach was told."""
        proposal = await handlers.proposal_at(deps, session_id, seq, person.org_id, endpoint)
        if proposal.status != "pending":
            return decided_card(proposal, await handlers.history(deps, proposal))
        live = await owners.live_card(proposal.kind, proposal.proposal_id, org=person.org_id)
        if live is None:
            raise OwnerUnavailable(f"the owner of {proposal.proposal_id!r} does not know it")
        return card(proposal, live)

    return read_proposal


def proposal_events_router(deps: Deps, user: Any) -> APIRouter:
    """The live stream of an agent's Proposals page."""
    router = APIRouter(tags=["proposals"], responses=PERSON_ERRORS)

    @router.get(
        "/api/agents/{agent_id}/proposal-events",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}},
            404: {"model": Error, "description": "No such agent in the caller's organisation"},
        },
    )
    async def proposal_events(agent_id: PathId, person: user) -> StreamingResponse:
        """Server-sent events of the agent's source proposals, from any session: ``proposal.proposed`` and
        ``proposal.decided`` (with ``proposal_id``). The first event, ``ready``, comes once the stream is listening.
        Events are hints to re-read the Proposals page, not a record: a client that reconnects re-reads."""
        agent = await handlers.agent_copy(deps, agent_id)
        if agent is None or agent.org_id != person.org_id:
            raise handlers.NotFound(f"agent {agent_id!r} does not exist")
        return StreamingResponse(
            event_stream(deps, agent_id, "proposals"),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    return router


async def event_stream(deps: Deps, session_id: str, stream: Stream = "session") -> AsyncIterator[str]:
    """A session's live events (or, with ``stream="proposals"``, an agent's Proposals page's) as server-sent events,
    ``ready`` first, a keep-alive comment when nothing happens."""
    # The server ends the stream when the client goes: under ASGI 2.3 (uvicorn) the response cancels it at
    # once, from 2.4 its next write fails, and a keep-alive is written at least every KEEP_ALIVE_SECONDS.
    # So no event waits for a check of the connection (an extra receive per event).
    async with deps.events.listen(session_id, stream) as queue:
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
            yield "".join(f"event: {event.event}\ndata: {event.data}\n\n" for event in chunk)


def card(proposal: Proposal, live: LiveCard) -> ProposalView:
    """A proposal's card: the projected proposal beside the owner's live side now, with the diffs between them.

    Each field's line counts are :attr:`~assent.contracts.CardField.lines`, the count the owner summed into the
    proposal's ``lines`` (the tray's) when it proposed: while the target is as read, the fields' counts add up to it.
    """
    proposed = proposal.card
    fields = [
        FieldDiff(
            name=field.name,
            live=field.before,
            proposal=field.after,
            diff=unified_diff(field.before or "", field.after or "", field.name),
            lines=field.lines,
        )
        for field in live.fields
    ]
    live_text = "".join(field.before or "" for field in live.fields) if live.live_hash is not None else None
    return ProposalView(
        session_id=proposal.session_id,
        seq=proposal.seq,
        proposal_id=proposal.proposal_id,
        kind=proposal.kind,
        action=proposal.action,
        status=proposal.status,
        stale=live.stale,
        target=proposal.target,
        base=proposal.base,
        lines=proposal.lines,
        widens=proposal.widens,
        reason=proposal.reason,
        apply_label=proposed.apply_label,
        decline_label=KINDS[proposal.kind].decline_label,
        live=LiveSide(text=live_text, version=live.live_version, hash=live.live_hash),
        proposal=ProposedSide(text=proposed.after, hash=proposal.proposed_hash),
        diff=unified_diff(live_text or "", proposed.after, proposal.target.label),
        fields=fields,
        notes=list(live.notes),
        effects=list(proposed.effects),
        resolution=_resolution(proposal),
    )


def decided_card(proposal: Proposal, history: History) -> ProposalView:
    """The card of a proposal that is no longer pending, from the projection alone: its fields as proposed (each
    field's text when proposed beside the proposed one), the target's text, version and hash as the proposal bound
    them (its base), never stale; and its resolution with ``history`` (the outcome's reason, the decisions, what the
    coach was told). The owner is not asked: what the target holds now is another story than this proposal's."""
    proposed = proposal.card
    fields = [
        FieldDiff(
            name=field.name,
            live=field.before,
            proposal=field.after,
            diff=unified_diff(field.before or "", field.after or "", field.name),
            lines=field.lines,
        )
        for field in proposed.fields
    ]
    base = proposal.base
    # As the pending card's live side, from the fields as proposed (the whole text where the card splits none); a
    # base that bound no hash bound that the target did not exist.
    live_text = None
    if base.hash is not None:
        live_text = "".join(field.before or "" for field in proposed.fields) if proposed.fields else proposed.before
    return ProposalView(
        session_id=proposal.session_id,
        seq=proposal.seq,
        proposal_id=proposal.proposal_id,
        kind=proposal.kind,
        action=proposal.action,
        status=proposal.status,
        stale=False,
        target=proposal.target,
        base=base,
        lines=proposal.lines,
        reason=proposal.reason,
        apply_label=proposed.apply_label,
        decline_label=KINDS[proposal.kind].decline_label,
        live=LiveSide(text=live_text, version=base.version, hash=base.hash),
        proposal=ProposedSide(text=proposed.after, hash=proposal.proposed_hash),
        diff=unified_diff(live_text or "", proposed.after, proposal.target.label),
        fields=fields,
        notes=list(proposed.notes),
        effects=list(proposed.effects),
        resolution=_resolution(proposal, history),
    )


def errors(app: FastAPI) -> None:
    """The answers of the gateway's own refusals, each an :class:`~assent.api.Error`."""

    @app.exception_handler(handlers.NotFound)
    @app.exception_handler(AgentNotFound)
    async def not_found(_: Request, exc: LookupError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(handlers.Refused)
    async def refused(_: Request, exc: handlers.Refused) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(handlers.AwaitingApprovals)
    async def awaiting(_: Request, exc: handlers.AwaitingApprovals) -> JSONResponse:
        return JSONResponse(awaiting_answer(exc), status_code=202)

    @app.exception_handler(handlers.OutcomePending)
    async def late(_: Request, exc: handlers.OutcomePending) -> JSONResponse:
        return JSONResponse(
            {"detail": "the decision was sent; its outcome has not arrived yet", "decision_id": exc.decision_id},
            status_code=504,
        )

    @app.exception_handler(handlers.KafkaStalled)
    async def stalled(request: Request, exc: handlers.KafkaStalled) -> JSONResponse:
        log.warning(
            "%s %s: Kafka has taken none of the gateway's messages for %.0f s; refused with 503",
            request.method,
            request.url.path,
            exc.waited,
        )
        return JSONResponse(
            {"detail": str(exc), "retry": True},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
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
