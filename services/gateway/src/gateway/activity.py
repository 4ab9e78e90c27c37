"""The activity feed on the public API: the decisions taken on agents' pages, merged with the owners' feeds.

Which proposals it lists comes from the kind registry: those of the kinds decided on an agent's page
(:data:`assent.kinds.PAGE_KINDS`), once their owner resolved them. The owners' entries come from their declared
feeds (:data:`assent.api.FEEDS`). Another organisation's entries are never listed.
"""

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy import select

from assent.api import FEEDS
from assent.contracts import Card, ProposalOutcome
from assent.http import Identifier
from assent.kinds import KINDS, PAGE_KINDS, chat_linked

from .adapters import tables as t
from .adapters.owners import Owners
from .answers import PERSON_ERRORS
from .decisions import decision_path
from .handlers import Deps

RESOLVED = tuple(dict.fromkeys(o for name in PAGE_KINDS for o in KINDS[name].decisions.values()))


class ActivityEntry(BaseModel):
    """Something done to an agent: who, what, when, and where to read more (``links``: each an API path, a commit,
    or None; an owner's entry links what it knows of)."""

    who: str | None
    what: str
    when: str
    agent_id: str | None
    proposal_id: str | None
    reason: str | None = None
    """The proposal's reason (approvals and discards)."""
    detail: str | None
    links: dict[str, str | None]


class Activity(BaseModel):
    entries: list[ActivityEntry]


@dataclass(frozen=True)
class Decided:
    """A proposal decided on an agent's page, where :func:`~gateway.decisions.decision_path` finds it."""

    kind: str
    session_id: str
    seq: int
    agent_id: str | None
    proposal_id: str


async def activity(deps: Deps, org_id: str, agent_id: str | None, limit: int) -> list[ActivityEntry]:
    """The decisions on the organisation's proposals decided on agents' pages, newest first: who, what, when, and
    links (the proposal, its agent, its chat unless its origin is not linked, and the commit it made, if any)."""
    d, r = t.decisions, t.projected_proposals
    query = (
        select(d.c.actor, d.c.decision, d.c.decided_at, d.c.outcome, d.c.outcome_at, r.c.agent_id, r.c.proposal_id)
        .add_columns(r.c.session_id, r.c.seq, r.c.kind, r.c.card, r.c.reason)
        .join(r, r.c.proposal_id == d.c.proposal_id)
        .join(t.sessions, t.sessions.c.session_id == r.c.session_id)
        .where(
            t.sessions.c.org_id == org_id,
            r.c.kind.in_(PAGE_KINDS),
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
        outcome = ProposalOutcome.model_validate(row.outcome)
        card = Card.model_validate(row.card)
        linked = chat_linked(row.kind, card.origin)
        commit = outcome.effects.get("commit")
        entries.append(
            ActivityEntry(
                who=row.actor,
                what=outcome.outcome,
                # The time as the owner wrote it (the outcome's JSON), else when the projection recorded it.
                when=row.outcome.get("resolved_at") or row.outcome_at.isoformat(),
                agent_id=row.agent_id,
                proposal_id=row.proposal_id,
                reason=row.reason,
                detail=outcome.detail,
                links={
                    "proposal": decision_path(
                        Decided(row.kind, row.session_id, row.seq, row.agent_id, row.proposal_id)
                    ),
                    "agent": f"/api/workspace/agents/{row.agent_id}",
                    "chat": f"/api/studio/sessions/{row.session_id}/pending" if linked else None,
                    "commit": commit if isinstance(commit, str) else None,
                },
            )
        )
    return entries


def router(deps: Deps, owners: Owners, user: Any) -> APIRouter:
    """The activity feed; ``user`` is the authenticating dependency."""
    feed = APIRouter(tags=["proposals"], responses=PERSON_ERRORS)

    # Unset fields stay out: an owner's entry says no ``reason`` unless it has one.
    @feed.get("/api/activity", response_model=Activity, response_model_exclude_unset=True)
    async def activity_feed(
        person: user,
        agent_id: Annotated[Identifier | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> Activity:
        """Approvals and discards of the caller's organisation, and the owners' entries (the deployer's: deploy,
        deploy failed, promote, link fix): who, what, when, links; newest first."""
        entries = await activity(deps, person.org_id, agent_id, limit)
        for owner_feed in FEEDS:
            entries += await feed_entries(owners, owner_feed.owner, owner_feed.path, person.org_id, agent_id, limit)
        entries.sort(key=lambda e: e.when, reverse=True)
        return Activity(entries=entries[:limit])

    return feed


async def feed_entries(
    owners: Owners, owner: str, path: str, org_id: str, agent_id: str | None, limit: int
) -> list[ActivityEntry]:
    """An owner's activity entries of ``org_id``."""
    query = urlencode({"limit": limit, **({"agent_id": agent_id} if agent_id is not None else {})})
    reply = await owners.call(owner, "GET", f"/internal{path}?{query}", org=org_id)
    if reply.status != 200:
        return []
    return [ActivityEntry.model_validate(entry) for entry in reply.body.get("entries", [])]
