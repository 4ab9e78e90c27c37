"""The operator's desk on the public API: the organisation's sessions, the pending items across them, a session's
header tray, Apply all and Decline all, and ``Idempotency-Key`` on every decision (:mod:`gateway.idempotency`).

Every route is walled by the caller's organisation (another organisation's session is 404, as a missing one is).
Apply all and Decline all resolve a session's open proposals one after the other through the same path as a single
decision (:func:`gateway.handlers.decide`), so the owners see the same ``DecisionMade`` and the turn barrier the
same outcomes: the continuation goes out by itself when the last proposal is decided. Which proposals they take and
what they send comes from the kind registry (:mod:`gateway.domain.desk`).
"""

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from pydantic import BaseModel
from starlette.middleware import Middleware

from assent.api import Error, Identity, Permission
from assent.db import driver_connection
from assent.http import Identifier, PathId
from assent.kinds import KINDS, SECTIONS

from . import decisions, handlers, reverts
from .adapters.desk import DeskStore, KeyStore
from .answers import KAFKA_STALLED, PERSON_ERRORS, status_of
from .auth import Authenticator, Gate
from .domain import desk as rules
from .domain.desk import SessionNames, SessionRow, Skipped, Stopped, TrayItem
from .domain.proposals import Proposal
from .handlers import AwaitingApprovals, Deps, KafkaStalled, NotCounted, OutcomePending, Refused
from .idempotency import HEADER, KEY_PATTERN, Idempotency

NO_SESSION: dict[int | str, dict[str, Any]] = {
    404: {"model": Error, "description": "No such session in the caller's organisation"}
}
PageNumber = Annotated[int, Query(ge=1, le=100_000, description="The page, from 1")]
PageSize = Annotated[int, Query(ge=1, le=200, description="Items per page")]
BULK_NEEDS = Permission.CHANGE_WORKSPACE
"""Apply all and Decline all decide proposals of every agent of a session at once: the admin or developer role (an
agent's owner or editor decides its proposals one by one)."""


def decision_routes() -> list[re.Pattern[str]]:
    """The paths of every decision route, its revert route, Apply all and Decline all (those that take an
    ``Idempotency-Key``: a retried revert files one new request)."""
    paths = [decisions.address_of(endpoint).at(endpoint) for endpoint in decisions.ENDPOINTS]
    paths += [decisions.ADDRESSES["session"].at(endpoint) + "/revert" for endpoint in reverts.revert_endpoints()]
    return [
        *(
            re.compile("^" + "[^/]+".join(re.escape(part) for part in PATH_PARAMETER.split(path)) + "$")
            for path in paths
        ),
        re.compile(r"^/api/studio/sessions/[^/]+/(?:apply-all|decline-all)$"),
    ]


PATH_PARAMETER = re.compile(r"\{\w+\}")


class SessionsPage(BaseModel):
    """A page of the organisation's sessions, newest first."""

    items: list[SessionRow]
    page: int
    page_size: int
    total: int


class Tray(BaseModel):
    """Every open proposal of a session, with counts per section (each section of the registry, zero included) and
    per agent, and "Waiting on N decisions"; and the names people know the session by (``names``: every agent its
    proposals name, its coach, what its first request is about)."""

    session_id: str
    names: SessionNames
    waiting_on: int
    summary: str
    sections: dict[str, int]
    agents: dict[str, int]
    items: list[TrayItem]


class PendingPage(BaseModel):
    """A page of the open proposals across the organisation's sessions."""

    items: list[TrayItem]
    page: int
    page_size: int
    total: int


class Me(BaseModel):
    """Who the caller's token says they are: the person, their organisation and their roles in it."""

    user_id: str
    org_id: str
    roles: list[str]


class Resolved(BaseModel):
    seq: int
    kind: str
    outcome: str


class AllDone(BaseModel):
    """What Apply all or Decline all did: each proposal it resolved, each it left to its own apply, the decision
    that stopped the rest (if any), how many proposals it left open, and a sentence that says so."""

    resolved: list[Resolved]
    skipped: list[Skipped]
    stopped: Stopped | None
    left: int
    message: str


def install(app: FastAPI, deps: Deps) -> None:
    """Add the desk's routes to ``app``, and ``Idempotency-Key`` on every decision route (inside the guards)."""
    authenticator = Authenticator(deps.settings)
    gate = Gate(authenticator, lambda agent_id: handlers.agent_copy(deps, agent_id))
    user = Annotated[Identity, Depends(gate.person)]
    app.include_router(router(deps, user))

    @contextlib.asynccontextmanager
    async def keys() -> AsyncIterator[KeyStore]:
        async with deps.engine.begin() as conn:
            yield KeyStore(await driver_connection(conn))

    async def late(decision_id: str) -> tuple[int, bytes] | None:
        outcome = await deps.decided.outcome(decision_id)
        if outcome is None:
            return None
        return status_of(outcome), outcome.model_dump_json().encode()

    # Appended, so it runs inside the guards that every service installs first (Starlette builds the list in order).
    app.user_middleware.append(
        Middleware(Idempotency, routes=decision_routes(), authenticator=authenticator, keys=keys, late=late)
    )
    document_keys(app)


KEY_PARAMETER = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "description": "A retry with the same key by the same person gets the first answer (same status and body) and "
    "changes nothing; the same key with a different request is 422; while the first is running, 409.",
    "schema": {"type": "string", "pattern": KEY_PATTERN.pattern, "minLength": 1, "maxLength": 255},
}


def document_keys(app: FastAPI) -> None:
    """Say in the OpenAPI document that every route the middleware covers takes an ``Idempotency-Key``."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            for path, item in schema.get("paths", {}).items():
                post = item.get("post")
                if post is not None and any(route.match(path) for route in decision_routes()):
                    post.setdefault("parameters", []).append(KEY_PARAMETER)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the document


async def _store_read(deps: Deps) -> AsyncIterator[DeskStore]:
    async with deps.engine.connect() as conn:
        yield await DeskStore.over(conn)


def router(deps: Deps, user: Any) -> APIRouter:
    desk = APIRouter(tags=["desk"], responses=PERSON_ERRORS)
    store = contextlib.asynccontextmanager(lambda: _store_read(deps))

    @desk.get("/api/me", response_model=Me)
    async def me(person: user) -> Me:
        """The caller as their token names them: who, in which organisation, with which roles (what a client says of
        the person signed in). It reads nothing else: any valid token may ask."""
        return Me(user_id=person.user_id, org_id=person.org_id, roles=sorted(person.roles))

    @desk.get("/api/studio/sessions", response_model=SessionsPage)
    async def sessions(
        person: user,
        state: Annotated[Literal["open", "closed"] | None, Query(description="Only open or closed ones")] = None,
        prefix: Annotated[
            str | None,
            Query(
                min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="Only those whose id starts so"
            ),
        ] = None,
        page: PageNumber = 1,
        page_size: PageSize = 50,
    ) -> SessionsPage:
        """The organisation's sessions, newest first: operator, source guild, state, how many decisions each waits
        on, and the names people know it by (its agents, its coach, what its first request is about).

        ``prefix`` keeps the sessions whose id starts with it: a client that lets people type the start of an id (the
        CLI) learns in one request whether it names one session, several or none, where paging through every session
        of the organisation would cost a request per page and race with sessions opening meanwhile."""
        async with store() as s:
            items, total = await s.sessions(person.org_id, state, page_size, (page - 1) * page_size, prefix)
        return SessionsPage(items=items, page=page, page_size=page_size, total=total)

    @desk.get("/api/studio/pending", response_model=PendingPage)
    async def pending_across(
        person: user,
        section: Annotated[Literal[SECTIONS] | None, Query(description="Only this section's")] = None,  # type: ignore[valid-type]  # the values come from the registry, at import
        agent_id: Annotated[Identifier | None, Query(description="Only this agent's")] = None,
        escalated_to_me: Annotated[
            bool, Query(description="Only those an escalate rule of the policy told one of the caller's roles of")
        ] = False,
        page: PageNumber = 1,
        page_size: PageSize = 50,
    ) -> PendingPage:
        """The open proposals across the organisation's sessions (the newest session's first, each in seq order),
        filtered by section and agent (and to those escalated to the caller's roles), as the tray shows them with their
        ``session_id``."""
        roles = sorted(person.roles) if escalated_to_me else None
        async with store() as s:
            rows, total = await s.pending_across(
                person.org_id, section, agent_id, page_size, (page - 1) * page_size, roles
            )
        items = [rules.item_view(row, decisions.decision_path) for row in rows]
        return PendingPage(items=items, page=page, page_size=page_size, total=total)

    @desk.get("/api/studio/sessions/{session_id}/pending", response_model=Tray, responses=NO_SESSION)
    async def tray(session_id: PathId, person: user) -> Tray:
        """The header tray: every open proposal of the session grouped by section with its kind's labels and
        decision words, counts per section and per agent, and "Waiting on N decisions"."""
        await handlers.check_session(deps, session_id, person.org_id)
        async with store() as s:
            rows = await s.session_pending(session_id)
            names = await s.session_names(session_id)
        items = [rules.item_view(row, decisions.decision_path) for row in rows]
        counts = rules.counts(items)
        return Tray(
            session_id=session_id,
            names=names,
            waiting_on=counts.waiting_on,
            summary=counts.summary,
            sections=counts.sections,
            agents=counts.agents,
            items=items,
        )

    all_answers: dict[int | str, dict[str, Any]] = {
        **NO_SESSION,
        200: {"model": AllDone},
        409: {"model": Error, "description": "A request with this Idempotency-Key is still being answered"},
        422: {"model": Error, "description": "This Idempotency-Key was used for a different request"},
        503: KAFKA_STALLED,
    }

    @desk.post("/api/studio/sessions/{session_id}/apply-all", responses=all_answers)
    async def apply_all(session_id: PathId, person: user) -> AllDone:
        """Apply the session's open proposals in seq order. Never grants a login nor applies a proposal that widens
        what an agent can do (each is ``skipped`` with the reason, to its own apply); a refused apply (a stale one,
        409) stops the rest and is ``stopped``. Where the organisation's policy requires approvals, the caller's
        apply is one approval of each such request, as a single apply would be (never several): a request that
        needs more, or whose approval by the caller does not count, is ``skipped`` with what it waits for. Takes an
        ``Idempotency-Key``."""
        return await run_all(deps, session_id, person, rules.plan_apply_all, "Applied", "apply_all")

    @desk.post("/api/studio/sessions/{session_id}/decline-all", responses=all_answers)
    async def decline_all(session_id: PathId, person: user) -> AllDone:
        """Decline every open proposal of the session in seq order with its kind's ``decline`` decision (a draft is
        discarded, a login declined). A refused one stops the rest. Takes an ``Idempotency-Key``."""
        return await run_all(deps, session_id, person, rules.plan_decline_all, "Declined", "decline_all")

    preview_answers: dict[int | str, dict[str, Any]] = {**NO_SESSION, 200: {"model": AllDone}}

    @desk.get("/api/studio/sessions/{session_id}/apply-all", responses=preview_answers)
    async def preview_apply_all(session_id: PathId, person: user) -> AllDone:
        """What Apply all would do now, writing nothing: ``resolved`` lists each request it would apply (``outcome``:
        the decision it would send), ``skipped`` each it would leave and why (a login grant, a change that widens
        access, a request that needs more approvals than the caller's under the organisation's policy); ``stopped``
        is always null (only sending finds a stale request). Built by the same planning function as Apply all, so the
        preview and the action never disagree. A ``GET`` on the action's own path rather than ``POST ?dry_run=true``:
        it is safe and repeatable by HTTP's rules, so no ``Idempotency-Key``, no middleware and no proxy treats it
        as a decision. Needs the role Apply all needs, in the session's organisation."""
        return await preview_all(deps, session_id, person, rules.plan_apply_all, "apply", "apply_all")

    @desk.get("/api/studio/sessions/{session_id}/decline-all", responses=preview_answers)
    async def preview_decline_all(session_id: PathId, person: user) -> AllDone:
        """What Decline all would do now, writing nothing (as the Apply all preview): each open request with the
        decline decision it would send."""
        return await preview_all(deps, session_id, person, rules.plan_decline_all, "decline", "decline_all")

    return desk


async def run_all(
    deps: Deps,
    session_id: str,
    person: Identity,
    plan_of: Callable[[Sequence[Proposal]], rules.Plan],
    verb: str,
    via: str,
) -> AllDone:
    """Send a plan's decisions one after the other, as one operator's single decisions would go; stop at the first
    that does not resolve its proposal."""
    check_bulk(person, via)
    await handlers.check_session(deps, session_id, person.org_id)
    handlers.check_kafka(deps)  # 503 before the first decision; a stall found later stops the rest (below)
    async with deps.engine.connect() as conn:
        proposals = await (await DeskStore.over(conn)).open_proposals(session_id)
    plan = plan_of(proposals)
    resolved: list[Resolved] = []
    stopped: Stopped | None = None
    skipped = list(plan.skipped)
    for step in plan.steps:
        seq, kind = step.proposal.seq, step.proposal.kind
        try:
            outcome = await handlers.decide(deps, step.proposal, step.decision, person.user_id, via, None, person.roles)
        except AwaitingApprovals as exc:
            # One approval of the caller's, as a single apply would count it: the request waits for the others.
            skipped.append(Skipped(seq=seq, kind=kind, reason=f"your approval was counted; {exc.detail}"))
            continue
        except NotCounted as exc:
            skipped.append(Skipped(seq=seq, kind=kind, reason=exc.detail))
            continue
        except Refused as exc:
            stopped = Stopped(seq=seq, kind=kind, status=exc.status, detail=exc.detail)
        except KafkaStalled as exc:  # nothing of this one was recorded: Apply all again sends it and what follows
            stopped = Stopped(seq=seq, kind=kind, status=503, detail=str(exc))
        except OutcomePending as exc:
            late = "the decision was sent; its outcome has not arrived yet"
            stopped = Stopped(seq=seq, kind=kind, status=504, detail=late, decision_id=exc.decision_id)
        else:
            if outcome.outcome in KINDS[kind].decisions.values():
                resolved.append(Resolved(seq=seq, kind=kind, outcome=outcome.outcome))
                continue
            stopped = Stopped(seq=seq, kind=kind, status=status_of(outcome), detail=outcome.detail)
        break
    left = len(proposals) - len(resolved)
    message = rules.summary(verb, len(resolved), len(skipped), stopped, left)
    return AllDone(resolved=resolved, skipped=skipped, stopped=stopped, left=left, message=message)


async def preview_all(
    deps: Deps,
    session_id: str,
    person: Identity,
    plan_of: Callable[[Sequence[Proposal]], rules.Plan],
    verb: str,
    via: str,
) -> AllDone:
    """The plan ``run_all`` would follow, as its answer's shape, after the same checks; sends nothing."""
    check_bulk(person, via)
    await handlers.check_session(deps, session_id, person.org_id)
    async with deps.engine.connect() as conn:
        store = await DeskStore.over(conn)
        proposals = await store.open_proposals(session_id)
        rows = await store.session_pending(session_id)
    items = [rules.item_view(row, decisions.decision_path) for row in rows]
    steps, skipped = rules.preview(plan_of(proposals), items)
    resolved = [Resolved(seq=s.proposal.seq, kind=s.proposal.kind, outcome=s.decision) for s in steps]
    message = rules.preview_summary(verb, len(resolved), len(skipped))
    return AllDone(resolved=resolved, skipped=skipped, stopped=None, left=len(proposals), message=message)


def check_bulk(person: Identity, via: str) -> None:
    """Refuse (403) a caller without the role Apply all and Decline all need."""
    if not person.may(BULK_NEEDS):
        name = via.replace("_", " ").capitalize()
        raise HTTPException(403, f"{name} needs the admin or developer role (it decides every agent's requests)")
