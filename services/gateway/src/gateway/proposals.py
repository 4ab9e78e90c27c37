"""Decisions on the Proposals page, and the activity feed, on the public API.

The gateway knows no kind here either: the kinds decided at ``/proposals`` (source proposals) come from the kind
registry, with what an approval may choose (their :attr:`~assent.kinds.KindSpec.options`), and their owner serves
the page itself (a declared route of its contract). Decisions travel like every other one (``DecisionMade`` to the
owner, its ``ProposalOutcome`` back). The activity feed is the gateway's own record of those decisions, merged with
the owners' feeds (:data:`assent.api.FEEDS`).

Approving needs permission to edit source and manage deploys (admin or developer, or the agent's owner or editor);
discarding needs permission to review feedback (reviewers too). Another organisation's agent or proposal is 404.
"""

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, create_model
from sqlalchemy import select

from assent.api import FEEDS, Error, Permission, RequestModel
from assent.http import Identifier, PathId
from assent.kinds import KINDS, decisions_at

from . import handlers
from .adapters import tables as t
from .adapters.owners import Owners
from .answers import DECISION_ANSWERS, PERSON_ERRORS, decided
from .handlers import Deps

ENDPOINT = "proposals"
PROPOSAL_KINDS = tuple(spec.name for spec in KINDS.values() if spec.endpoint == ENDPOINT)
APPROVE = "approve"
RESOLVED = tuple(dict.fromkeys(o for name in PROPOSAL_KINDS for o in KINDS[name].decisions.values()))


def approval_options() -> dict[str, Any]:
    """The fields of what approving may choose, as the kinds decided here declare it (every one alike)."""
    options = {KINDS[name].options for name in PROPOSAL_KINDS}
    if len(options) != 1:
        raise ValueError(f"the kinds decided at {ENDPOINT!r} take {len(options)} sets of options; they must take one")
    model = options.pop()
    return {} if model is None else {name: (field.annotation, field) for name, field in model.model_fields.items()}


VIA = Literal["page", "card", "chat"]
OPTIONS = approval_options()
ProposalDecision = create_model(
    "ProposalDecision",
    __base__=RequestModel,
    decision=(Literal[decisions_at(ENDPOINT)], ...),  # type: ignore[arg-type]  # the values come from the registry
    via=(VIA, "page"),
    **OPTIONS,
)
"""A decision on the Proposals page: approve or discard, where it was taken, and what approving chooses (the
owner's options: the branch it commits onto, the commit message)."""


class ActivityEntry(BaseModel):
    who: str | None
    what: str
    when: str
    agent_id: str | None
    proposal_id: str | None
    reason: str | None = None
    """The proposal's reason (approvals and discards)."""
    detail: str | None
    links: dict[str, Any]


class Activity(BaseModel):
    entries: list[ActivityEntry]


async def request_of(deps: Deps, agent_id: str, proposal_id: str, org_id: str) -> dict[str, Any]:
    """The projected request of a proposal on the Proposals page, with its agent's owners and editors; another
    organisation's (or another agent's) is :class:`handlers.NotFound`, as a missing one is."""
    query = (
        select(t.requests, t.sessions.c.org_id.label("session_org"), t.agents.c.owners, t.agents.c.editors)
        .join(t.sessions, t.sessions.c.session_id == t.requests.c.session_id)
        .outerjoin(t.agents, t.agents.c.agent_id == t.requests.c.agent_id)
        .where(t.requests.c.proposal_id == proposal_id)
    )
    async with deps.engine.connect() as conn:
        row = (await conn.execute(query)).first()
    if row is None or row.session_org != org_id or row.agent_id != agent_id or row.kind not in PROPOSAL_KINDS:
        raise handlers.NotFound(f"agent {agent_id!r} has no proposal {proposal_id!r}")
    request = dict(row._mapping)
    request["owners"], request["editors"] = tuple(row.owners or ()), tuple(row.editors or ())
    return request


async def activity(deps: Deps, org_id: str, agent_id: str | None, limit: int) -> list[dict[str, Any]]:
    """Approvals and discards of the organisation's proposals, newest first: who, what, when, and links."""
    d, r = t.decisions, t.requests
    query = (
        select(d.c.actor, d.c.decision, d.c.decided_at, d.c.outcome, d.c.outcome_at, r.c.agent_id, r.c.proposal_id)
        .add_columns(r.c.session_id, r.c.seq, r.c.kind, r.c.card, r.c.reason)
        .join(r, r.c.proposal_id == d.c.proposal_id)
        .join(t.sessions, t.sessions.c.session_id == r.c.session_id)
        .where(
            t.sessions.c.org_id == org_id,
            r.c.kind.in_(PROPOSAL_KINDS),
            d.c.outcome.is_not(None),
            d.c.outcome["outcome"].astext.in_(RESOLVED),
        )
        .order_by(d.c.outcome_at.desc())
        .limit(limit)
    )
    if agent_id is not None:
        query = query.where(r.c.agent_id == agent_id)
    async with deps.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    entries = []
    for row in rows:
        outcome = row.outcome
        builder = "From the builder chat" in row.card.get("notes", [])
        effects = outcome.get("effects", {})
        entries.append(
            {
                "who": row.actor,
                "what": outcome["outcome"],
                "when": outcome.get("resolved_at") or row.outcome_at.isoformat(),
                "agent_id": row.agent_id,
                "proposal_id": row.proposal_id,
                "reason": row.reason,
                "detail": outcome["detail"],
                "links": {
                    "proposal": f"/api/agents/{row.agent_id}/proposals/{row.proposal_id}",
                    "agent": f"/api/workspace/agents/{row.agent_id}",
                    "chat": None if builder else f"/api/studio/sessions/{row.session_id}/pending",
                    "commit": effects.get("commit"),
                },
            }
        )
    return entries


def router(deps: Deps, owners: Owners, user: Any) -> APIRouter:
    """The decision on a source proposal, and the activity feed; ``user`` is the authenticating dependency."""
    proposals = APIRouter(tags=["proposals"], responses=PERSON_ERRORS)

    @proposals.post(
        "/api/agents/{agent_id}/proposals/{proposal_id}",
        responses={
            **DECISION_ANSWERS,
            403: {"model": Error, "description": "Approving needs to edit source; discarding, to review feedback"},
        },
    )
    async def decide_proposal(agent_id: PathId, proposal_id: PathId, body: ProposalDecision, person: user) -> Any:
        """Approve or discard a waiting proposal. Approving commits onto the production branch and deploys (the
        default), or onto a ``new`` or ``existing`` branch without deploying (the answer's ``effects.link`` opens
        the pull or merge request); ``message`` is the commit's message."""
        choice: Any = body
        request = await request_of(deps, agent_id, proposal_id, person.org_id)
        needs = Permission.APPROVE_SOURCE if choice.decision == APPROVE else Permission.REVIEW_FEEDBACK
        if not person.may(needs, request["owners"], request["editors"]):
            raise HTTPException(
                403, needs.refusal if choice.decision == APPROVE else "discarding needs permission to review feedback"
            )
        options: dict[str, Any] = choice.model_dump(include=set(OPTIONS), exclude_none=True)
        if options and choice.decision != APPROVE:
            raise HTTPException(422, "a branch and a commit message go with approving only")
        return decided(await handlers.decide(deps, request, choice.decision, person.user_id, choice.via, options))

    @proposals.get("/api/activity", responses={200: {"model": Activity}})
    async def activity_feed(
        person: user,
        agent_id: Annotated[Identifier | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> dict[str, Any]:
        """Approvals and discards of the caller's organisation, and the owners' entries (the deployer's: deploy,
        deploy failed, promote, link fix): who, what, when, links; newest first."""
        entries = await activity(deps, person.org_id, agent_id, limit)
        for feed in FEEDS:
            entries += await feed_entries(owners, feed.owner, feed.path, person.org_id, agent_id, limit)
        entries.sort(key=lambda e: str(e["when"]), reverse=True)
        return {"entries": entries[:limit]}

    return proposals


async def feed_entries(
    owners: Owners, owner: str, path: str, org_id: str, agent_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """An owner's activity entries of ``org_id``."""
    query = urlencode({"limit": limit, **({"agent_id": agent_id} if agent_id is not None else {})})
    reply = await owners.call(owner, "GET", f"/internal{path}?{query}", org=org_id)
    return list(reply.body.get("entries", [])) if reply.status == 200 else []
