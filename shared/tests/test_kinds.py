"""The kind registry is the one source: the contracts, the tool routing and the decision endpoints agree
with it, and every kind of both specifications is in it with its owner, section, labels and decisions."""

from typing import get_args

import pytest

from assent.contracts import DecisionMade, ProposalOutcome, ProposalProposed, StudioEditRequest
from assent.contracts.tool_results import EditTarget
from assent.kinds import (
    ACTIONS,
    DECISIONS,
    FAILURE_OUTCOMES,
    KIND_NAMES,
    KINDS,
    OUTCOMES,
    SECTIONS,
    decisions_at,
    kind_of_tool,
    owner_of_tool,
)
from assent.topics import TOOL_CALLS, TOOL_ROUTES, route


def literal(model: type, field: str) -> tuple[str, ...]:
    return get_args(model.model_fields[field].annotation)


def test_the_contracts_speak_the_registry() -> None:
    for model in (ProposalProposed, DecisionMade, ProposalOutcome, StudioEditRequest, EditTarget):
        assert literal(model, "kind") == KIND_NAMES, model.__name__
    assert literal(ProposalProposed, "section") == SECTIONS
    assert literal(ProposalProposed, "action") == ACTIONS == literal(StudioEditRequest, "action")
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


@pytest.mark.parametrize(
    ("kind", "owner", "section", "labels", "decline", "decisions"),
    [
        ("memory", "edits", "Agents", ["Apply edit"], "Decline", {"apply": "applied", "decline": "declined"}),
        (
            "note",
            "edits",
            "State",
            ["Create note", "Apply edit", "Delete note"],
            "Decline",
            {"apply": "applied", "decline": "declined"},
        ),
        ("guild", "edits", "Guild", ["Apply edit"], "Decline", {"apply": "applied", "decline": "declined"}),
        (
            "collection",
            "edits",
            "State",
            ["Create table", "Apply edit", "Delete table"],
            "Decline",
            {"apply": "applied", "decline": "declined"},
        ),
        (
            "routine",
            "routines",
            "Agents",
            ["Create routine", "Apply edit", "Delete routine"],
            "Decline",
            {"apply": "applied", "decline": "declined"},
        ),
        ("access", "access", "Tools", ["Apply edit"], "Decline", {"apply": "applied", "decline": "declined"}),
        (
            "login",
            "connections",
            "Logins",
            ["Grant read access"],
            "Decline",
            {"grant": "granted", "decline": "declined"},
        ),
        ("draft", "edits", "Agents", ["Publish"], "Discard", {"publish": "published", "discard": "discarded"}),
        (
            "source",
            "deployer",
            "Source",
            ["Approve and deploy"],
            "Discard",
            {"approve": "approved", "discard": "discarded"},
        ),
    ],
)
def test_each_kind_of_both_specifications(
    kind: str, owner: str, section: str, labels: list[str], decline: str, decisions: dict[str, str]
) -> None:
    spec = KINDS[kind]
    assert (spec.owner, spec.section, list(spec.apply_labels), spec.decline_label) == (owner, section, labels, decline)
    assert dict(spec.decisions) == decisions
    assert spec.tools, kind


def test_the_gateway_decides_each_kind_at_one_endpoint_with_the_registry_decisions() -> None:
    from gateway.api import EditDecision

    assert get_args(EditDecision.model_fields["decision"].annotation) == decisions_at("edits") == ("apply", "decline")
    assert decisions_at("logins") == ("grant", "decline")
    assert KINDS["login"].decided_alone and not KINDS["memory"].decided_alone
