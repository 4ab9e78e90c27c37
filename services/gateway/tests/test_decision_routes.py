"""The decision routes come from the kind registry: one per endpoint, at the address its kinds are decided by, each
taking the decisions and options of the kinds decided there, letting decide whom their row lets decide, and
answering as their row says; a registry that cannot be served so is refused when the gateway starts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header

from assent.api import Identity, RequestModel
from assent.contracts import Card, LineCounts, ProposalBase, ProposalOutcome, ProposalTarget
from assent.kinds import KINDS, PAGE_KINDS, Answer, KindSpec, Options, decisions_at
from gateway import api, decisions, handlers
from gateway.domain.proposals import Proposal

S = "/api/studio/sessions/{session_id}"
AG = "/api/agents/{agent_id}"


def document() -> dict[str, Any]:
    app = FastAPI()
    app.include_router(decisions.router(None, None, Annotated[Identity, Depends(lambda: None)]))  # type: ignore[arg-type]  # no call is made
    return app.openapi()


def test_each_endpoint_of_the_registry_has_its_decision_route_with_its_decisions() -> None:
    doc = document()
    endpoints = {spec.endpoint: spec.addressed_by for spec in KINDS.values()}
    assert set(doc["paths"]) == {
        f"{S}/{endpoint}/{{seq}}" if by == "session" else f"{AG}/{endpoint}/{{proposal_id}}"
        for endpoint, by in endpoints.items()
    }
    for endpoint in endpoints:
        body = doc["components"]["schemas"][f"{endpoint.title()}Decision"]
        assert tuple(body["properties"]["decision"]["enum"]) == decisions_at(endpoint)
        assert body["required"] == ["decision"]


def test_a_kinds_options_are_fields_of_its_decision_body() -> None:
    """The source kind's approval takes a branch and a commit message beside the decision; every other kind, none."""
    doc = document()
    for endpoint in {spec.endpoint for spec in KINDS.values()}:
        body = doc["components"]["schemas"][f"{endpoint.title()}Decision"]
        options = decisions.options_at(endpoint)
        assert set(body["properties"]) == {"decision", "via", *(options.model.model_fields if options else ())}
    page = doc["components"]["schemas"]["ProposalsDecision"]
    assert {"branch", "message"} <= set(page["properties"]) and page["properties"]["via"]["default"] == "page"
    assert "pull or merge request" in doc["paths"][f"{AG}/proposals/{{proposal_id}}"]["post"]["description"]


@pytest.mark.parametrize(
    ("kind", "seq", "agent_id", "proposal_id", "path"),
    [
        ("memory", 3, "ada", "p1", "/edits/3"),
        ("login", 4, None, "p2", "/logins/4"),
        ("draft", 5, "ada", "p3", "/drafts/5"),
        ("source", 6, "ada", "p4", "ada/p4"),
    ],
)
def test_a_proposal_is_decided_at_its_kinds_address(
    kind: str, seq: int, agent_id: str | None, proposal_id: str, path: str
) -> None:
    where = decisions.decision_path(proposal_of(kind, seq=seq, agent_id=agent_id, proposal_id=proposal_id))
    if kind in PAGE_KINDS:
        assert where == f"/api/agents/ada/{KINDS[kind].endpoint}/p4"
    else:
        assert where == f"/api/studio/sessions/s1{path}"


def test_a_login_decision_answers_with_the_owners_route_that_its_row_names() -> None:
    doc = document()
    answers = doc["paths"][f"{S}/logins/{{seq}}"]["post"]["responses"]
    assert answers["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/LoginsOutcome"}
    answer = doc["components"]["schemas"]["LoginsOutcome"]["properties"]["answer"]
    assert answer["anyOf"][0] == {"$ref": "#/components/schemas/SessionConnections"}
    assert decisions.answer_route("logins").name == KINDS["login"].answer.route == "session_connections"  # type: ignore[union-attr]
    edits = doc["paths"][f"{S}/edits/{{seq}}"]["post"]["responses"]
    assert edits["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ProposalOutcome"}
    assert decisions.answer_route("edits") is None


def spec(name: str, endpoint: str, answer: Answer) -> KindSpec:
    return KindSpec(
        name,
        "connections",
        (f"t_{name}",),
        "S",
        {"a": "A"},
        "Decline",
        {"a": "a", "decline": "d"},
        endpoint,
        answer=answer,
    )


@pytest.mark.parametrize(
    ("kinds", "endpoint", "refusal"),
    [
        (
            {"a": spec("a", "x", Answer()), "b": spec("b", "x", Answer(answered=409))},
            "x",
            "the kinds decided at 'x' differ in answer",
        ),
        ({"a": spec("a", "x", Answer(route="no_such_route"))}, "x", "'x' answers with 'no_such_route'"),
        ({"a": spec("a", "x", Answer(route="set_connection_grant"))}, "x", "must be one GET route"),
    ],
)
def test_a_registry_that_cannot_be_served_is_refused(
    monkeypatch: pytest.MonkeyPatch, kinds: dict[str, KindSpec], endpoint: str, refusal: str
) -> None:
    monkeypatch.setattr(decisions, "KINDS", kinds)
    with pytest.raises(ValueError, match=refusal):
        decisions.answer_route(endpoint)


class Required(RequestModel):
    """Options with a field a decision must give: refused (every option is optional)."""

    branch: str


class Chosen(RequestModel):
    note: str | None = None


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"b": {"addressed_by": "agent"}}, "differ in addressed_by"),
        (
            {"a": {"options": Options(Required, ("a",))}, "b": {"options": Options(Required, ("a",))}},
            "must be optional fields",
        ),
        ({"a": {"options": Options(Chosen, ("a",))}}, "differ in options"),
    ],
)
def test_kinds_decided_at_one_endpoint_are_decided_alike(
    monkeypatch: pytest.MonkeyPatch, changes: dict[str, dict[str, Any]], refusal: str
) -> None:
    kinds = {name: spec(name, "x", Answer()) for name in ("a", "b")}
    kinds = {name: dataclasses.replace(kind, **changes.get(name, {})) for name, kind in kinds.items()}
    monkeypatch.setattr(decisions, "KINDS", kinds)
    with pytest.raises(ValueError, match=refusal):
        decisions.decision_body("x")


# --- deciding through a route, on fakes --------------------------------------------------------------------------

ROLES = {
    "dev": frozenset({"developer"}),
    "rev": frozenset({"reviewer"}),
    "view": frozenset({"viewer"}),
    "own": frozenset({"viewer"}),
}


class Decided:
    """What the routes hand to :func:`gateway.handlers.decide`; each decision's outcome is its own word's."""

    def __init__(self) -> None:
        self.taken: list[tuple[str, str, str, dict[str, Any]]] = []

    async def __call__(
        self,
        deps: Any,
        proposal: Proposal,
        decision: str,
        actor: str,
        via: str,
        options: dict[str, Any],
        roles: frozenset[str] = frozenset(),
    ) -> ProposalOutcome:
        self.taken.append((proposal.proposal_id, decision, via, options))
        outcome = KINDS[proposal.kind].decisions[decision]
        return ProposalOutcome(
            decision_id="dec_1",
            proposal_id=proposal.proposal_id,
            session_id=proposal.session_id,
            seq=proposal.seq,
            kind=proposal.kind,
            outcome=outcome,
            status=200,
            detail=outcome,
        )


def proposal_of(kind: str, *, seq: int = 3, agent_id: str | None = "ada", proposal_id: str | None = None) -> Proposal:
    """A pending proposal of ``kind`` whose agent is owned by ``own``."""
    spec = KINDS[kind]
    return Proposal(
        session_id="s1",
        seq=seq,
        proposal_id=proposal_id or f"p_{kind}",
        tool_call_id=f"c{seq}",
        turn_id="t1",
        step=1,
        tool=spec.tools[0],
        kind=kind,
        action=next(iter(spec.actions)),
        section=spec.section,
        agent_id=agent_id,
        target=ProposalTarget(kind=kind, label=kind),
        base=ProposalBase(),
        proposed_hash="h1",
        lines=LineCounts(added=1, removed=0),
        widens=False,
        reason="clearer",
        card=Card(title=kind, apply_label="Apply", before="", after="x\n"),
        trace={},
        status="pending",
        stale=False,
        resolved_by=None,
        resolved_at=None,
        proposed_at=datetime.now(UTC),
        owners=("own",),
        editors=(),
    )


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> Decided:
    taken = Decided()

    async def at(deps: Any, session_id: str, seq: int, org_id: str, endpoint: str) -> Proposal:
        (kind,) = [name for name, spec in KINDS.items() if spec.endpoint == endpoint][:1]
        return proposal_of(kind)

    async def of(deps: Any, agent_id: str, proposal_id: str, org_id: str, endpoint: str) -> Proposal:
        return proposal_of(next(name for name, spec in KINDS.items() if spec.endpoint == endpoint))

    monkeypatch.setattr(handlers, "proposal_at", at)
    monkeypatch.setattr(handlers, "proposal_of", of)
    monkeypatch.setattr(handlers, "decide", taken)
    return taken


def client() -> httpx.AsyncClient:
    async def person(x_user: Annotated[str, Header()]) -> Identity:
        return Identity(x_user, "acme", ROLES[x_user])

    app = FastAPI()
    app.include_router(decisions.router(None, None, Annotated[Identity, Depends(person)]))  # type: ignore[arg-type]  # the fakes take no deps
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway")


SOURCE = "/api/agents/ada/proposals/p_source"
MEMORY = "/api/studio/sessions/s1/edits/3"


@pytest.mark.parametrize(
    ("who", "path", "body", "status", "sent"),
    [
        ("dev", MEMORY, {"decision": "apply"}, 200, ("apply", "card", {})),
        ("own", MEMORY, {"decision": "decline", "via": "tray"}, 200, ("decline", "tray", {})),
        ("rev", MEMORY, {"decision": "decline"}, 403, "deciding a memory request needs the admin or developer"),
        ("dev", MEMORY, {"decision": "apply", "branch": {"kind": "new"}}, 422, None),
        ("dev", SOURCE, {"decision": "approve"}, 200, ("approve", "page", {})),
        (
            "own",
            SOURCE,
            {
                "decision": "approve",
                "branch": {"kind": "new", "name": "fix/refunds"},
                "message": "Refunds",
                "via": "card",
            },
            200,
            ("approve", "card", {"branch": {"kind": "new", "name": "fix/refunds"}, "message": "Refunds"}),
        ),
        ("rev", SOURCE, {"decision": "discard"}, 200, ("discard", "page", {})),
        ("rev", SOURCE, {"decision": "approve"}, 403, "deciding a source request needs the admin or developer"),
        ("view", SOURCE, {"decision": "discard"}, 403, "the discard decision on a source request needs permission to"),
        ("dev", SOURCE, {"decision": "discard", "message": "No"}, 422, "message go with approve only, not discard"),
        ("dev", SOURCE, {"decision": "discard", "branch": {"kind": "production"}}, 422, "branch go with approve only"),
        ("dev", SOURCE, {"decision": "apply"}, 422, None),
        ("dev", SOURCE, {"decision": "approve", "via": "tray"}, 422, None),
    ],
)
async def test_a_decision_is_taken_by_whom_its_kind_lets_with_its_options(
    decided: Decided, who: str, path: str, body: dict[str, Any], status: int, sent: Any
) -> None:
    async with client() as http:
        answer = await http.post(path, json=body, headers={"X-User": who})
    assert answer.status_code == status, answer.text
    if status == 200:
        assert [taken[1:] for taken in decided.taken] == [sent]
        return
    assert decided.taken == []
    if sent is not None:
        assert sent in answer.json()["detail"]


def test_every_decision_route_documents_its_503_while_kafka_takes_no_writes() -> None:
    doc = document()
    for path, methods in doc["paths"].items():
        refused = methods["post"]["responses"]["503"]
        assert "ASSENT_KAFKA_STALL_SECONDS" in refused["description"] and "Retry-After" in refused["description"], path


async def test_a_write_refused_while_kafka_takes_no_writes_is_503_with_retry_and_retry_after() -> None:
    """The answer's shape: the API's error body with ``retry``, and ``Retry-After``, as for a database outage."""
    app = FastAPI()
    api.errors(app)

    @app.post("/decide")
    async def decide() -> None:
        raise handlers.KafkaStalled(12.4)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        answer = await http.post("/decide")
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
    assert answer.json() == {
        "detail": "Kafka has not taken the gateway's messages for 12 s (too few in-sync replicas, or no leader); "
        "nothing was recorded: try again shortly",
        "retry": True,
    }
