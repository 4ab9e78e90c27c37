"""The decisions on a session's requests: ``POST /api/studio/sessions/{session_id}/{endpoint}/{seq}``, one route for
each endpoint of the kind registry (:attr:`assent.kinds.KindSpec.endpoint`) but the Proposals page's, which has its own
shape (:mod:`gateway.proposals`).

Each route takes the decisions of the kinds decided at its endpoint (:func:`assent.kinds.decisions_at`; another is
422), answers 404 for a request of a kind decided elsewhere, as for a missing one, and goes the one way every decision
goes (:func:`gateway.handlers.decide`): the decision recorded with who and when, ``DecisionMade`` to the owner, and an
answer once the owner's ``ProposalOutcome`` is in the projection, so the pending items show it at once (a late one is
504 and the decision stands). A request resolved already answers its kind's :attr:`~assent.kinds.Answer.answered`.
When the endpoint's kinds name an owner's route (:attr:`assent.kinds.Answer.route`), a decision the owner took answers
with that route's answer beside the outcome (a login request's: the session's logins). Nothing here names a kind, an
endpoint or an owner's route: a kind decided at a new endpoint gets its route from its registry row.
"""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import JSONResponse
from pydantic import create_model

from assent.api import ROUTES, Error, Identity, PublicRoute, RequestModel, caller_headers
from assent.contracts import ProposalOutcome
from assent.http import PathId
from assent.kinds import KINDS, Answer, decisions_at

from . import handlers, proposals
from .adapters.owners import Owners, OwnerUnavailable, segment
from .answers import DECISION_ANSWERS, PERSON_ERRORS, decided
from .handlers import Deps

SeqPath = Annotated[int, Path(ge=0, le=2_147_483_647)]
OWN_SHAPE = (proposals.ENDPOINT,)
"""Endpoints whose decision route has a shape of its own (a source proposal's, by agent and proposal id)."""
ENDPOINTS: tuple[str, ...] = tuple(
    dict.fromkeys(spec.endpoint for spec in KINDS.values() if spec.endpoint not in OWN_SHAPE)
)
"""The endpoints decided at ``…/sessions/{session_id}/{endpoint}/{seq}``, in registry order."""
VIA = Literal["card", "tray", "item", "chat"]
"""Where the person decided: the request's card, the header tray, its pending item, or the chat."""


def answer_at(endpoint: str) -> Answer:
    """How ``endpoint`` answers, the same for every kind decided there (a registry that disagrees is refused)."""
    answers = {spec.answer for spec in KINDS.values() if spec.endpoint == endpoint}
    if len(answers) != 1:
        raise ValueError(f"the kinds decided at {endpoint!r} answer in {len(answers)} ways; they must answer alike")
    return answers.pop()


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


def decision_body(endpoint: str) -> type[RequestModel]:
    """The body of a decision at ``endpoint``: one of its decisions, and where it was taken. Its kinds take no options
    (:attr:`~assent.kinds.KindSpec.options`: only the Proposals page's decision carries them)."""
    if any(spec.options is not None for spec in KINDS.values() if spec.endpoint == endpoint):
        raise ValueError(f"the kinds decided at {endpoint!r} take options, which only the Proposals page carries")
    title = endpoint.title()
    return create_model(
        f"{title}Decision",
        __base__=RequestModel,
        __doc__=f"A decision on a request decided at …/{endpoint}/{{seq}}: {' or '.join(decisions_at(endpoint))}.",
        decision=(Literal[decisions_at(endpoint)], ...),  # type: ignore[arg-type]  # the values come from the registry
        via=(VIA, "card"),
    )


DECISION_BODIES: dict[str, type[RequestModel]] = {endpoint: decision_body(endpoint) for endpoint in ENDPOINTS}
"""Each endpoint's decision body (its decisions come from the registry)."""


def answers(endpoint: str) -> dict[int | str, dict[str, Any]]:
    """What a decision at ``endpoint`` answers, as its OpenAPI document says."""
    documented = dict(DECISION_ANSWERS)
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


def router(deps: Deps, owners: Owners, user: Any) -> APIRouter:
    """The decision route of each endpoint; ``user`` is the authenticating dependency."""
    decisions = APIRouter(
        prefix="/api/studio/sessions",
        tags=["studio"],
        responses={**PERSON_ERRORS, 404: {"model": Error, "description": "No such session in the caller's org"}},
    )
    for endpoint in ENDPOINTS:
        decisions.add_api_route(
            f"/{{session_id}}/{endpoint}/{{seq}}",
            deciding(deps, owners, user, endpoint),
            methods=["POST"],
            name=f"decide_{endpoint}",
            summary=f"Decide the request at that message ({' or '.join(decisions_at(endpoint))})",
            responses=answers(endpoint),
        )
    return decisions


def deciding(deps: Deps, owners: Owners, user: Any, endpoint: str) -> Any:
    """The handler of ``endpoint``'s decision route."""
    body_model, route = DECISION_BODIES[endpoint], answer_route(endpoint)

    async def decide(session_id: PathId, seq: SeqPath, body: body_model, person: user) -> JSONResponse:  # type: ignore[valid-type]
        """Decide one request. Answers once its owner has carried the decision out or refused it; the pending items
        show it then."""
        request = await handlers.request_at(deps, session_id, seq, person.org_id, endpoint)
        if not person.may_decide(request["owners"], request["editors"]):
            raise HTTPException(
                403,
                f"deciding a {request['kind']} request needs the admin or developer role, or to own or edit its agent",
            )
        choice: Any = body
        outcome = await handlers.decide(deps, request, choice.decision, person.user_id, choice.via)
        if route is None or outcome["status"] != 200 or outcome["outcome"] == "failed":
            return decided(outcome)
        return JSONResponse({**outcome, "answer": await owner_answer(owners, route, person, session_id, seq)})

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
