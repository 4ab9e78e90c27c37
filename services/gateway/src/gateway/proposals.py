"""The Proposals page, the activity feed, and agents' source and issues, on the public API.

The gateway knows no kind here either: the kinds decided at ``/proposals`` (source proposals) come from the kind
registry, their owner serves the page (reason, a diff per file, model, who asked, the chat or "From the builder
chat", "Fix for issue", files changed since) and enforces the organisation's wall (``X-Assent-Org``); decisions
travel like every other one (``DecisionMade`` to the owner, its ``ProposalOutcome`` back). The activity feed is
the gateway's own record of those decisions.

Approving needs permission to edit source and manage deploys (admin or developer, or the agent's owner or editor);
discarding needs permission to review feedback (reviewers too). Another organisation's agent or proposal is 404.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, HTTPException, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from assent.contracts import Id
from assent.http import NoNul, Omissible, OneLine
from assent.kinds import KINDS, decisions_at

from . import handlers
from .adapters import tables as t
from .adapters.owners import Owners, segment
from .deploys import deployer_activity
from .domain.roles import Identity
from .handlers import Deps

ENDPOINT = "proposals"
PROPOSAL_KINDS = tuple(spec.name for spec in KINDS.values() if spec.endpoint == ENDPOINT)
OWNERS = tuple(dict.fromkeys(KINDS[name].owner for name in PROPOSAL_KINDS))
if len(OWNERS) != 1:  # the page is one owner's; a second would need its lists merged here
    raise RuntimeError(f"the kinds decided at /{ENDPOINT} have owners {OWNERS}; the Proposals page expects one")
SOURCE_OWNER = OWNERS[0]
APPROVE = "approve"
RESOLVED = tuple(dict.fromkeys(o for name in PROPOSAL_KINDS for o in KINDS[name].decisions.values()))

PathId = Annotated[str, Path(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
Forward = Callable[..., Awaitable[JSONResponse]]


class BranchChoice(BaseModel):
    """Where an approval commits: the production branch (the default: commit and deploy), a ``new`` branch made
    from it, or an ``existing`` one (commit there, no deploy; the answer links to a pull or merge request)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["production", "new", "existing"] = "production"
    name: Annotated[str, Field(min_length=1, max_length=200), OneLine] | None = None


class ProposalDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal[decisions_at(ENDPOINT)]  # type: ignore[valid-type]
    via: Literal["page", "card", "chat"] = "page"
    branch: BranchChoice | None = None
    message: Annotated[str, Field(min_length=1, max_length=4000), NoNul] | None = None
    """The commit message (approving only); the proposal's reason when absent."""


FileText = Annotated[str, Field(max_length=160_000), NoNul]
FilePath = Annotated[str, Field(min_length=1, max_length=500), OneLine]
"""A file of the agent's repository; the owner refuses one outside it or under ``.git/``, naming it."""
Title = Annotated[str, Field(min_length=1, max_length=300), OneLine]
IssueText = Annotated[str, Field(max_length=20_000), NoNul]
Evals = Annotated[dict[FilePath, FileText], Field(max_length=50)]


class RepositoryIn(BaseModel):
    """``hosted`` (``files``: its first source version) or ``external`` (``url``, ``provider``, optional
    production ``branch``: the remote's default branch when absent)."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["hosted", "external"]
    url: Annotated[str, Field(min_length=1, max_length=2000), OneLine] | None = None
    provider: Literal["github", "gitlab"] | None = None
    branch: Annotated[str, Field(min_length=1, max_length=200), OneLine] | None = None
    files: dict[FilePath, FileText] = Field(default_factory=dict, max_length=500)
    propose_changes_to_itself: bool = False
    """Hosted only: the first source version also holds ``agents/main/agent.json`` declaring the source tools and an
    ``agents/main/AGENT.md`` prompt."""


class CommitIn(BaseModel):
    """Commit files directly onto the production branch (``null`` deletes one): a person's own change."""

    model_config = ConfigDict(extra="forbid")
    files: dict[FilePath, FileText | None] = Field(min_length=1, max_length=500)
    message: Annotated[str, Field(min_length=1, max_length=4000), NoNul]


class DeploymentIn(BaseModel):
    """Record a deployment (default: of the production branch's head); ``records_version: false`` records one
    that names no source version, as an older deploy did."""

    model_config = ConfigDict(extra="forbid")
    source_version: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None
    records_version: bool = True


class IssueIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Title
    text: IssueText = ""
    evals: Evals = Field(default_factory=dict)


class IssuePatch(BaseModel):
    """A change of an issue: a field left out is kept; none is ever null."""

    model_config = ConfigDict(extra="forbid")
    title: Omissible[Title] = None
    text: Omissible[IssueText] = None
    status: Omissible[Literal["open", "fixed", "closed"]] = None
    evals: Omissible[Evals] = None


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


def install(
    app: FastAPI,
    deps: Deps,
    user_dependency: Any,
    forward: Forward,
    may_change_agent: Callable[[Identity, str], Awaitable[None]],
    owners: Owners,
) -> None:
    """Add the routes; ``user_dependency`` authenticates (401/403 as everywhere), ``forward`` asks an owner for
    the person (their organisation's wall), ``may_change_agent`` is the workspace's rule for changing an agent."""
    User = user_dependency
    router = APIRouter(tags=["proposals"])

    async def may_review(user: Identity, agent_id: str) -> None:
        if user.may_review_feedback():
            return
        agent = await handlers.agent_copy(deps, agent_id)
        if agent is None or agent.org_id != user.org_id:
            raise handlers.NotFound(f"agent {agent_id!r} does not exist")
        if not user.may_review_feedback(agent.owners, agent.editors):
            raise HTTPException(403, "this needs permission to review feedback: a reviewer, developer or admin role")

    @router.get("/api/agents/{agent_id}/proposals")
    async def list_proposals(agent_id: PathId, user: User) -> JSONResponse:
        """The Proposals page: ``waiting`` and ``decided`` with ``counts`` of each; each proposal with its reason,
        a diff per file, the model, who asked, its chat or "From the builder chat", its issue, and the files
        changed since (then only ``discard`` is offered)."""
        return await forward(SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/proposals", user)

    @router.get("/api/agents/{agent_id}/proposals/{proposal_id}")
    async def read_proposal(agent_id: PathId, proposal_id: PathId, user: User) -> JSONResponse:
        return await forward(
            SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/proposals/{segment(proposal_id)}", user
        )

    @router.post(
        "/api/agents/{agent_id}/proposals/{proposal_id}",
        responses={
            200: {"description": "approved (with its commit) or discarded"},
            403: {"description": "approving needs to edit source; discarding, to review feedback"},
            404: {"description": "no such proposal of this agent in the caller's organisation"},
            409: {"description": "a file changed in the repository since; the proposal stays waiting"},
            422: {"description": "already decided"},
            504: {"description": "the owner has not answered yet; the decision stands"},
        },
    )
    async def decide_proposal(
        agent_id: PathId, proposal_id: PathId, body: ProposalDecision, user: User
    ) -> JSONResponse:
        """Approve or discard a waiting proposal. Approving commits onto the production branch and deploys (the
        default), or onto a ``new`` or ``existing`` branch without deploying (the answer's ``effects.link`` opens
        the pull or merge request); ``message`` is the commit's message."""
        request = await request_of(deps, agent_id, proposal_id, user.org_id)
        owners, editors = request["owners"], request["editors"]
        if body.decision == APPROVE and not user.may_change_agent(owners, editors):
            raise HTTPException(
                403,
                "approving needs permission to edit source and manage deploys: admin or developer, or to own or "
                "edit the agent",
            )
        if body.decision != APPROVE and not user.may_review_feedback(owners, editors):
            raise HTTPException(403, "discarding needs permission to review feedback")
        options: dict[str, Any] = {}
        if body.decision == APPROVE:
            if body.branch is not None:
                options["branch"] = body.branch.model_dump(exclude_none=True)
            if body.message is not None:
                options["message"] = body.message
        elif body.branch is not None or body.message is not None:
            raise HTTPException(422, "a branch and a commit message go with approving only")
        outcome = await handlers.decide(deps, request, body.decision, user.user_id, body.via, options)
        status = outcome["status"] if outcome["outcome"] != "failed" else 502
        return JSONResponse(outcome, status_code=status)

    @router.get("/api/agents/{agent_id}/builder-chat")
    async def builder_chat(agent_id: PathId, user: User) -> JSONResponse:
        """Whether Studio shows the builder chat of the agent to the caller: only to people with permission to edit
        its source (admin or developer, or the agent's owner or editor), and only when its active deployment
        declares ``propose_source_change`` or it already has a proposal from chat (the owner reads the declaration
        at the deployed version). ``{"shown", "reason", ...}``; another organisation's agent is 404."""
        if not user.may_write_workspace():
            agent = await handlers.agent_copy(deps, agent_id)
            if agent is None or agent.org_id != user.org_id:
                raise handlers.NotFound(f"agent {agent_id!r} does not exist")
            if not user.may_change_agent(agent.owners, agent.editors):
                return JSONResponse(
                    {
                        "agent_id": agent_id,
                        "shown": False,
                        "reason": "the builder chat is only for people with permission to edit the agent's source: "
                        "an admin or developer, or the agent's owner or editor",
                    }
                )
        reply = await owners.call(
            SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/builder-chat", None, org=user.org_id
        )
        return JSONResponse(reply.body, status_code=reply.status)

    @router.get("/api/activity")
    async def activity_feed(
        user: User,
        agent_id: Annotated[Id | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> dict[str, Any]:
        """Approvals and discards of the caller's organisation, and the deployer's entries (deploy, deploy failed,
        promote, link fix): who, what, when, links; newest first."""
        entries = await activity(deps, user.org_id, agent_id, limit)
        entries += await deployer_activity(owners, user.org_id, agent_id, limit)
        entries.sort(key=lambda e: str(e["when"]), reverse=True)
        return {"entries": entries[:limit]}

    @router.put("/api/workspace/agents/{agent_id}/repository")
    async def set_repository(agent_id: PathId, body: RepositoryIn, user: User) -> JSONResponse:
        """Create the agent's hosted source, or attach its external repository."""
        await may_change_agent(user, agent_id)
        payload = {**body.model_dump(), "actor": user.user_id}
        return await forward(SOURCE_OWNER, "PUT", f"/internal/agents/{segment(agent_id)}/repository", user, payload)

    @router.get("/api/workspace/agents/{agent_id}/repository")
    async def get_repository(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/repository", user)

    @router.post("/api/workspace/agents/{agent_id}/repository/commits", status_code=201)
    async def commit(agent_id: PathId, body: CommitIn, user: User) -> JSONResponse:
        await may_change_agent(user, agent_id)
        payload = {**body.model_dump(), "actor": user.user_id}
        return await forward(
            SOURCE_OWNER, "POST", f"/internal/agents/{segment(agent_id)}/repository/commits", user, payload
        )

    @router.post("/api/workspace/agents/{agent_id}/deployments", status_code=201)
    async def deploy(agent_id: PathId, body: DeploymentIn, user: User) -> JSONResponse:
        await may_change_agent(user, agent_id)
        payload = {**body.model_dump(), "actor": user.user_id}
        return await forward(SOURCE_OWNER, "POST", f"/internal/agents/{segment(agent_id)}/deployments", user, payload)

    @router.get("/api/workspace/agents/{agent_id}/issues")
    async def list_issues(agent_id: PathId, user: User) -> JSONResponse:
        return await forward(SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/issues", user)

    @router.post("/api/workspace/agents/{agent_id}/issues", status_code=201)
    async def create_issue(agent_id: PathId, body: IssueIn, user: User) -> JSONResponse:
        """File an issue (title, text, regression evals under evals/)."""
        await may_review(user, agent_id)
        payload = {**body.model_dump(), "actor": user.user_id}
        return await forward(SOURCE_OWNER, "POST", f"/internal/agents/{segment(agent_id)}/issues", user, payload)

    @router.get("/api/workspace/agents/{agent_id}/issues/{issue_id}")
    async def read_issue(agent_id: PathId, issue_id: PathId, user: User) -> JSONResponse:
        return await forward(
            SOURCE_OWNER, "GET", f"/internal/agents/{segment(agent_id)}/issues/{segment(issue_id)}", user
        )

    @router.patch("/api/workspace/agents/{agent_id}/issues/{issue_id}")
    async def change_issue(agent_id: PathId, issue_id: PathId, body: IssuePatch, user: User) -> JSONResponse:
        await may_review(user, agent_id)
        payload = {**body.model_dump(exclude_unset=True), "actor": user.user_id}
        return await forward(
            SOURCE_OWNER, "PATCH", f"/internal/agents/{segment(agent_id)}/issues/{segment(issue_id)}", user, payload
        )

    app.include_router(router)
