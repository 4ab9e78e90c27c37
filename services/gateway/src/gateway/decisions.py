"""The decisions on proposals: one route for each endpoint of the kind registry
(:attr:`assent.kinds.KindSpec.endpoint`), at the address its kinds are decided by
(:attr:`~assent.kinds.KindSpec.addressed_by`, :data:`ADDRESSES`): a session's
``POST /api/studio/sessions/{session_id}/{endpoint}/{seq}``, or an agent's page's
``POST /api/agents/{agent_id}/{endpoint}/{proposal_id}``.

Each route takes the decisions of the kinds decided at its endpoint (:func:`assent.kinds.decisions_at`; another is
422), and the choices they declare besides (:attr:`~assent.kinds.KindSpec.options`: the fields of the owner's declared
model, sent as ``DecisionMade.options``; with a decision that takes none, 422). It answers 404 for a proposal of a
kind decided elsewhere, as for a missing one. Deciding needs the admin or developer role, or to own or edit the
proposal's agent; a kind whose row says so takes its decline from anyone who may review feedback too
(:attr:`~assent.kinds.KindSpec.reviewers_decline`). Every decision goes the one way (:func:`gateway.handlers.decide`):
recorded with who and when, ``DecisionMade`` to the owner, and an answer once the owner's ``ProposalOutcome`` is in the
projection, so the pending items show it at once (a late one is 504 and the decision stands). A proposal resolved
already answers its kind's :attr:`~assent.kinds.Answer.answered`. When the endpoint's kinds name an owner's route
(:attr:`assent.kinds.Answer.route`), a decision the owner took answers with that route's answer beside the outcome (a
login request's: the session's logins).

Nothing here names a kind, an endpoint, an owner's route or a decision's options: a kind decided at a new endpoint
gets its route from its registry row, and every kind decided at one endpoint must be decided alike there.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import JSONResponse
from pydantic import create_model

from assent.api import ROUTES, Error, Identity, PublicRoute, RequestModel, caller_headers
from assent.contracts import ProposalOutcome
from assent.http import PathId
from assent.kinds import KINDS, Addressed, Answer, KindSpec, Options, decisions_at

from . import handlers
from .adapters.owners import Owners, OwnerUnavailable, segment
from .answers import DECISION_ANSWERS, PERSON_ERRORS, decided
from .domain.proposals import Located, Proposal

SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]


@dataclass(frozen=True)
class Address:
    """How the decision routes of the endpoints decided by one :data:`~assent.kinds.Addressed` name a proposal."""

    path: str
    """The route's path; ``<endpoint>`` stands for the endpoint."""
    via: tuple[str, ...]
    """Where a person decides there (``DecisionMade.via``), the default first."""
    tag: str | None
    """The OpenAPI tag of its routes (None: the endpoint's name)."""
    summary: str
    """What the route does, before its decisions."""
    missing: str
    """What its 404 says."""

    def at(self, endpoint: str) -> str:
        return self.path.replace("<endpoint>", endpoint)


ADDRESSES: Mapping[Addressed, Address] = MappingProxyType(
    {
        "session": Address(
            "/api/studio/sessions/{session_id}/<endpoint>/{seq}",
            ("card", "tray", "item", "chat"),
            "studio",
            "Decide the request at that message",
            "No such session in the caller's organisation, or no request at that seq",
        ),
        "agent": Address(
            "/api/agents/{agent_id}/<endpoint>/{proposal_id}",
            ("page", "card", "chat"),
            None,
            "Decide a proposal of the agent",
            "No such proposal of this agent in the caller's organisation",
        ),
    }
)
"""The card, the tray, a pending item or the chat decide by session and message; an agent's page by agent and
proposal (:attr:`assent.kinds.KindSpec.addressed_by`)."""
ENDPOINTS: tuple[str, ...] = tuple(dict.fromkeys(spec.endpoint for spec in KINDS.values()))
"""Every endpoint of the registry, in registry order."""


def read_endpoints() -> tuple[str, ...]:
    """The endpoints decided by session and message whose decision path no owner's declared ``GET`` serves: the
    gateway reads a proposal there itself (``GET …/{endpoint}/{seq}``, a card, decided or not). An owner that
    serves the path (a Task draft's ``…/drafts/{seq}``) reads its own; a proposal decided on an agent's page is read
    there, by its owner."""
    served = {route.public_path for route in ROUTES if route.method == "GET"}
    session = ADDRESSES["session"]
    return tuple(e for e in ENDPOINTS if address_of(e) is session and session.at(e) not in served)


def alike(endpoint: str, attribute: str) -> Any:
    """The ``attribute`` of the kinds decided at ``endpoint``, the same for each (a registry that disagrees is
    refused: one route decides them all)."""
    values = {getattr(spec, attribute) for spec in KINDS.values() if spec.endpoint == endpoint}
    if len(values) != 1:
        raise ValueError(
            f"the kinds decided at {endpoint!r} differ in {attribute} ({len(values)} ways); they must be decided alike"
        )
    return values.pop()


def answer_at(endpoint: str) -> Answer:
    """How ``endpoint`` answers, the same for every kind decided there."""
    answer: Answer = alike(endpoint, "answer")
    return answer


def address_of(endpoint: str) -> Address:
    """Where the decision route of ``endpoint`` is, the same for every kind decided there."""
    return ADDRESSES[alike(endpoint, "addressed_by")]


def decision_path(proposal: Located) -> str:
    """Where a client sends a decision on ``proposal`` (a projected proposal, a pending item)."""
    endpoint = KINDS[proposal.kind].endpoint
    return (
        address_of(endpoint)
        .at(endpoint)
        .format(
            session_id=proposal.session_id,
            seq=proposal.seq,
            agent_id=proposal.agent_id,
            proposal_id=proposal.proposal_id,
        )
    )


def answer_route(endpoint: str) -> PublicRoute | None:
    """The owner's declared route whose answer goes with a decision at ``endpoint`` (None: the outcome alone)."""
    answer = answer_at(endpoint)
    if answer.route is None:
        return None
    owners = {spec.owner for spec in KINDS.values() if spec.endpoint == endpoint}
    found = [route for route in ROUTES if route.name == answer.route and route.owner in owners]
    if len(found) != 1 or found[0].method != "GET" or not set(found[0].path_params) <= {"session_id", "seq"}:
        raise ValueError(
            f"{endpoint!r} answers with {answer.route!r}, which must be one GET route of its owner with no path "
            "parameter but session_id and seq"
        )
    return found[0]


def options_at(endpoint: str) -> Options | None:
    """The options the decisions at ``endpoint`` take, with the owner's model of them (None: none)."""
    options: Options | None = alike(endpoint, "options")
    if options is None:
        return None
    fields = options.model.model_fields
    if set(fields) & {"decision", "via"} or any(field.is_required() for field in fields.values()):
        raise ValueError(f"the options {options.model.__name__!r} must be optional fields besides decision and via")
    return options


def decision_body(endpoint: str) -> type[RequestModel]:
    """The body of a decision at ``endpoint``: one of its decisions, where it was taken, and its options."""
    address, options = address_of(endpoint), options_at(endpoint)
    fields: dict[str, Any] = {}
    if options is not None:
        fields = {name: (field.annotation, field) for name, field in options.model.model_fields.items()}
    return create_model(
        f"{endpoint.title()}Decision",
        __base__=RequestModel,
        __doc__=f"A decision on a proposal decided at …/{endpoint}/…: {' or '.join(decisions_at(endpoint))}"
        + (f"; {' and '.join(fields)} go with {' or '.join(options.decisions)} only." if options else "."),
        decision=(Literal[decisions_at(endpoint)], ...),  # type: ignore[arg-type]  # the values come from the registry
        via=(Literal[address.via], address.via[0]),  # type: ignore[arg-type]  # one address's places
        **fields,
    )


DECISION_BODIES: dict[str, type[RequestModel]] = {endpoint: decision_body(endpoint) for endpoint in ENDPOINTS}
"""Each endpoint's decision body (its decisions and options come from the registry)."""


def refusal(
    person: Identity, spec: KindSpec, decision: str, owners: tuple[str, ...], editors: tuple[str, ...]
) -> str | None:
    """Why ``person`` may not take ``decision`` on a proposal of ``spec`` whose agent has ``owners`` and ``editors``
    (None: they may)."""
    if spec.reviewers_decline and decision == spec.decline:
        if person.may_review_feedback(owners, editors):
            return None
        return (
            f"the {decision} decision on a {spec.name} request needs permission to review feedback: a reviewer, "
            "developer or admin role, or to own or edit its agent"
        )
    if person.may_decide(owners, editors):
        return None
    return f"deciding a {spec.name} request needs the admin or developer role, or to own or edit its agent"


def forbidden(endpoint: str) -> str:
    """What the 403 of ``endpoint``'s decision route says, as its OpenAPI document tells it."""
    why = "Deciding needs the admin or developer role, or to own or edit the request's agent"
    declines = {spec.decline for spec in KINDS.values() if spec.endpoint == endpoint and spec.reviewers_decline}
    if declines:
        why += f"; {' or '.join(sorted(declines))}, or permission to review feedback"
    return (
        why + ". Where the organisation's policy requires approvals, an approval that does not count: the caller "
        "runs the session that proposed it, or holds none of the roles (is none of the people) the rule names"
    )


def answers(endpoint: str) -> dict[int | str, dict[str, Any]]:
    """What a decision at ``endpoint`` answers, as its OpenAPI document says."""
    documented = {
        **PERSON_ERRORS,
        **DECISION_ANSWERS,
        403: {"model": Error, "description": forbidden(endpoint)},
        404: {"model": Error, "description": address_of(endpoint).missing},
    }
    route = answer_route(endpoint)
    if route is not None:
        # The outcome's fields beside ``answer``, in a model of its own: a subclass of a message would be registered
        # as that message's type on the wire.
        fields: dict[str, Any] = {name: (f.annotation, f) for name, f in ProposalOutcome.model_fields.items()}
        with_answer = create_model(
            f"{endpoint.title()}Outcome",
            __doc__="The outcome, and (the owner having taken the decision) the owner's view after it as ``answer``.",
            **fields,
            answer=(route.response | None, None),
        )
        documented[200] = {"model": with_answer, "description": f"The outcome, and the answer of {route.name}"}
    if answer_at(endpoint).answered == 409:
        documented[409] = {
            "model": ProposalOutcome | Error,  # FastAPI documents a union as anyOf
            "description": "The request was answered already (by whom, when); or the owner refuses the decision "
            "now (the target changed, a rule): the request stays pending",
        }
        documented[422] = {
            "model": Error,
            "description": "A decision that does not fit the request (an outcome), or a body that does not fit its "
            "schema",
        }
    return documented


def router(deps: handlers.Deps, owners: Owners, user: Any) -> APIRouter:
    """The decision route of each endpoint; ``user`` is the authenticating dependency."""
    decisions = APIRouter()
    for endpoint in ENDPOINTS:
        address = address_of(endpoint)
        options = options_at(endpoint)
        handler = deciding(deps, owners, user, endpoint)
        decisions.add_api_route(
            address.at(endpoint),
            handler,
            methods=["POST"],
            name=f"decide_{endpoint}",
            tags=[address.tag or endpoint],
            summary=f"{address.summary} ({' or '.join(decisions_at(endpoint))})",
            description=(handler.__doc__ or "")
            + (f"\n\n{options.model.__doc__}" if options and options.model.__doc__ else ""),
            responses=answers(endpoint),
        )
    return decisions


def deciding(deps: handlers.Deps, owners: Owners, user: Any, endpoint: str) -> Any:
    """The handler of ``endpoint``'s decision route, with the path parameters of its address."""
    body_model, route, options = DECISION_BODIES[endpoint], answer_route(endpoint), options_at(endpoint)

    async def take(proposal: Proposal, body: Any, person: Identity) -> JSONResponse:
        why = refusal(person, KINDS[proposal.kind], body.decision, proposal.owners, proposal.editors)
        if why is not None:
            raise HTTPException(403, why)
        chosen: dict[str, Any] = {}
        if options is not None:
            chosen = body.model_dump(mode="json", include=set(options.model.model_fields), exclude_none=True)
            if chosen and body.decision not in options.decisions:
                raise HTTPException(
                    422, f"{' and '.join(chosen)} go with {' or '.join(options.decisions)} only, not {body.decision}"
                )
        outcome = await handlers.decide(deps, proposal, body.decision, person.user_id, body.via, chosen, person.roles)
        if route is None or outcome.status != 200 or outcome.outcome == "failed":
            return decided(outcome)
        answer = await owner_answer(owners, route, person, proposal.session_id, proposal.seq)
        return JSONResponse({**outcome.model_dump(mode="json"), "answer": answer})

    if address_of(endpoint) is ADDRESSES["agent"]:

        async def decide_on_page(agent_id: PathId, proposal_id: PathId, body: body_model, person: user) -> JSONResponse:  # type: ignore[valid-type]
            """Decide one proposal of the agent. Answers once its owner has carried the decision out or refused it;
            the agent's page shows it then."""
            return await take(
                await handlers.proposal_of(deps, agent_id, proposal_id, person.org_id, endpoint), body, person
            )

        return decide_on_page

    async def decide(session_id: PathId, seq: SeqPath, body: body_model, person: user) -> JSONResponse:  # type: ignore[valid-type]
        """Decide one proposal. Answers once its owner has carried the decision out or refused it; the pending items
        show it then."""
        return await take(await handlers.proposal_at(deps, session_id, seq, person.org_id, endpoint), body, person)

    return decide


async def owner_answer(owners: Owners, route: PublicRoute, person: Identity, session_id: str, seq: int) -> Any:
    """The answer of the owner's ``route`` for the person, once the decision is taken (None when the owner cannot
    tell it now: the decision stands all the same)."""
    values = {"session_id": segment(session_id), "seq": str(seq)}
    path = route.internal_path.format(**{name: values[name] for name in route.path_params})
    try:
        reply = await owners.call(route.owner, "GET", path, headers=caller_headers(person))
    except OwnerUnavailable:
        return None
    return reply.body if reply.status == 200 else None
