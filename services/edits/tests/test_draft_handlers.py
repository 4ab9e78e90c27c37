"""The edits service's handlers over the draft kind (OwnerKit + DraftKind) and the operator's draft routes
(:mod:`edits.draft_workspace`) on an in-memory unit of work."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from assent.contracts import AgentChanged, DecisionMade, ProposalOutcome, SessionContext, ToolCall, ToolResult
from assent.domain import Agent, Guild
from assent.hashing import content_hash
from assent.runtime import OwnerKit
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, TOOL_RESULTS, WORKSPACE_EVENTS
from edits import draft_workspace
from edits.adapters.drafts import DraftsRepository
from edits.domain.drafts import Draft, DraftVersion
from edits.kinds.draft import DraftKind
from edits.workspace import Conflict, NotFound, Refused
from edits_contract.draft_widget import DraftWidget
from edits_contract.drafts import DraftLines

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
TASK = "Answer refunds.\n"
BASE = content_hash(TASK)


@dataclass
class FakeDraftsRepository:
    """The DraftsRepository methods the draft kind and routes call, in memory, over the workspace's agents."""

    workspace: FakeWorkspace
    drafts: dict[str, Draft] = field(default_factory=dict)
    kept: dict[str, list[DraftVersion]] = field(default_factory=dict)
    """Every version of each draft, by draft id."""
    notes: set[str] = field(default_factory=set)
    task_changes: list[dict[str, Any]] = field(default_factory=list)
    locked: list[str] = field(default_factory=list)

    async def draft(self, draft_id: str, *, for_update: bool = False) -> Draft | None:
        if for_update:
            self.locked.append(draft_id)
        return self.drafts.get(draft_id)

    async def at_seq(self, session_id: str, seq: int, *, for_update: bool = False) -> Draft | None:
        found = [d for d in self.drafts.values() if (d.session_id, d.created_message_seq) == (session_id, seq)]
        return await self.draft(found[0].draft_id, for_update=for_update) if found else None

    async def waiting(self, session_id: str, agent_id: str) -> list[Draft]:
        return [
            d for d in self.drafts.values() if (d.session_id, d.agent_id, d.status) == (session_id, agent_id, "pending")
        ]

    async def of_agent(self, agent_id: str) -> list[Draft]:
        return [d for d in reversed(self.drafts.values()) if d.agent_id == agent_id]

    async def versions(self, draft_id: str) -> list[DraftVersion]:
        return self.kept[draft_id]

    async def create(self, draft: Draft) -> None:
        if draft.draft_id not in self.drafts:
            self.drafts[draft.draft_id] = draft
            self.kept[draft.draft_id] = [draft.newest]

    async def add_version(self, draft_id: str, version: int, content: str, author: str) -> None:
        added = DraftVersion(version, content, content_hash(content), author)
        self.kept[draft_id].append(added)
        self.drafts[draft_id] = dataclasses.replace(self.drafts[draft_id], newest=added)

    async def resolve(self, draft_id: str, status: str, **fields: Any) -> None:
        self.drafts[draft_id] = dataclasses.replace(self.drafts[draft_id], status=status, **fields)

    async def agent(self, agent_id: str, *, for_update: bool = False) -> Agent | None:
        return self.workspace.agents.get(agent_id)

    async def set_task(self, agent_id: str, task: str) -> int:
        agent = self.workspace.agents[agent_id]
        self.workspace.agents[agent_id] = dataclasses.replace(agent, task=task, revision=agent.revision + 1)
        return agent.revision + 1

    async def existing_notes(self, org_id: str, display_paths: Any) -> set[str]:
        return self.notes & set(display_paths)

    async def log_task_change(self, org_id: str, agent_id: str, revision: int, **fields: Any) -> None:
        self.task_changes.append({"agent_id": agent_id, "version": revision, **fields})


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeDraftsRepository

    async def call(
        self, tool: str, arguments: dict[str, Any], seq: int, *, turn: str = "turn1", tool_call_id: str | None = None
    ) -> ToolResult:
        before = len(self.uow.messages(ToolResult))
        await self.kit.on_tool_call(
            ToolCall(
                session_id=SESSION,
                seq=seq,
                turn_id=turn,
                step=1,
                tool_call_id=tool_call_id or f"call_{seq}",
                tool=tool,
                arguments=arguments,
                session=CONTEXT,
            ),
            self.uow,
        )
        results = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        assert len(results) == 1, results
        return results[0]

    async def draft(self, seq: int, content: str = "Two.\n", agent_id: str = "a1", **more: Any) -> ToolResult:
        arguments = {"agent_id": agent_id, "content": content, "base_hash": BASE, "rationale": "clearer"}
        return await self.call("studio_create_task_draft", arguments, seq, **more)

    async def decide(self, result: ToolResult, decision: str) -> ProposalOutcome:
        assert result.widget is not None
        outcome = await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind="draft",
                decision=decision,
                actor=OPERATOR,
            ),
            self.uow,
        )
        assert outcome is not None
        return outcome

    def task(self, agent_id: str = "a1") -> str:
        return self.workspace.agents[agent_id].task

    @property
    def workspace(self) -> FakeWorkspace:
        return self.repo.workspace


async def new_world() -> World:
    workspace = FakeWorkspace(
        orgs={ORG: "Acme", "other": "Other"},
        guilds=[Guild(GUILD, ORG, "Support", "", "", 1), Guild("sales", ORG, "Sales", "", "", 1)],
        agents=[
            Agent("a1", ORG, GUILD, "Ada", task=TASK, revision=3),
            Agent("a2", ORG, GUILD, "Bo", task=TASK),
            Agent("out", ORG, "sales", "Cy", task=TASK),
        ],
    )
    repo = FakeDraftsRepository(workspace)
    uow = FakeUnitOfWork(workspace=workspace, stores={DraftsRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("edits", [DraftKind(1024)]), uow, repo)


async def test_a_draft_is_stored_and_answered_with_its_widget_beside_it() -> None:
    world = await new_world()
    result = await world.draft(3, "Answer refunds.\nCite the order.\n")
    assert result.ok and result.widget is not None and result.output is not None
    widget = result.widget.read_as(DraftWidget) if result.widget is not None else None
    assert (widget.type, widget.kind, widget.action, widget.await_operator) == (
        "studio_task_draft",
        "draft",
        "publish",
        True,
    )
    assert widget.agent is not None and (widget.agent.id, widget.agent.name) == ("a1", "Ada")
    assert (widget.rationale, widget.target.ref, widget.target.path) == ("clearer", widget.draft_id, "agent/a1/task.md")
    assert (widget.base.version, widget.base.hash, widget.lines.added, widget.lines.removed) == (3, BASE, 1, 0)
    (stored,) = world.repo.drafts.values()
    assert (stored.draft_id, stored.created_message_seq, stored.status, stored.newest.version) == (
        widget.draft_id,
        3,
        "pending",
        1,
    )
    assert result.output["draft"] == {
        "draft_id": widget.draft_id,
        "agent_id": "a1",
        "version": 1,
        "content": "Answer refunds.\nCite the order.\n",
        "base_hash": BASE,
        "replaces": None,
        "embeds_missing_notes": [],
    }
    assert world.task() == TASK, "drafting wrote the Task"

    again = await world.draft(3, "Answer refunds.\nCite the order.\n")  # the same call, delivered again
    assert again == result and len(world.repo.drafts) == 1


async def test_a_new_draft_of_the_same_agent_and_turn_supersedes_the_waiting_one() -> None:
    world = await new_world()
    first = await world.draft(3, "One.\n")
    other_agent = await world.draft(4, "Bo's.\n", agent_id="a2")
    second = await world.draft(5, "Two.\n")
    later_turn = await world.draft(6, "Three.\n", turn="turn2")
    assert first.widget is not None and second.widget is not None and later_turn.widget is not None
    assert (
        second.output is not None and second.output["draft"]["replaces"] == first.widget.read_as(DraftWidget).draft_id
    )
    assert later_turn.output is not None and later_turn.output["draft"]["replaces"] is None
    assert other_agent.output is not None and other_agent.output["draft"]["replaces"] is None
    replaced = world.repo.drafts[first.widget.read_as(DraftWidget).draft_id]
    assert (replaced.status, replaced.replaced_by) == ("superseded", second.widget.read_as(DraftWidget).draft_id)
    outcomes = world.uow.messages(ProposalOutcome, PROPOSALS_OUTCOMES.name)
    assert [(o.proposal_id, o.outcome) for o in outcomes] == [(first.widget.proposal_id, "superseded")]
    statuses = {p.seq: p.status for p in world.uow.proposals.proposals.values()}
    assert statuses == {3: "superseded", 4: "pending", 5: "pending", 6: "pending"}


async def test_publishing_writes_the_newest_version_as_the_operator() -> None:
    world = await new_world()
    result = await world.draft(3, "Two.\n")
    edited = await draft_workspace.edit_draft(world.uow, SESSION, 3, "Two, edited.\n", 1, OPERATOR, 1024)
    assert (edited.version, edited.created_message_seq, edited.status) == (2, 3, "pending")
    assert [(v.version, v.author) for v in edited.versions] == [(1, "coach"), (2, OPERATOR)]
    world.uow.clear()

    outcome = await world.decide(result, "publish")
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("published", 200, OPERATOR)
    assert outcome.effects["draft_version"] == 2 and outcome.effects["published_by_user_id"] == OPERATOR
    assert world.task() == "Two, edited.\n" and world.workspace.agents["a1"].revision == 4
    (changed,) = world.uow.messages(AgentChanged, WORKSPACE_EVENTS.name)
    assert (changed.task, changed.revision) == ("Two, edited.\n", 4)
    draft = world.repo.drafts[result.widget.read_as(DraftWidget).draft_id]  # type: ignore[union-attr]
    assert (draft.status, draft.published_by_user_id, draft.published_version, draft.discarded_by_user_id) == (
        "published",
        OPERATOR,
        2,
        None,
    )
    assert world.repo.task_changes == [
        {
            "agent_id": "a1",
            "version": 4,
            "actor": OPERATOR,
            "tool_call_id": "call_3",
            "tool_name": "studio_create_task_draft",
            "studio_session_id": SESSION,
            "studio_seq": 3,
        }
    ]
    with pytest.raises(Conflict, match="published"):
        await draft_workspace.edit_draft(world.uow, SESSION, 3, "Later.\n", None, OPERATOR, 1024)
    again = await world.decide(result, "publish")
    assert (again.outcome, again.status) == ("refused", 422)


async def test_publishing_waits_for_the_notes_the_draft_embeds_and_for_a_task_that_did_not_move() -> None:
    world = await new_world()
    result = await world.draft(3, "Follow {{note:guild/guild/refunds.md}}.\n")
    assert result.output is not None and result.output["draft"]["embeds_missing_notes"] == ["guild/guild/refunds.md"]
    early = await world.decide(result, "publish")
    assert (early.outcome, early.status, early.effects) == ("refused", 409, {"code": "note_not_created"})
    assert world.task() == TASK and world.repo.drafts[result.widget.read_as(DraftWidget).draft_id].status == "pending"  # type: ignore[union-attr]

    world.repo.notes.add("guild/guild/refunds.md")
    world.workspace.agents["a1"] = dataclasses.replace(world.workspace.agents["a1"], task="Moved.\n")
    stale = await world.decide(result, "publish")
    assert (stale.outcome, stale.status) == ("stale", 409)
    assert world.task() == "Moved.\n"

    world.workspace.agents["a1"] = dataclasses.replace(world.workspace.agents["a1"], task=TASK)
    published = await world.decide(result, "publish")
    assert published.outcome == "published" and world.task() == "Follow {{note:guild/guild/refunds.md}}.\n"


async def test_discarding_stores_who_discarded_and_writes_nothing_else() -> None:
    world = await new_world()
    result = await world.draft(3)
    outcome = await world.decide(result, "discard")
    assert (outcome.outcome, outcome.resolved_by) == ("discarded", OPERATOR)
    draft = world.repo.drafts[result.widget.read_as(DraftWidget).draft_id]  # type: ignore[union-attr]
    assert (draft.status, draft.discarded_by_user_id, draft.published_by_user_id) == ("discarded", OPERATOR, None)
    assert world.task() == TASK and world.repo.task_changes == []
    assert world.uow.messages(AgentChanged) == []


async def test_the_operators_routes_keep_the_wall_and_refuse_with_the_reason() -> None:
    world = await new_world()
    await world.draft(3)
    card = await draft_workspace.read_draft(world.uow, SESSION, 3, caller_org=ORG)
    assert (card.live.task, card.content, card.stale, card.agent_name) == (TASK, "Two.\n", False, "Ada")
    assert "+Two." in card.diff and card.lines == DraftLines(added=1, removed=1)
    for call in (
        draft_workspace.read_draft(world.uow, SESSION, 3, caller_org="other"),
        draft_workspace.edit_draft(world.uow, SESSION, 3, "Mine.\n", None, "x", 1024, caller_org="other"),
        draft_workspace.read_draft(world.uow, "s_missing", 3, caller_org=ORG),
        draft_workspace.read_draft(world.uow, SESSION, 4, caller_org=ORG),
    ):
        with pytest.raises(NotFound):
            await call
    with pytest.raises(Refused, match="same as version 1"):
        await draft_workspace.edit_draft(world.uow, SESSION, 3, "Two.\n", None, OPERATOR, 1024, caller_org=ORG)
    with pytest.raises(Refused, match="cap"):
        await draft_workspace.edit_draft(world.uow, SESSION, 3, "x" * 1025, None, OPERATOR, 1024, caller_org=ORG)
    with pytest.raises(Conflict, match="version 1, not 2"):
        await draft_workspace.edit_draft(world.uow, SESSION, 3, "Three.\n", 2, OPERATOR, 1024, caller_org=ORG)
    assert [v.version for v in world.repo.kept[next(iter(world.repo.drafts))]] == [1]


async def test_the_read_tools_say_what_a_draft_binds() -> None:
    world = await new_world()
    read = await world.call("studio_read_task", {"agent_id": "a1"}, 1)
    assert read.output is not None and (read.output["task"], read.output["hash"]) == (TASK, BASE)
    await world.draft(3)
    listed = await world.call("studio_list_task_drafts", {"agent_id": "a1"}, 4)
    assert listed.output is not None and listed.output["task_hash"] == BASE
    [(listed_draft)] = listed.output["drafts"]
    assert (listed_draft["status"], listed_draft["version"], listed_draft["base_hash"], listed_draft["stale"]) == (
        "pending",
        1,
        BASE,
        False,
    )
    outsider = await world.call("studio_read_task", {"agent_id": "out"}, 5)
    assert outsider.error is not None and (outsider.error.status, outsider.error.code) == (422, "agent_out_of_reach")


@pytest.mark.parametrize(
    ("content", "tray"),
    [("Answer refunds.\nCite the order.\n", (1, 0)), ("Cite the order.\n", (1, 1)), ("", (0, 1))],
)
async def test_the_tray_counts_the_lines_the_card_shows(content: str, tray: tuple[int, int]) -> None:
    """The tray's count beside the kind's card and the draft's own (the operator's routes), each counted as a card
    counts a field."""
    world = await new_world()
    result = await world.draft(3, content)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, [("task.md", *tray)])
    assert shown.tray == shown.card_total
    card = await draft_workspace.read_draft(world.uow, SESSION, 3, caller_org=ORG)
    assert (card.lines.added, card.lines.removed) == tray
