"""The decision routes come from the kind registry: one per endpoint (but the Proposals page's), each taking the
decisions of the kinds decided there, and answering as their row says; a registry that cannot be served so is
refused when the gateway starts."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI

from assent.api import Identity
from assent.kinds import KINDS, Answer, KindSpec, decisions_at
from gateway import decisions

S = "/api/studio/sessions/{session_id}"


def document() -> dict[str, Any]:
    app = FastAPI()
    app.include_router(decisions.router(None, None, Annotated[Identity, Depends(lambda: None)]))  # type: ignore[arg-type]  # no call is made
    return app.openapi()


def test_each_endpoint_of_the_registry_has_its_decision_route_with_its_decisions() -> None:
    doc = document()
    endpoints = {spec.endpoint for spec in KINDS.values()} - {"proposals"}
    assert set(doc["paths"]) == {f"{S}/{endpoint}/{{seq}}" for endpoint in endpoints}
    for endpoint in endpoints:
        body = doc["components"]["schemas"][f"{endpoint.title()}Decision"]
        assert tuple(body["properties"]["decision"]["enum"]) == decisions_at(endpoint)
        assert body["required"] == ["decision"]


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
            "the kinds decided at 'x' answer in 2 ways",
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
