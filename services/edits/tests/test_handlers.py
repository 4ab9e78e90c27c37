"""The edits service's handlers (OwnerKit over the memory and guild kinds) on an in-memory unit of work."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from opentelemetry import trace

from assent.contracts import (
    DecisionMade,
    GuildChanged,
    ProposalOutcome,
    ProposalProposed,
    SessionContext,
    ToolCall,
    ToolResult,
)
from assent.domain import Agent, Guild, Refusal
from assent.hashing import content_hash
from assent.kinds import KINDS
from assent.runtime import OwnerKit, Received, Reverted, RevertRequest
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, PROPOSALS_PROPOSED, TOOL_RESULTS, WORKSPACE_EVENTS
from edits.adapters.repository import EditsRepository
from edits.domain import guild as guild_rules
from edits.domain.model import LiveMemory
from edits.kinds.guild import GuildKind
from edits.kinds.memory import MemoryKind

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
RITA = "rita@example.com"


@dataclass
class FakeEditsRepository:
    """The edits store in memory: Memory, the guild text write and its change log."""

    workspace: FakeWorkspace
    memories: dict[str, LiveMemory]
    memory_writes: list[dict[str, Any]] = field(default_factory=list)
    guild_changes: list[dict[str, Any]] = field(default_factory=list)
    read_ahead: list[list[str]] = field(default_factory=list)
    """The agent ids of each :meth:`read_agent_memories` (a round trip of the real repository)."""
    kept: dict[tuple[str, int], str] = field(default_factory=dict)
    """Revisions written before the test (agent, version): the content each read."""

    async def read_agent_memories(self, agent_ids: Sequence[str]) -> None:
        self.read_ahead.append(list(agent_ids))

    async def memory(self, agent_id: str, *, for_update: bool = False) -> LiveMemory | None:
        return self.memories.get(agent_id)

    async def agent_memory(self, agent_id: str) -> tuple[Agent | None, LiveMemory | None]:
        agent = await self.workspace.agent(agent_id)
        return (agent, self.memories.get(agent_id)) if agent is not None else (None, None)

    async def write_memory(
        self,
        org_id: str,
        agent_id: str,
        content: str,
        *,
        expected_version: int | None = None,
        expected_hash: str | None = None,
        actor: str,
        **links: Any,
    ) -> int | None:
        assert expected_version is not None or expected_hash is not None
        live = self.memories.get(agent_id)
        if live is None or expected_version not in (None, live.version) or expected_hash not in (None, live.hash):
            return None
        self.memories[agent_id] = LiveMemory(agent_id, content, live.version + 1, content_hash(content))
        self.memory_writes.append(
            {"agent_id": agent_id, "content": content, "actor": actor, "version": live.version + 1, **links}
        )
        return live.version + 1

    async def memory_content_at(self, agent_id: str, version: int) -> str | None:
        """What version ``version`` read: the live Memory's, a write's, or version 0's (the empty one)."""
        if version == 0:
            return ""
        live = self.memories.get(agent_id)
        if live is not None and live.version == version:
            return live.content
        versions = {w["version"]: w["content"] for w in self.memory_writes if w["agent_id"] == agent_id}
        return versions.get(version, self.kept.get((agent_id, version)))

    async def update_guild_text(self, guild_id: str, changes: dict[str, str]) -> bool:
        guild = self.workspace.guilds.get(guild_id)
        if guild is None:
            return False
        self.workspace.guilds[guild_id] = replace(guild, **changes, revision=guild.revision + 1)
        return True

    async def log_guild_change(
        self,
        guild_id: str,
        field: str,
        actor: str,
        *,
        tool_call_id: str | None,
        session_id: str | None,
        seq: int | None,
    ) -> None:
        self.guild_changes.append(
            {
                "guild_id": guild_id,
                "field": field,
                "changed_by": actor,
                "tool_call_id": tool_call_id,
                "studio_session_id": session_id,
                "studio_seq": seq,
            }
        )


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeEditsRepository

    @property
    def guild(self) -> Guild:
        return self.uow.workspace.guilds[GUILD]

    async def call(
        self, tool: str, arguments: dict[str, Any], seq: int, *, tool_call_id: str | None = None, **extra: Any
    ) -> ToolResult:
        """Send one call; return the one ToolResult it emitted (and assert there is exactly one)."""
        before = len(self.uow.messages(ToolResult))
        message = ToolCall(
            session_id=extra.get("session_id", SESSION),
            seq=seq,
            turn_id="turn1",
            step=1,
            tool_call_id=tool_call_id or f"call_{seq}",
            tool=tool,
            arguments=arguments,
            session=extra.get("session", CONTEXT),
        )
        await self.kit.on_tool_call(message, self.uow)
        results = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        assert len(results) == 1, results
        return results[0]

    async def decide(self, result: ToolResult, decision: str = "apply", kind: str | None = None) -> ProposalOutcome:
        assert result.widget is not None
        before = len(self.uow.emitted)
        await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind=kind or result.widget.kind,
                decision=decision,
                actor=OPERATOR,
            ),
            self.uow,
        )
        emitted = self.uow.emitted[before:]
        outcomes = [m for t, _, m in emitted if t == PROPOSALS_OUTCOMES.name and isinstance(m, ProposalOutcome)]
        assert len(outcomes) == 1, emitted
        return outcomes[0]


async def new_world() -> World:
    workspace = FakeWorkspace(
        orgs={ORG: "Acme"},
        guilds=[
            Guild(GUILD, ORG, "Support", "We answer tickets.", "Line one.\nLine two.\n", 4),
            Guild("sales", ORG, "Sales", "We sell.", "", 1),
        ],
        agents=[Agent("a1", ORG, GUILD, "Ada"), Agent("out", ORG, "sales", "Cy")],
    )
    repo = FakeEditsRepository(
        workspace,
        {
            "a1": LiveMemory("a1", "Live.\n", 2, content_hash("Live.\n")),
            "out": LiveMemory("out", "Sell.\n", 1, content_hash("Sell.\n")),
        },
        kept={("a1", 1): "First.\n", ("a1", 2): "Live.\n"},
    )
    uow = FakeUnitOfWork(workspace=workspace, stores={EditsRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("edits", [MemoryKind(1024), GuildKind()]), uow, repo)


def memory_args(content: str = "New.\n", base_version: int = 2, **overrides: Any) -> dict[str, Any]:
    return {"agent_id": "a1", "content": content, "base_version": base_version, "reason": "why", **overrides}


# --- the kit, through the memory kind ---------------------------------------------------------------


async def test_a_proposal_emits_one_request_and_one_widget_and_records_it() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    assert result.ok and result.widget is not None and result.widget.await_operator
    assert result.widget.kind == "memory" and result.widget.base.version == 2
    proposed = world.uow.messages(ProposalProposed, PROPOSALS_PROPOSED.name)
    assert len(proposed) == 1 and proposed[0].proposal_id == result.widget.proposal_id
    assert proposed[0].card.apply_label == "Apply edit" and proposed[0].section == "Agents"
    assert len(world.uow.emitted) == 2
    stored = await world.uow.proposals.get(result.widget.proposal_id)
    assert stored is not None and stored.status == "pending" and stored.seq == 3
    assert world.repo.memory_writes == []


async def test_a_refusal_emits_one_error_result_and_records_nothing() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(agent_id="out", base_version=1), seq=3)
    assert not result.ok and result.error is not None and result.widget is None
    assert (result.error.status, result.error.code) == (422, "agent_out_of_reach")
    assert len(world.uow.emitted) == 1
    assert world.uow.proposals.proposals == {}


async def test_a_resent_call_replays_the_first_result_and_records_nothing_new() -> None:
    world = await new_world()
    first = await world.call("studio_edit_memory", memory_args(), seq=3, tool_call_id="tc1")
    again = await world.call("studio_edit_memory", memory_args(), seq=3, tool_call_id="tc1")
    assert again.id == first.id and again == first
    assert len(world.uow.messages(ProposalProposed)) == 1
    assert len(world.uow.proposals.proposals) == 1


async def test_apply_writes_once_as_the_operator() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("applied", 200, OPERATOR)
    assert world.uow.locked_sessions == [SESSION]
    assert [w["content"] for w in world.repo.memory_writes] == ["New.\n"]
    assert world.repo.memory_writes[0]["studio_seq"] == 3 and world.repo.memory_writes[0]["actor"] == OPERATOR
    stored = await world.uow.proposals.get(result.widget.proposal_id)  # type: ignore[union-attr]
    assert stored is not None and stored.status == "applied" and stored.resolved_by == OPERATOR


@pytest.mark.parametrize("second", ["apply", "decline"])
async def test_a_second_decision_is_refused_and_writes_nothing(second: str) -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    await world.decide(result)
    again = await world.decide(result, second)
    assert (again.outcome, again.status) == ("refused", 422) and "already applied" in again.detail
    assert len(world.repo.memory_writes) == 1


async def test_a_stale_apply_is_409_and_leaves_the_request_pending_and_stale() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    world.repo.memories["a1"] = LiveMemory("a1", "Moved.\n", 3, content_hash("Moved.\n"))
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409)
    assert world.repo.memory_writes == []
    stored = await world.uow.proposals.get(result.widget.proposal_id)  # type: ignore[union-attr]
    assert stored is not None and stored.status == "pending" and stored.stale


async def test_an_unknown_tool_is_refused() -> None:
    world = await new_world()
    result = await world.call("studio_edit_note", {"action": "edit"}, seq=3)
    assert result.error is not None and (result.error.status, result.error.code) == (422, "unsupported_tool")
    assert world.uow.proposals.proposals == {}


async def test_a_call_for_an_unknown_session_with_its_context_creates_the_session() -> None:
    world = await new_world()
    result = await world.call("studio_read_guild", {}, seq=1, session_id="fresh")
    assert result.ok and result.output is not None and result.output["guild_id"] == GUILD
    session = await world.uow.sessions.get("fresh")
    assert session is not None and session.source_guild_id == GUILD and session.operator_user_id == OPERATOR


async def test_a_call_for_an_unknown_session_without_context_is_404() -> None:
    world = await new_world()
    result = await world.call("studio_read_guild", {}, seq=1, session_id="fresh", session=None)
    assert result.error is not None and (result.error.status, result.error.code) == (404, "unknown_session")


async def test_a_decision_on_another_owners_kind_is_ignored() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    world.uow.clear()
    await world.kit.on_decision(
        DecisionMade(
            decision_id="d1",
            proposal_id=result.widget.proposal_id,  # type: ignore[union-attr]
            session_id=SESSION,
            seq=3,
            kind="routine",
            decision="apply",
            actor=OPERATOR,
        ),
        world.uow,
    )
    assert world.uow.emitted == [] and world.uow.locked_sessions == []
    assert world.repo.memory_writes == []


# --- the guild kind ---------------------------------------------------------------------------------


def guild_args(**fields: Any) -> dict[str, Any]:
    return {"reason": "clearer", **fields}


@pytest.mark.parametrize(
    ("arguments", "status", "code", "names"),
    [
        (guild_args(about="x" * 281), 422, "field_too_long", ("about", "280")),
        (guild_args(description="x" * 8001), 422, "field_too_long", ("description", "8000")),
        (guild_args(about="ok", description="y" * 8001), 422, "field_too_long", ("description", "8000")),
        (guild_args(), 422, "no_fields", ()),
        (guild_args(about="We answer tickets."), 422, "no_change", ()),
        (guild_args(about="We answer tickets.", description="Line one.\nLine two.\n"), 422, "no_change", ()),
        ({"about": "New."}, 422, "invalid_arguments", ("reason",)),
        (guild_args(about="New.", name="Renamed"), 422, "invalid_arguments", ("name",)),
        (guild_args(about="a\x00b"), 422, "invalid_arguments", ("about",)),
    ],
)
async def test_guild_refusals_say_why_and_record_nothing(
    arguments: dict[str, Any], status: int, code: str, names: tuple[str, ...]
) -> None:
    world = await new_world()
    result = await world.call("studio_edit_guild", arguments, seq=3)
    assert result.error is not None and (result.error.status, result.error.code) == (status, code), result.error
    assert all(name in result.error.message for name in names), result.error.message
    assert world.uow.proposals.proposals == {} and world.uow.messages(ProposalProposed) == []


async def test_the_limits_are_inclusive() -> None:
    world = await new_world()
    result = await world.call("studio_edit_guild", guild_args(about="a" * 280, description="d" * 8000), seq=3)
    assert result.ok, result.error


async def test_a_guild_proposal_binds_revision_and_hash_and_shows_one_field_per_change() -> None:
    world = await new_world()
    result = await world.call(
        "studio_edit_guild", guild_args(about="We answer tickets fast.", description="Line one.\nLine two.\n"), seq=3
    )
    assert result.ok and result.widget is not None
    assert result.widget.kind == "guild" and result.widget.target.guild_id == GUILD
    assert result.widget.base.version == 4
    assert result.widget.base.hash == guild_rules.text_hash("We answer tickets.", "Line one.\nLine two.\n")
    assert result.widget.proposed_hash == guild_rules.text_hash("We answer tickets fast.", "Line one.\nLine two.\n")
    (proposed,) = world.uow.messages(ProposalProposed)
    assert proposed.section == "Guild" and proposed.card.apply_label == "Apply edit"
    assert [(f.name, f.before, f.after) for f in proposed.card.fields] == [
        ("about", "We answer tickets.", "We answer tickets fast.")
    ]
    assert "We answer tickets fast." in proposed.card.after and "Line two." in proposed.card.after
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None and not card.stale and card.live_version == 4
    assert [(f.name, f.before, f.after) for f in card.fields] == [
        ("about", "We answer tickets.", "We answer tickets fast.")
    ]


async def test_guild_apply_writes_only_the_proposed_fields_logs_each_and_refreshes_the_session() -> None:
    world = await new_world()
    result = await world.call("studio_edit_guild", guild_args(description="A new description.\n"), seq=5)
    world.uow.clear()
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("applied", 200, OPERATOR)
    assert outcome.effects["version"] == 5 and outcome.effects["fields"] == ["description"]
    assert world.guild == Guild(GUILD, ORG, "Support", "We answer tickets.", "A new description.\n", 5)
    assert world.uow.workspace.locked == [GUILD]
    assert world.repo.guild_changes == [
        {
            "guild_id": GUILD,
            "field": "description",
            "changed_by": OPERATOR,
            "tool_call_id": "call_5",
            "studio_session_id": SESSION,
            "studio_seq": 5,
        }
    ]
    (changed,) = world.uow.messages(GuildChanged, WORKSPACE_EVENTS.name)
    assert (changed.description, changed.about, changed.revision) == ("A new description.\n", "We answer tickets.", 5)
    session = await world.uow.sessions.get(SESSION)
    assert session is not None and session.source_guild_snapshot == {
        "guild_id": GUILD,
        "name": "Support",
        "about": "We answer tickets.",
        "description": "A new description.\n",
    }
    read = await world.call("studio_read_guild", {}, seq=6)
    assert read.output is not None and read.output["description"] == "A new description.\n"


async def test_guild_apply_of_both_fields_logs_one_change_per_field() -> None:
    world = await new_world()
    result = await world.call("studio_edit_guild", guild_args(about="Short.", description="Long.\n"), seq=3)
    await world.decide(result)
    assert [c["field"] for c in world.repo.guild_changes] == ["about", "description"]
    assert (world.guild.about, world.guild.description, world.guild.revision) == ("Short.", "Long.\n", 5)
    assert len(world.uow.messages(GuildChanged)) == 1


async def test_a_stale_guild_apply_is_409_writes_nothing_and_the_card_shows_stale() -> None:
    world = await new_world()
    result = await world.call("studio_edit_guild", guild_args(about="Proposed."), seq=3)
    assert result.widget is not None
    world.uow.workspace.guilds[GUILD] = replace(world.guild, description="Someone else's.\n", revision=5)
    card = await world.kit.live_card(result.widget.proposal_id, world.uow)
    assert card is not None and card.stale and card.live_version == 5
    world.uow.clear()
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status) == ("stale", 409)
    assert world.guild.about == "We answer tickets." and world.guild.revision == 5
    assert world.repo.guild_changes == [] and world.uow.messages(GuildChanged) == []
    stored = await world.uow.proposals.get(result.widget.proposal_id)
    assert stored is not None and stored.status == "pending" and stored.stale
    session = await world.uow.sessions.get(SESSION)
    assert session is not None and session.source_guild_snapshot is not None
    assert session.source_guild_snapshot["about"] == "We answer tickets."


async def test_read_guild_returns_the_session_snapshot() -> None:
    world = await new_world()
    result = await world.call("studio_read_guild", {}, seq=1)
    assert result.ok and result.output == {
        "guild_id": GUILD,
        "name": "Support",
        "about": "We answer tickets.",
        "description": "Line one.\nLine two.\n",
    }
    refused = await world.call("studio_read_guild", {"guild_id": "sales"}, seq=2)
    assert refused.error is not None and refused.error.code == "invalid_arguments"


async def test_a_result_too_large_to_publish_becomes_an_error_result() -> None:
    world = await new_world()
    world.repo.memories["a1"] = LiveMemory("a1", "x" * 5000, 3, content_hash("x" * 5000))
    world.kit.max_result_bytes = 4000
    result = await world.call("studio_read_memory", {"agent_id": "a1"}, seq=3)
    assert not result.ok and result.error is not None
    assert (result.error.status, result.error.code) == (413, "result_too_large")
    assert "4000 bytes" in result.error.message
    world.repo.memories["a1"] = LiveMemory("a1", "Short.\n", 4, content_hash("Short.\n"))
    small = await world.call("studio_read_memory", {"agent_id": "a1"}, seq=4)
    assert small.ok and small.output is not None and small.output["content"] == "Short.\n"


# --- line counts: the tray's are the card's -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "tool", "arguments", "tray", "card"),
    [
        # The Memory: one field, the file.
        (None, "studio_edit_memory", memory_args("New.\n"), (1, 1), [("memory.md", 1, 1)]),
        (None, "studio_edit_memory", memory_args("Live.\nMore.\n"), (1, 0), [("memory.md", 1, 0)]),
        # The guild: each changed field its own diff, the tray their sum.
        (None, "studio_edit_guild", guild_args(about="We answer tickets fast."), (1, 1), [("about", 1, 1)]),
        (
            None,
            "studio_edit_guild",
            guild_args(about="Short.", description="Long.\n"),
            (2, 3),
            [("about", 1, 1), ("description", 1, 2)],
        ),
        # An empty field filled takes nothing away (its whole-text rendering once counted its blank line as -1) ...
        (("", ""), "studio_edit_guild", guild_args(about="We answer within a day."), (1, 0), [("about", 1, 0)]),
        (
            ("", ""),
            "studio_edit_guild",
            guild_args(about="We answer within a day.", description="Support.\nRefunds.\n"),
            (3, 0),
            [("about", 1, 0), ("description", 2, 0)],
        ),
        # ... and a field emptied adds nothing.
        (None, "studio_edit_guild", guild_args(description=""), (0, 2), [("description", 0, 2)]),
    ],
)
async def test_the_tray_counts_the_lines_the_card_shows(
    live: tuple[str, str] | None,
    tool: str,
    arguments: dict[str, Any],
    tray: tuple[int, int],
    card: list[tuple[str, int, int]],
) -> None:
    world = await new_world()
    if live is not None:
        world.uow.workspace.guilds[GUILD] = replace(world.guild, about=live[0], description=live[1])
    result = await world.call(tool, arguments, seq=3)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, card)
    assert shown.tray == shown.card_total


# --- batches: what one fetch holds is checked as if it had come one message after another -------------


def _call(seq: int, tool_call_id: str, content: str = "New.\n") -> ToolCall:
    return ToolCall(
        session_id=SESSION,
        seq=seq,
        turn_id="turn1",
        step=1,
        tool_call_id=tool_call_id,
        tool="studio_edit_memory",
        arguments=memory_args(content),
        session=CONTEXT,
    )


def _fetched(*messages: Any) -> list[Received]:
    return [Received(message, {}, trace.get_tracer("test"), "topic") for message in messages]


def _answers(uow: FakeUnitOfWork) -> list[tuple[str, int, bool, str | None]]:
    return [(r.tool_call_id, r.seq, r.ok, None if r.error is None else r.error.code) for r in uow.messages(ToolResult)]


@pytest.mark.parametrize(
    ("calls", "answers"),
    [
        pytest.param(
            [(3, "tc1"), (4, "tc2")], [("tc1", 3, True, None), ("tc2", 4, True, None)], id="two-calls-both-proposed"
        ),
        pytest.param(
            [(3, "tc1"), (3, "tc2")],
            [("tc1", 3, True, None), ("tc2", 3, False, "seq_taken")],
            id="a-second-call-at-the-same-seq-is-refused",
        ),
        pytest.param(
            [(3, "tc1"), (3, "tc1")], [("tc1", 3, True, None), ("tc1", 3, True, None)], id="a-re-sent-call-is-replayed"
        ),
    ],
)
async def test_a_batch_of_calls_is_answered_as_one_after_another(
    calls: list[tuple[int, str]], answers: list[tuple[str, int, bool, str | None]]
) -> None:
    messages = [_call(seq, tool_call_id) for seq, tool_call_id in calls]  # each its own envelope id
    batched, one_by_one = await new_world(), await new_world()
    await batched.kit.on_tool_calls(_fetched(*messages), batched.uow)
    for message in messages:
        await one_by_one.kit.on_tool_call(message, one_by_one.uow)
    assert _answers(batched.uow) == _answers(one_by_one.uow) == answers
    accepted = {tool_call_id for tool_call_id, _, ok, _ in answers if ok}
    assert {p.tool_call_id for p in batched.uow.proposals.proposals.values()} == accepted
    results = batched.uow.messages(ToolResult)
    if calls[0] == calls[-1]:  # the replay is the very first result, envelope id included
        assert results[0] == results[1]


async def test_a_batch_of_decisions_on_one_request_applies_it_once() -> None:
    world = await new_world()
    result = await world.call("studio_edit_memory", memory_args(), seq=3)
    assert result.widget is not None
    world.uow.clear()
    decisions = [
        DecisionMade(
            decision_id=f"d{n}",
            proposal_id=result.widget.proposal_id,
            session_id=SESSION,
            seq=3,
            kind="memory",
            decision=decision,
            actor=OPERATOR,
        )
        for n, decision in enumerate(["apply", "decline", "apply"])
    ]
    await world.kit.on_decisions(_fetched(*decisions), world.uow)
    outcomes = world.uow.messages(ProposalOutcome)
    assert [(o.decision_id, o.outcome, o.status) for o in outcomes] == [
        ("d0", "applied", 200),
        ("d1", "refused", 422),
        ("d2", "refused", 422),
    ]
    assert "already applied" in outcomes[1].detail
    assert [w["content"] for w in world.repo.memory_writes] == ["New.\n"]
    stored = await world.uow.proposals.get(result.widget.proposal_id)
    assert stored is not None and stored.status == "applied"


async def test_a_batch_writes_its_proposals_and_their_resolutions_in_one_round_trip_each() -> None:
    world = await new_world()
    await world.kit.on_tool_calls(_fetched(_call(3, "tc1"), _call(4, "tc2")), world.uow)
    assert world.uow.proposals.round_trips == [("add", 2)]
    proposals = sorted(world.uow.proposals.proposals.values(), key=lambda p: p.seq)
    decisions = [
        DecisionMade(
            decision_id=f"d{p.seq}",
            proposal_id=p.proposal_id,
            session_id=SESSION,
            seq=p.seq,
            kind="memory",
            decision="decline",
            actor=OPERATOR,
        )
        for p in proposals
    ]
    await world.kit.on_decisions(_fetched(*decisions), world.uow)
    assert world.uow.proposals.round_trips == [("add", 2), ("update", 2)]
    assert world.uow.proposals.with_outbox == ["add", "update"]  # each batch's, with its outbox rows
    assert [p.status for p in world.uow.proposals.proposals.values()] == ["declined", "declined"]


class ReadingMemoryKind(MemoryKind):
    """The memory kind, if its rules read the proposals table: each call notes the proposal it finds a seq before."""

    reads_proposals = True

    def __init__(self) -> None:
        super().__init__(1024)
        self.seen: list[str | None] = []

    async def propose(self, call: Any, args: Any, uow: Any) -> Any:
        earlier = await uow.proposals.at_seq(call.message.session_id, call.message.seq - 1)
        self.seen.append(None if earlier is None else earlier.tool_call_id)
        return await super().propose(call, args, uow)


async def test_a_kind_that_reads_proposals_sees_those_of_the_calls_before_it_in_its_batch() -> None:
    world = await new_world()
    kind = ReadingMemoryKind()
    kit = OwnerKit("edits", [kind, GuildKind()])
    await kit.on_tool_calls(_fetched(_call(3, "tc1"), _call(4, "tc2"), _call(5, "tc3")), world.uow)
    assert kind.seen == [None, "tc1", "tc2"]
    assert world.uow.proposals.round_trips == [("add", 1), ("add", 1), ("add", 1)]
    assert world.uow.proposals.with_outbox == ["add"]  # the last only: the kind reads the others


@pytest.mark.parametrize(
    ("calls", "read_ahead"),
    [
        pytest.param(
            [("studio_edit_memory", "a1"), ("studio_read_memory", "out"), ("studio_edit_memory", "ghost")],
            [["a1", "ghost", "out"]],
            id="every-agent-of-the-batch-in-one-read",
        ),
        pytest.param(
            [("studio_edit_memory", "a1"), ("studio_read_guild", None), ("studio_edit_memory", "a1")],
            [["a1"]],
            id="each-agent-once-and-other-kinds-apart",
        ),
        pytest.param([("studio_edit_memory", "a1")], [], id="a-lone-call-reads-for-itself"),
    ],
)
async def test_a_batch_reads_what_its_memory_calls_read_at_once(
    calls: list[tuple[str, str | None]], read_ahead: list[list[str]]
) -> None:
    messages = [
        ToolCall(
            session_id=SESSION,
            seq=seq,
            turn_id="turn1",
            step=1,
            tool_call_id=f"tc{seq}",
            tool=tool,
            arguments={} if agent is None else memory_args(agent_id=agent),
            session=CONTEXT,
        )
        for seq, (tool, agent) in enumerate(calls, start=3)
    ]
    batched, one_by_one = await new_world(), await new_world()
    await batched.kit.on_tool_calls(_fetched(*messages), batched.uow)
    for message in messages:
        await one_by_one.kit.on_tool_call(message, one_by_one.uow)
    assert batched.repo.read_ahead == read_ahead
    assert _answers(batched.uow) == _answers(one_by_one.uow)


# --- reverting ----------------------------------------------------------------------------------------


async def revert(world: World, result: ToolResult, org: str = ORG) -> Reverted | Refusal:
    """Revert the request ``result`` made, for Rita, as request 1 of session ``rev``."""
    assert result.widget is not None
    request = RevertRequest(session_id="rev", seq=1)
    return await world.kit.revert(result.widget.proposal_id, request, org=org, actor=RITA, uow=world.uow)


async def test_a_revert_of_an_applied_memory_edit_proposes_the_memory_before_it_over_the_memory_now() -> None:
    world = await new_world()
    edit = await world.call("studio_edit_memory", memory_args(), seq=3)
    assert (await world.decide(edit)).outcome == "applied"
    reverted = await revert(world, edit)
    assert isinstance(reverted, Reverted), reverted
    assert (reverted.session_id, reverted.seq, reverted.kind, reverted.source_guild_id) == ("rev", 1, "memory", GUILD)
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert (proposed.session_id, proposed.seq, proposed.proposal_id) == ("rev", 1, reverted.proposal_id)
    assert proposed.reason == f"Revert of request #3 of session {SESSION}"
    assert (proposed.card.before, proposed.card.after, proposed.base.version) == ("New.\n", "Live.\n", 3)
    session = await world.uow.sessions.get("rev")
    assert session is not None and (session.org_id, session.operator_user_id) == (ORG, RITA)

    # Decided as any other: applying it writes the Memory back, as the person who decides.
    outcome = await world.kit.on_decision(
        DecisionMade(
            decision_id="d",
            proposal_id=reverted.proposal_id,
            session_id="rev",
            seq=1,
            kind="memory",
            decision="apply",
            actor=OPERATOR,
        ),
        world.uow,
    )
    assert outcome is not None and outcome.outcome == "applied"
    assert world.repo.memories["a1"].content == "Live.\n"


async def test_a_memory_changed_since_is_reverted_over_its_current_version_and_the_first_one_over_the_empty_one() -> (
    None
):
    world = await new_world()
    edit = await world.call("studio_edit_memory", memory_args(), seq=3)
    await world.decide(edit)
    world.repo.memories["a1"] = LiveMemory("a1", "Other.\n", 4, content_hash("Other.\n"))  # a direct write since
    assert isinstance(await revert(world, edit), Reverted)
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert (proposed.card.before, proposed.card.after, proposed.base.version) == ("Other.\n", "Live.\n", 4)

    world = await new_world()
    world.repo.memories["a1"] = LiveMemory("a1", "", 0, content_hash(""))
    first = await world.call("studio_edit_memory", memory_args(base_version=0), seq=3)
    await world.decide(first)
    assert isinstance(await revert(world, first), Reverted)
    assert world.uow.messages(ProposalProposed)[-1].card.after == ""


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("declined", 409, "not_applied"),
        ("pending", 409, "not_applied"),
        ("another organisation's", 404, "not_found"),
        ("reads as before already", 409, "already_reverted"),
        ("before not kept", 409, "before_unknown"),
        ("a kind whose row is not revertible", 422, "not_revertible"),
    ],
)
async def test_what_cannot_be_reverted_is_refused_and_files_nothing(
    case: str, status: int, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = await new_world()
    if case == "a kind whose row is not revertible":
        monkeypatch.setattr(GuildKind, "spec", property(lambda _: replace(KINDS["guild"], revertible=False)))
    org = "org_other" if case == "another organisation's" else ORG
    if case == "a kind whose row is not revertible":
        made = await world.call("studio_edit_guild", guild_args(about="We help."), seq=3)
    else:
        made = await world.call("studio_edit_memory", memory_args(), seq=3)
    if case == "declined":
        await world.decide(made, "decline")
    elif case != "pending":
        assert (await world.decide(made)).outcome == "applied"
    if case == "reads as before already":
        world.repo.memories["a1"] = LiveMemory("a1", "Live.\n", 4, content_hash("Live.\n"))
    if case == "before not kept":
        world.repo.memories["a1"] = LiveMemory("a1", "Live.\n", 2, content_hash("Live.\n"))
        world.repo.memory_writes.clear()
        made = await world.call("studio_edit_memory", memory_args(base_version=2), seq=4)
        world.repo.memories["a1"] = LiveMemory("a1", "x", 7, content_hash("x"))
        stored = await world.uow.proposals.get(made.widget.proposal_id)  # type: ignore[union-attr]
        assert stored is not None
        world.uow.proposals.proposals[stored.proposal_id] = replace(stored, status="applied", resolution={"version": 6})
    proposed = len(world.uow.messages(ProposalProposed))
    refused = await revert(world, made, org)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (status, code), refused
    assert len(world.uow.messages(ProposalProposed)) == proposed


async def test_a_guild_text_change_reverts_each_field_it_changed_to_the_text_it_replaced() -> None:
    world = await new_world()
    made = await world.call("studio_edit_guild", guild_args(about="We help.", description="New.\n"), seq=3)
    assert (await world.decide(made)).outcome == "applied"
    world.uow.workspace.guilds[GUILD] = replace(world.guild, description="Since.\n", revision=6)  # changed since
    reverted = await revert(world, made)
    assert isinstance(reverted, Reverted), reverted
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert [(f.name, f.before, f.after) for f in proposed.card.fields] == [
        ("about", "We help.", "We answer tickets."),
        ("description", "Since.\n", "Line one.\nLine two.\n"),
    ]
    assert proposed.base.version == 6 and proposed.reason == f"Revert of request #3 of session {SESSION}"

    world.uow.workspace.guilds[GUILD] = replace(
        world.guild, about="We answer tickets.", description="Line one.\nLine two.\n"
    )
    again = await revert(world, made)
    assert isinstance(again, Refusal) and again.code == "already_reverted"
