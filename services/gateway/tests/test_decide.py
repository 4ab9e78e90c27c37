"""Deciding a proposal, as a use case on fakes: what is refused before anything is sent, what is recorded and sent,
and how the outcome comes back (handed over by the event feed, or read from the projection while the feed
cannot be counted on, or not in time)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from assent.contracts import Card, DecisionMade, LineCounts, ProposalBase, ProposalOutcome, ProposalTarget
from assent.kinds import KINDS
from assent.policy import Policy, Require, waiting_for
from gateway.adapters.approvals import Tally
from gateway.domain.proposals import Proposal
from gateway.handlers import AwaitingApprovals, Deps, KafkaStalled, NotCounted, OutcomePending, Refused, decide


class FakeDecisions:
    """Records decisions; ``then`` runs once one is recorded (what the owner's answer would do)."""

    def __init__(self, then: Callable[[DecisionMade], None] = lambda _: None) -> None:
        self.recorded: list[DecisionMade] = []
        self.outcomes: dict[str, ProposalOutcome] = {}
        self.reads = 0
        self.then = then

    async def record(self, message: DecisionMade) -> None:
        self.recorded.append(message)
        self.then(message)

    async def outcome(self, decision_id: str) -> ProposalOutcome | None:
        self.reads += 1
        return self.outcomes.get(decision_id)


class FakeFeed:
    def __init__(self, *, reliable: bool = True) -> None:
        self.reliable = reliable
        self.waiting: dict[str, asyncio.Future[ProposalOutcome | None]] = {}
        self.forgotten: list[str] = []

    def expect(self, decision_id: str) -> asyncio.Future[ProposalOutcome | None]:
        future: asyncio.Future[ProposalOutcome | None] = asyncio.get_running_loop().create_future()
        self.waiting[decision_id] = future
        return future

    def forget(self, decision_id: str) -> None:
        self.forgotten.append(decision_id)
        self.waiting.pop(decision_id, None)


def proposal(status: str = "pending", kind: str = "memory") -> Proposal:
    spec = KINDS[kind]
    return Proposal(
        session_id="s1",
        seq=3,
        proposal_id="prop_1",
        tool_call_id="call_1",
        turn_id="t1",
        step=1,
        tool=spec.tools[0],
        kind=kind,
        action=next(iter(spec.actions)),
        section=spec.section,
        agent_id="ada",
        target=ProposalTarget(kind=kind, label="Memory"),
        base=ProposalBase(version=1, hash="h0"),
        proposed_hash="h1",
        lines=LineCounts(added=1, removed=0),
        widens=False,
        reason="clearer",
        card=Card(title="Memory", apply_label="Apply edit", before="", after="x\n"),
        trace={},
        status=status,
        stale=False,
        resolved_by="olga" if status != "pending" else None,
        resolved_at=datetime(2026, 12, 1, 12, 0, tzinfo=UTC) if status != "pending" else None,
        proposed_at=datetime(2026, 12, 1, 11, 0, tzinfo=UTC),
    )


def deps(decisions: FakeDecisions, feed: FakeFeed, timeout: float = 5.0) -> Deps:
    settings = SimpleNamespace(decision_timeout_seconds=timeout)
    return Deps(runtime=None, settings=settings, events=feed, decisions=decisions)  # type: ignore[arg-type]  # fakes


def outcome_of(message: DecisionMade) -> ProposalOutcome:
    """The owner's outcome of ``message`` (the same each time it is asked for)."""
    return ProposalOutcome(
        id=uuid.uuid5(uuid.NAMESPACE_OID, message.decision_id),
        ts=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        decision_id=message.decision_id,
        proposal_id=message.proposal_id,
        session_id=message.session_id,
        seq=message.seq,
        kind=message.kind,
        outcome="applied",
        status=200,
        detail="applied",
    )


@pytest.mark.parametrize(
    ("given", "decision", "status", "refusal"),
    [
        (proposal("applied"), "apply", 422, "this request was already applied by olga at 2026-12-01 12:00:00 UTC"),
        # The status of an answered request is its kind's (Answer.answered): the seed's …/logins/{seq} says 409.
        (
            proposal("granted", "login"),
            "grant",
            409,
            "this request was already granted by olga at 2026-12-01 12:00:00 UTC",
        ),
        (proposal(), "grant", 422, "a memory request is decided with apply or decline, not 'grant'"),
        (proposal(kind="login"), "apply", 422, "a login request is decided with grant or decline, not 'apply'"),
        (proposal(kind="source"), "apply", 422, "a source request is decided with approve or discard, not 'apply'"),
    ],
)
async def test_a_decision_that_does_not_fit_is_refused_before_anything_is_sent(
    given: Proposal, decision: str, status: int, refusal: str
) -> None:
    decisions, feed = FakeDecisions(), FakeFeed()
    with pytest.raises(Refused) as refused:
        await decide(deps(decisions, feed), given, decision, "olga", "card")
    assert (refused.value.status, refused.value.detail) == (status, refusal)
    assert decisions.recorded == [] and feed.waiting == {}


async def test_the_outcome_handed_over_by_the_feed_answers_the_decision() -> None:
    feed = FakeFeed()
    decisions = FakeDecisions(then=lambda m: feed.waiting[m.decision_id].set_result(outcome_of(m)))

    answer = await decide(deps(decisions, feed), proposal(), "apply", "olga", "card", {"note": "x"})

    [sent] = decisions.recorded
    assert (sent.proposal_id, sent.session_id, sent.seq, sent.kind) == ("prop_1", "s1", 3, "memory")
    assert (sent.decision, sent.actor, sent.via, sent.options) == ("apply", "olga", "card", {"note": "x"})
    assert answer == outcome_of(sent)
    assert decisions.reads == 0, "a reliable feed needs no read of the projection"
    assert feed.forgotten == [sent.decision_id] and feed.waiting == {}


@pytest.mark.parametrize("how", ["the feed was not reliable", "the feed lost Redis while waiting"])
async def test_without_a_reliable_feed_the_outcome_is_read_from_the_projection(how: str) -> None:
    feed = FakeFeed(reliable=how != "the feed was not reliable")

    def answered(message: DecisionMade) -> None:
        decisions.outcomes[message.decision_id] = outcome_of(message)
        if feed.reliable:
            feed.waiting[message.decision_id].set_result(None)  # the feed's word that it cannot be counted on

    decisions = FakeDecisions(then=answered)
    answer = await decide(deps(decisions, feed), proposal(), "decline", "olga", "card")
    [sent] = decisions.recorded
    assert answer == outcome_of(sent) and decisions.reads == 1


async def test_an_outcome_that_does_not_come_in_time_leaves_the_decision_standing() -> None:
    decisions, feed = FakeDecisions(), FakeFeed()
    with pytest.raises(OutcomePending) as late:
        await decide(deps(decisions, feed, timeout=0.01), proposal(), "apply", "olga", "card")
    [sent] = decisions.recorded
    assert late.value.decision_id == sent.decision_id
    assert feed.forgotten == [sent.decision_id]


# --- several approvers: a require rule of the organisation's policy ---------------------------------------------

TWO_ADMINS = Policy.model_validate(
    {
        "rules": [
            {"name": "two admins", "match": {"kind": ["memory"]}, "require": {"approvals": 2, "roles": ["admin"]}},
            {"name": "logins by olga", "match": {"kind": ["login"]}, "require": {"approvals": 1, "people": ["olga"]}},
        ]
    }
)
ADMIN, DEVELOPER = frozenset({"admin"}), frozenset({"developer"})


class FakeApprovals:
    """Counts approvals per proposal as the store does: one per person, the decision recorded with the last one."""

    def __init__(self, decisions: FakeDecisions) -> None:
        self.decisions = decisions
        self.approvers: dict[str, list[str]] = {}
        self.verdicts: list[tuple[object, ...]] = []

    async def approve(self, message: DecisionMade, verdict: tuple[object, ...], require: Require) -> Tally:
        self.verdicts.append(verdict)
        approvers = self.approvers.setdefault(message.proposal_id, [])
        if message.actor in approvers or len(approvers) >= require.approvals:
            return Tally(False, len(approvers), False, waiting_for(require, len(approvers)))
        approvers.append(message.actor)
        decided = len(approvers) >= require.approvals
        if decided:
            await self.decisions.record(message)
        return Tally(True, len(approvers), decided, waiting_for(require, len(approvers)))


class FakePolicies:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.read: list[tuple[str, int]] = []

    async def at(self, org_id: str, version: int) -> Policy:
        self.read.append((org_id, version))
        return self.policy


def policed(kind: str = "memory") -> Proposal:
    """A proposal of a session run by ``op``, proposed under version 4 of its organisation's policy."""
    return proposal(kind=kind).model_copy(update={"org_id": "org_1", "operator": "op", "policy_version": 4})


def approving(feed: FakeFeed) -> tuple[FakeDecisions, FakeApprovals, Deps]:
    decisions = FakeDecisions(then=lambda m: feed.waiting[m.decision_id].set_result(outcome_of(m)))
    approvals = FakeApprovals(decisions)
    settings = SimpleNamespace(decision_timeout_seconds=5.0)
    built = Deps(
        runtime=None,  # type: ignore[arg-type]  # fakes
        settings=settings,  # type: ignore[arg-type]  # fakes
        events=feed,  # type: ignore[arg-type]  # fakes
        decisions=decisions,
        approvals=approvals,
        policies=FakePolicies(TWO_ADMINS),
    )
    return decisions, approvals, built


@pytest.mark.parametrize(
    ("actor", "roles", "status", "why"),
    [
        ("op", ADMIN, 403, "you run the session that proposed this request, and it needs 2 approvals from others"),
        ("dev", DEVELOPER, 403, "this request needs approvals from two admins"),
    ],
)
async def test_an_approval_that_does_not_count_is_refused_and_nothing_is_counted(
    actor: str, roles: frozenset[str], status: int, why: str
) -> None:
    feed = FakeFeed()
    decisions, approvals, built = approving(feed)
    with pytest.raises(NotCounted) as refused:
        await decide(built, policed(), "apply", actor, "card", roles=roles)
    assert (refused.value.status, why in refused.value.detail) == (status, True), refused.value.detail
    assert (decisions.recorded, approvals.approvers) == ([], {})


async def test_the_second_admins_approval_sends_the_decision_and_the_first_only_counts() -> None:
    feed = FakeFeed()
    decisions, approvals, built = approving(feed)

    with pytest.raises(AwaitingApprovals) as waiting:
        await decide(built, policed(), "apply", "ann", "card", roles=ADMIN)
    assert (waiting.value.approvals, waiting.value.required) == (1, 2)
    assert waiting.value.detail == "1 of 2 approvals: needs one more admin"
    assert decisions.recorded == [] and feed.forgotten != []  # nothing sent yet

    with pytest.raises(NotCounted) as twice:
        await decide(built, policed(), "apply", "ann", "tray", roles=ADMIN)
    assert twice.value.status == 409
    assert twice.value.detail == "you approved this request already; 1 of 2 approvals: needs one more admin"

    answer = await decide(built, policed(), "apply", "ben", "card", roles=ADMIN)
    [sent] = decisions.recorded
    assert (answer.outcome, sent.actor, sent.decision) == ("applied", "ben", "apply")
    assert approvals.approvers == {"prop_1": ["ann", "ben"]}
    # The verdict written with the approval is the one the rule worker writes: version 4, the require rule.
    assert {verdict[2:5] for verdict in approvals.verdicts} == {(4, "two admins", "require")}

    with pytest.raises(NotCounted) as complete:
        await decide(built, policed(), "apply", "cy", "card", roles=ADMIN)
    assert complete.value.detail.startswith("its approvals are complete and its decision was sent")


async def test_a_decline_declines_at_once_and_a_request_no_rule_governs_is_decided_by_one() -> None:
    feed = FakeFeed()
    decisions, approvals, built = approving(feed)
    await decide(built, policed(), "decline", "dev", "card", roles=DEVELOPER)
    unpoliced = proposal().model_copy(update={"org_id": "org_1", "operator": "op"})  # no policy when proposed
    await decide(built, unpoliced, "apply", "op", "card", roles=ADMIN)
    assert [(m.decision, m.actor) for m in decisions.recorded] == [("decline", "dev"), ("apply", "op")]
    assert approvals.approvers == {}


async def test_listed_people_approve_whatever_their_role() -> None:
    feed = FakeFeed()
    decisions, _, built = approving(feed)
    with pytest.raises(NotCounted, match="needs approvals from one of olga"):
        await decide(built, policed("login"), "grant", "ann", "card", roles=ADMIN)
    await decide(built, policed("login"), "grant", "olga", "card", roles=frozenset({"viewer"}))
    assert [(m.decision, m.actor) for m in decisions.recorded] == [("grant", "olga")]


# --- Kafka takes none of the gateway's messages ---------------------------------------------------------------


class FakeRelay:
    """The outbox relay's backlog: how long its oldest row has waited for Kafka (None: none waits)."""

    def __init__(self, waited: float | None) -> None:
        self.now = waited

    def waited(self, now: float | None = None) -> float | None:
        return self.now


@pytest.mark.parametrize(
    ("waited", "bound", "refused"),
    [
        (None, 10.0, False),  # nothing waits: Kafka took everything so far
        (0.004, 10.0, False),  # a produce's time
        (6.0, 10.0, False),  # a leader's election
        (10.0, 10.0, False),  # at the bound, not past it
        (10.5, 10.0, True),
        (45.0, 10.0, True),  # past the producer's own delivery timeout: the relay tries again, the rows wait
        (45.0, 0.0, False),  # 0: never refused
    ],
)
async def test_a_decision_is_refused_with_nothing_recorded_while_kafka_takes_none_of_the_gateways_messages(
    waited: float | None, bound: float, refused: bool
) -> None:
    feed = FakeFeed()
    decisions = FakeDecisions(then=lambda m: feed.waiting[m.decision_id].set_result(outcome_of(m)))
    settings = SimpleNamespace(decision_timeout_seconds=5.0, kafka_stall_seconds=bound)
    built = Deps(
        runtime=None,  # type: ignore[arg-type]  # fakes
        settings=settings,  # type: ignore[arg-type]  # fakes
        events=feed,  # type: ignore[arg-type]  # fakes
        decisions=decisions,
        relay=FakeRelay(waited),
    )
    if not refused:
        answer = await decide(built, proposal(), "apply", "olga", "card")
        assert answer.outcome == "applied" and len(decisions.recorded) == 1
        return
    with pytest.raises(KafkaStalled) as stalled:
        await decide(built, proposal(), "apply", "olga", "card")
    assert decisions.recorded == [] and feed.waiting == {} and feed.forgotten == []
    assert str(stalled.value) == (
        f"Kafka has not taken the gateway's messages for {waited:.0f} s (too few in-sync replicas, or no leader); "
        "nothing was recorded: try again shortly"
    )
    # A client mistake is still told as such, stalled or not: the refusal comes first.
    with pytest.raises(Refused):
        await decide(built, proposal("applied"), "apply", "olga", "card")
