"""The proposal kit's own rules, on :class:`~assent.testing.FakeUnitOfWork` with toy kinds: a proposal that replaces a
waiting one resolves it as superseded through the usual outcome; a proposal the registry does not allow (an action,
an origin or a replacement its kind does not declare) is refused with the reason, as a tool result."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from assent.contracts import (
    CardField,
    DecisionMade,
    ProposalBase,
    ProposalOutcome,
    ProposalProposed,
    ProposalTarget,
    SessionContext,
    ToolCall,
    ToolResult,
)
from assent.domain import Refusal
from assent.kinds import EXPIRE, EXPIRED, KINDS, SUPERSEDED
from assent.runtime import Applied, Call, LiveView, OwnerKit, Proposal, ProposalKind, Stale, StoredProposal, Tool
from assent.runtime.kit import proposal_id_for
from assent.runtime.uow import UnitOfWork
from assent.testing import FakeUnitOfWork

CONTEXT = SessionContext(org_id="acme", source_guild_id="g1", operator_user_id="olga")


class DraftFields(BaseModel):
    """A Task draft's own widget fields, as its contract declares them (a stand-in: the kit knows none)."""

    agent: dict[str, str]
    draft_id: str
    rationale: str


class Ask(BaseModel):
    """What a toy proposal asks: its agent and action, and (to drive the kit's checks) the proposal it claims to
    replace instead of the one its kind's rule finds."""

    model_config = ConfigDict(extra="forbid")
    agent_id: str
    action: str
    replaces: str | None = None
    origin: str | None = None


class ToyKind(ProposalKind):
    """A kind whose proposing tool replaces, by its own rule, the waiting proposal of the same agent in the same
    turn (the rule of Task drafts) when its registry row declares superseding, and whose apply writes nothing."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[str, str, str], str] = {}

    def tools(self) -> dict[str, Tool]:
        return {tool: Tool(Ask, self.propose) for tool in (*self.spec.tools, *self.spec.read_tools)}

    async def propose(self, call: Call, args: Ask, uow: UnitOfWork) -> Proposal | Refusal:
        key = (call.message.session_id, call.message.turn_id, args.agent_id)
        if args.replaces is not None:  # what a kind with a wrong rule would claim
            supersedes = await uow.proposals.get(args.replaces)
        else:
            waiting = await uow.proposals.get(self.waiting.get(key, ""))
            found = waiting is not None and waiting.status == "pending" and self.spec.supersedes is not None
            supersedes = waiting if found else None
        self.waiting[key] = proposal_id_for(call.message.session_id, call.message.tool_call_id)
        return Proposal(
            action=args.action,
            target=ProposalTarget(kind=self.name, label=f"{self.name} of {args.agent_id}", agent_id=args.agent_id),  # type: ignore[arg-type]
            base=ProposalBase(hash=None),
            proposed_hash="h",
            reason="asked",
            before="",
            after="text\n",
            fields=(CardField(name="text", before=None, after="text\n"),),
            payload={},
            origin=args.origin,
            supersedes=supersedes,
            widget_fields=self.widget_fields(args.agent_id),
        )

    def widget_fields(self, agent_id: str) -> DraftFields | None:
        """What a draft's widget names besides every kind's (its agent, its id, why); nothing for the other kinds."""
        if self.name != "draft":
            return None
        return DraftFields(agent={"id": agent_id, "name": agent_id}, draft_id=f"draft_{agent_id}", rationale="asked")

    async def live_view(self, proposal: StoredProposal, uow: UnitOfWork) -> LiveView:
        return LiveView(hash=None, version=None, fields=())

    async def apply(
        self, proposal: StoredProposal, decision: DecisionMade, uow: UnitOfWork
    ) -> Applied | Stale | Refusal:
        return Applied("done")


class Rig:
    def __init__(self, kind: str) -> None:
        self.kind = type(f"Toy{kind.title()}Kind", (ToyKind,), {"name": kind})()
        self.kit = OwnerKit(KINDS[kind].owner, [self.kind])
        self.uow = FakeUnitOfWork()
        self.seq = itertools.count(1)

    async def ask(
        self, agent_id: str, action: str, *, turn: str = "t1", replaces: str | None = None, origin: str | None = None
    ) -> ToolResult:
        self.uow.clear()
        n = next(self.seq)
        arguments: dict[str, Any] = {"agent_id": agent_id, "action": action, "replaces": replaces, "origin": origin}
        message = ToolCall(
            session_id="s1",
            seq=n,
            turn_id=turn,
            step=0,
            tool_call_id=f"call_{n}",
            tool=self.kind.spec.tools[0],
            arguments=arguments,
            session=CONTEXT,
        )
        await self.kit.on_tool_call(message, self.uow)
        (result,) = self.uow.messages(ToolResult)
        return result

    async def decide(self, proposal_id: str, decision: str) -> ProposalOutcome:
        self.uow.clear()
        held = self.uow.proposals.proposals[proposal_id]
        message = DecisionMade(
            decision_id=f"dec_{proposal_id}_{decision}",
            proposal_id=proposal_id,
            session_id=held.session_id,
            seq=held.seq,
            kind=held.kind,  # type: ignore[arg-type]
            decision=decision,  # type: ignore[arg-type]
            actor="dana",
        )
        await self.kit.on_decision(message, self.uow)
        (outcome,) = self.uow.messages(ProposalOutcome)
        return outcome


def proposal_id(result: ToolResult) -> str:
    assert result.ok and result.widget is not None, result
    return result.widget.proposal_id


async def test_a_draft_replaced_in_the_same_turn_is_superseded_through_its_outcome() -> None:
    rig = Rig("draft")
    first = proposal_id(await rig.ask("ada", "publish"))
    second = await rig.ask("ada", "publish")
    (outcome,) = rig.uow.messages(ProposalOutcome)
    assert (outcome.proposal_id, outcome.outcome, outcome.status, outcome.seq) == (first, SUPERSEDED, 200, 1)
    assert outcome.effects == {"replaced_by": proposal_id(second)} and outcome.resolved_by == "olga"
    assert outcome.causation_id == rig.uow.messages(ProposalProposed)[0].causation_id
    held = rig.uow.proposals.proposals[first]
    assert (held.status, held.resolution) == (SUPERSEDED, {"replaced_by": proposal_id(second)})
    assert rig.uow.proposals.proposals[proposal_id(second)].status == "pending"

    # Replaced, it takes no decision; its successor is discarded with the registry's decline word.
    late = await rig.decide(first, "publish")
    assert (late.outcome, late.status) == ("refused", 422) and "already superseded" in late.detail
    assert (await rig.decide(proposal_id(second), "discard")).outcome == "discarded"


async def test_another_agent_or_a_later_turn_replaces_nothing() -> None:
    rig = Rig("draft")
    first = proposal_id(await rig.ask("ada", "publish"))
    proposal_id(await rig.ask("bob", "publish"))
    proposal_id(await rig.ask("ada", "publish", turn="t2"))
    assert rig.uow.messages(ProposalOutcome) == []
    assert rig.uow.proposals.proposals[first].status == "pending"


@pytest.mark.parametrize(
    ("kind", "first", "second", "code", "words"),
    [
        pytest.param(
            "draft",
            {"agent_id": "ada", "action": "publish"},
            {"agent_id": "ada", "action": "edit"},
            "undeclared_action",
            "proposed the action 'edit', which a draft proposal does not take; it takes 'publish'",
            id="an-action-the-kind-does-not-declare",
        ),
        pytest.param(
            "draft",
            {"agent_id": "ada", "action": "publish"},
            {"agent_id": "ada", "action": "publish", "origin": "builder"},
            "undeclared_origin",
            "proposed from the origin 'builder', which a draft proposal does not name; it names none",
            id="an-origin-for-a-kind-that-declares-none",
        ),
        pytest.param(
            "source",
            {"agent_id": "ada", "action": "propose", "origin": "agent"},
            {"agent_id": "bob", "action": "propose", "origin": "studio"},
            "undeclared_origin",
            "proposed from the origin 'studio', which a source proposal does not name; it names 'agent' or 'builder'",
            id="an-origin-the-kind-does-not-declare",
        ),
        pytest.param(
            "draft",
            {"agent_id": "ada", "action": "publish"},
            {"agent_id": "bob", "action": "publish", "replaces": "first"},
            "cannot_supersede",
            "replaces only a waiting one of the same agent in the same turn",
            id="another-agents-draft",
        ),
        pytest.param(
            "draft",
            {"agent_id": "ada", "action": "publish"},
            {"agent_id": "ada", "action": "publish", "turn": "t2", "replaces": "first"},
            "cannot_supersede",
            "replaces only a waiting one of the same agent in the same turn",
            id="a-draft-of-an-earlier-turn",
        ),
        pytest.param(
            "collection",
            {"agent_id": "ada", "action": "create"},
            {"agent_id": "ada", "action": "edit", "replaces": "first"},
            "cannot_supersede",
            "a collection proposal replaces no other",
            id="a-kind-that-does-not-supersede",
        ),
    ],
)
async def test_a_proposal_the_registry_does_not_allow_is_refused_with_the_reason(
    kind: str, first: dict[str, Any], second: dict[str, Any], code: str, words: str
) -> None:
    rig = Rig(kind)
    kept = proposal_id(await rig.ask(**first))
    if second.get("replaces") == "first":
        second = {**second, "replaces": kept}
    result = await rig.ask(**second)
    assert not result.ok and result.error is not None and result.widget is None
    assert result.error.code == code and words in result.error.message, result.error
    assert result.error.status == (422 if code.startswith("undeclared_") else 409)
    # Answered once, as any refused call: no request recorded or announced, and the waiting one is untouched.
    assert rig.uow.messages(ProposalProposed) == [] and rig.uow.messages(ProposalOutcome) == []
    assert list(rig.uow.proposals.proposals) == [kept]
    assert rig.uow.proposals.proposals[kept].status == "pending"


async def test_a_card_names_the_origin_its_kind_declares() -> None:
    rig = Rig("source")
    for origin in ("builder", "agent"):
        await rig.ask("ada", "propose", origin=origin, turn=origin)
        (proposed,) = rig.uow.messages(ProposalProposed)
        assert proposed.card.origin == origin
    rig = Rig("draft")  # a kind that declares no origin names none
    await rig.ask("ada", "publish")
    assert rig.uow.messages(ProposalProposed)[0].card.origin is None


async def test_a_replaced_proposal_is_not_replaced_twice() -> None:
    rig = Rig("draft")
    first = proposal_id(await rig.ask("ada", "publish"))
    proposal_id(await rig.ask("ada", "publish"))
    again = await rig.ask("ada", "publish", replaces=first)
    assert again.error is not None and again.error.code == "cannot_supersede"
    assert f"cannot replace {first}: it was already superseded" in again.error.message


async def test_a_policy_s_expiry_resolves_any_kind_as_expired_writing_nothing() -> None:
    rig = Rig("draft")
    waiting = proposal_id(await rig.ask("ada", "publish"))
    outcome = await rig.decide(waiting, EXPIRE)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == (EXPIRED, 200, "dana")
    assert outcome.detail == "expired: it waited longer than its policy allows; nothing was written"
    assert rig.uow.proposals.proposals[waiting].status == EXPIRED
    late = await rig.decide(waiting, "publish")
    assert (late.outcome, late.status) == ("refused", 422) and "already expired by dana" in late.detail
