"""Reverting an applied request: ``POST /api/studio/sessions/{session_id}/{endpoint}/{seq}/revert``, one route for
each endpoint decided by session and message where a kind of the registry is :attr:`~assent.kinds.KindSpec.revertible`.

A revert is a new request, never a write: the gateway checks what it can tell itself (the caller's organisation owns
the session, else 404; the caller may decide the request, else 403; its kind is revertible, else 422; it was applied,
else 409), opens a session of its own for the person who asks (``SessionOpened``, the person as its operator, on the
original session's source guild, named "Revert"; closed at once, since no coach calls a tool in it), and asks the
request's owner to file the inverse there as its first request (``POST /internal/proposals/{id}/revert``). The owner
computes the inverse by its kind's own rule, bound to the target as it is now, and files it as a proposal of that
session, announced as any other; it may refuse (409: the target already reads as before, or what it was before is
not kept). The new request is then decided as any other: the same
routes, the stale rule, the organisation's policy (whose approvals do not count the person who asked: they run its
session), Apply all and the history. The answer (201) says where it is, once the projection holds it.

Nothing here names a kind: which kinds are revertible, and where their requests are decided, comes from the registry.
"""

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from assent.api import Error, Identity, caller_headers
from assent.contracts import CoachInfo, SessionClosed, SessionOpened
from assent.http import PathId
from assent.kinds import KINDS
from assent.topics import STUDIO_SESSIONS

from . import handlers
from .adapters.owners import Owners, segment
from .adapters.projection import ProjectionStore
from .answers import KAFKA_STALLED, PERSON_ERRORS
from .decisions import ADDRESSES, ENDPOINTS, address_of, decision_path, refusal

SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]
FIRST_SEQ = 1
"""The seq of the revert request in the session opened for it."""
REVERTER = CoachInfo(name="Revert")
"""The name a revert's session goes by where a coach's would (its request's reason says what it reverts)."""
POLL_SECONDS = 0.1


class Reverting(BaseModel):
    """The request a revert reverts."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    proposal_id: str


class RevertFiled(BaseModel):
    """Where the new request is: its session (opened for the person who asked) and seq, the path that decides it, and
    what it reverts."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    seq: int
    proposal_id: str
    kind: str
    path: str
    """Where a decision on it is sent (``POST``), as for any request."""
    reverts: Reverting


def revert_endpoints() -> tuple[str, ...]:
    """The endpoints decided by session and message where some kind is revertible."""
    session = ADDRESSES["session"]
    return tuple(
        e
        for e in ENDPOINTS
        if address_of(e) is session and any(s.revertible for s in KINDS.values() if s.endpoint == e)
    )


def router(deps: handlers.Deps, owners: Owners, user: Any) -> APIRouter:
    """The revert route of each endpoint that has one; ``user`` is the authenticating dependency."""
    reverts = APIRouter(tags=[ADDRESSES["session"].tag or "studio"])
    for endpoint in revert_endpoints():
        reverts.add_api_route(
            ADDRESSES["session"].at(endpoint) + "/revert",
            reverting(deps, owners, user, endpoint),
            methods=["POST"],
            name=f"revert_{endpoint}",
            status_code=201,
            summary="Propose the inverse of an applied request, as a new request",
            response_model=RevertFiled,
            responses={
                **PERSON_ERRORS,
                403: {"model": Error, "description": "Reverting needs what deciding the request needs"},
                404: {"model": Error, "description": ADDRESSES["session"].missing},
                409: {
                    "model": Error,
                    "description": "The request was not applied, or its target already reads as before it",
                },
                422: {"model": Error, "description": "A request of a kind that cannot be reverted"},
                503: KAFKA_STALLED,
            },
        )
    return reverts


def reverting(deps: handlers.Deps, owners: Owners, user: Any, endpoint: str) -> Any:
    async def revert(session_id: PathId, seq: SeqPath, person: user) -> JSONResponse:
        """Propose the inverse of an applied request as a new request, bound to its target's current version, in a
        session opened for the caller; it is decided as any other. Answers where it is."""
        return await file_revert(deps, owners, person, session_id, seq, endpoint)

    return revert


async def file_revert(
    deps: handlers.Deps, owners: Owners, person: Identity, session_id: str, seq: int, endpoint: str
) -> JSONResponse:
    proposal = await handlers.proposal_at(deps, session_id, seq, person.org_id, endpoint)
    spec = KINDS[proposal.kind]
    why = refusal(person, spec, spec.applying, proposal.owners, proposal.editors)
    if why is not None:
        raise HTTPException(403, why.replace("deciding", "reverting", 1))
    if not spec.revertible:
        raise HTTPException(422, f"a {spec.name} request cannot be reverted")
    if proposal.status not in spec.applied_outcomes:
        raise HTTPException(409, f"only an applied request can be reverted; this one is {proposal.status}")
    handlers.check_kafka(deps)  # before the owner files the revert: its session is opened through the outbox
    new_session = f"ses_{uuid.uuid4().hex}"
    reply = await owners.call(
        spec.owner,
        "POST",
        f"/internal/proposals/{segment(proposal.proposal_id)}/revert",
        {"session_id": new_session, "seq": FIRST_SEQ},
        headers=caller_headers(person),
    )
    if reply.status != 201:
        detail = reply.body.get("detail") if isinstance(reply.body, dict) else None
        raise HTTPException(reply.status, detail or f"the {spec.owner} service refused the revert")
    opened = SessionOpened(
        session_id=new_session,
        org_id=person.org_id,
        source_guild_id=reply.body["source_guild_id"],
        operator_user_id=person.user_id,
        coach=REVERTER,
    )
    # No coach calls a tool in it: it is closed as soon as it is open, its one request pending a decision (a closed
    # session's requests are decided as any, and it does not linger among the open ones).
    closed = SessionClosed(session_id=new_session)
    async with deps.runtime.unit_of_work() as uow:
        for message in (opened, closed):
            await handlers.record_session_event(uow, message)
            await uow.emit(STUDIO_SESSIONS, new_session, message)
    filed = await _projected(deps, new_session, FIRST_SEQ)
    answer = RevertFiled(
        session_id=new_session,
        seq=FIRST_SEQ,
        proposal_id=reply.body["proposal_id"],
        kind=spec.name,
        path=decision_path(filed)
        if filed is not None
        else ADDRESSES["session"].at(endpoint).format(session_id=new_session, seq=FIRST_SEQ),
        reverts=Reverting(session_id=session_id, seq=seq, proposal_id=proposal.proposal_id),
    )
    return JSONResponse(answer.model_dump(mode="json"), status_code=201)


async def _projected(deps: handlers.Deps, session_id: str, seq: int) -> Any:
    """The new request once the projection holds it (None after the decision timeout: it arrives later)."""
    try:
        async with asyncio.timeout(deps.settings.decision_timeout_seconds):
            while True:
                async with deps.engine.connect() as conn:
                    found = await (await ProjectionStore.over(conn)).proposal_at(session_id, seq)
                if found is not None:
                    return found[0]
                await asyncio.sleep(POLL_SECONDS)
    except TimeoutError:
        return None
