"""The kind registry is the one source: the contracts, the tool routing and the decision endpoints agree
with it, and each of its rows is whole (the tests read the rows; they keep no copy of them)."""

from typing import get_args

import pytest
from pydantic import BaseModel

from assent.contracts import Card, DecisionMade, ProposalOutcome, ProposalProposed, ProposalTarget, ProposalWidget
from assent.contracts.registered import OneOf
from assent.kinds import (
    ACTIONS,
    DECISIONS,
    FAILURE_OUTCOMES,
    KIND_NAMES,
    KINDS,
    ORIGINS,
    OUTCOMES,
    PAGE_KINDS,
    SECTIONS,
    KindSpec,
    Options,
    chat_linked,
    decisions_at,
    kind_of_tool,
    owner_of_tool,
)
from assent.topics import TOOL_CALLS, TOOL_ROUTES, route


def literal(model: type[BaseModel], field: str) -> tuple[str, ...]:
    """The values ``model``'s ``field`` takes: the registry's, read as the field reads them."""
    (values,) = [meta for meta in model.model_fields[field].metadata if isinstance(meta, OneOf)]
    return values.values()


def test_the_contracts_speak_the_registry() -> None:
    for model in (ProposalProposed, DecisionMade, ProposalOutcome, ProposalWidget, ProposalTarget):
        assert literal(model, "kind") == KIND_NAMES, model.__name__
    assert literal(ProposalProposed, "section") == SECTIONS
    assert literal(ProposalProposed, "action") == ACTIONS == literal(ProposalWidget, "action")
    assert literal(DecisionMade, "decision") == DECISIONS
    assert literal(ProposalOutcome, "outcome") == OUTCOMES
    assert set(FAILURE_OUTCOMES) == {"stale", "refused", "failed"}


def test_every_tool_routes_to_its_owner_and_only_the_registry_names_tools() -> None:
    tools = {tool for spec in KINDS.values() for tool in (*spec.tools, *spec.read_tools)}
    assert set(TOOL_ROUTES) == tools
    for tool in tools:
        assert route(tool) is TOOL_CALLS[owner_of_tool(tool)]
        assert tool in kind_of_tool(tool).tools + kind_of_tool(tool).read_tools
    with pytest.raises(KeyError):
        route("studio_edit_task")  # Tasks are drafts, never a proposal


def test_each_tool_is_named_by_one_kind() -> None:
    named = [tool for spec in KINDS.values() for tool in (*spec.tools, *spec.read_tools)]
    assert sorted(named) == sorted(set(named))


@pytest.mark.parametrize("spec", KINDS.values(), ids=KIND_NAMES)
def test_each_kind_is_a_whole_row(spec: KindSpec) -> None:
    """Every row, a new one too, says who owns the kind, which tools propose it, where its requests show, what each
    action's button says, which decision writes nothing, and what each decision produces."""
    assert KINDS[spec.name] is spec
    assert spec.owner and spec.tools and spec.section and spec.endpoint and spec.decline_label
    assert spec.actions and all(spec.actions.values()), "each action has its apply label"
    assert spec.decline in spec.decisions
    assert all(outcome not in FAILURE_OUTCOMES for outcome in spec.decisions.values())
    assert len(set(spec.decisions.values())) == len(spec.decisions), "each decision has an outcome of its own"


def test_the_gateway_decides_each_kind_at_one_endpoint_with_the_registry_decisions() -> None:
    from gateway.decisions import DECISION_BODIES

    assert set(DECISION_BODIES) == {spec.endpoint for spec in KINDS.values()}
    for endpoint, body in DECISION_BODIES.items():
        assert get_args(body.model_fields["decision"].annotation) == decisions_at(endpoint)
    assert decisions_at("edits") == ("apply", "decline")
    assert decisions_at("logins") == ("grant", "decline")
    assert KINDS["login"].decided_alone and not KINDS["memory"].decided_alone


def test_a_kinds_options_and_origins_are_its_own() -> None:
    """Options go with some of the kind's own decisions and are a model its owner declares beside the row; a card's
    origin is one a kind declares, and a kind decided on an agent's page is one of the page kinds."""
    for spec in KINDS.values():
        if spec.options is not None:
            assert set(spec.options.decisions) <= set(spec.decisions)
            assert issubclass(spec.options.model, BaseModel)
            assert spec.options.model.__module__.startswith(f"{spec.owner}_contract."), "declared in its contract"
        assert len({origin.name for origin in spec.origins}) == len(spec.origins)
        assert (spec.name in PAGE_KINDS) == (spec.addressed_by == "agent")
    origin, none = get_args(Card.model_fields["origin"].annotation)
    (values,) = [meta for meta in get_args(origin)[1:] if isinstance(meta, OneOf)]
    assert values.values() == ORIGINS and none is type(None)
    assert set(ORIGINS) == {origin.name for spec in KINDS.values() for origin in spec.origins}
    assert chat_linked("source", "agent") and not chat_linked("source", "builder")
    assert chat_linked("source", None) and chat_linked("memory", None)
    with pytest.raises(ValueError, match="not all its decisions"):
        KindSpec("x", "edits", ("t",), "S", {"a": "A"}, options=Options(BaseModel, ("publish",)))
