"""The routine kind on the proposal kit, and a scheduler's fire, on an in-memory unit of work (no broker, no
database)."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assent.contracts import DecisionMade, ProposalOutcome, ProposalProposed, SessionContext, ToolCall, ToolResult
from assent.domain import Agent, Guild, Refusal
from assent.runtime import OwnerKit, Reverted, RevertRequest
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, TOOL_RESULTS
from routines.adapters.repository import RoutinesRepository
from routines.domain.routine import Provenance, Routine
from routines.domain.timing import Timing
from routines.kinds.routine import RoutineKind
from routines.scheduler import fire_due
from routines_contract.messages import RoutinesChanged, RoutineWokeUp
from routines_contract.topics import AGENT_ROUTINES_CHANGED

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
NOW = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)


@dataclass
class FakeRoutines:
    """Routines, switches and the clock in memory, with every write."""

    routines: dict[str, Routine] = field(default_factory=dict)
    switches: dict[str, bool] = field(default_factory=dict)
    clock: datetime = NOW
    writes: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def now(self) -> datetime:
        return self.clock

    async def get(self, schedule_id: str, *, for_update: bool = False) -> Routine | None:
        return self.routines.get(schedule_id)

    async def of_agents(self, agent_ids: list[str]) -> list[Routine]:
        return [r for r in self.routines.values() if r.agent_id in agent_ids]

    async def of_guild(self, guild_id: str) -> list[Routine]:
        return [r for r in self.routines.values() if r.guild_id == guild_id]

    async def routines_on(self, guild_id: str) -> bool:
        return self.switches.get(guild_id, True)

    async def create(self, routine: Routine, by: Provenance) -> None:
        self.routines[routine.schedule_id] = routine
        self.writes.append(("create", routine.schedule_id, asdict(by)))

    async def replace(self, routine: Routine, by: Provenance) -> None:
        self.routines[routine.schedule_id] = routine
        self.writes.append(("replace", routine.schedule_id, asdict(by)))

    async def delete(self, schedule_id: str) -> None:
        del self.routines[schedule_id]
        self.writes.append(("delete", schedule_id, {}))

    async def plan(self, schedule_id: str, next_wake_at: datetime | None) -> None:
        self.routines[schedule_id] = replace(self.routines[schedule_id], next_wake_at=next_wake_at)

    async def take_due(self, now: datetime, limit: int) -> list[Routine]:
        due = [
            r
            for r in self.routines.values()
            if not r.paused
            and r.next_wake_at is not None
            and r.next_wake_at <= now
            and self.switches.get(r.guild_id, True)
        ]
        return due[:limit]


def live_routine(**overrides: Any) -> Routine:
    values: dict[str, Any] = {
        "schedule_id": "rtn_1",
        "org_id": ORG,
        "guild_id": GUILD,
        "agent_id": "a1",
        "description": "Morning sweep",
        "instruction": "Answer the oldest thread.",
        "timing": Timing("0 9 * * *", None, "Europe/Paris"),
        "paused": False,
        "next_wake_at": datetime(2026, 12, 2, 8, tzinfo=UTC),
        "version": 3,
    }
    return Routine(**{**values, **overrides})


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeRoutines

    async def call(self, arguments: dict[str, Any], seq: int, tool: str = "studio_edit_routine") -> ToolResult:
        before = len(self.uow.messages(ToolResult))
        message = ToolCall(
            session_id=SESSION,
            seq=seq,
            turn_id="turn1",
            step=1,
            tool_call_id=f"call_{seq}",
            tool=tool,
            arguments=arguments,
            session=CONTEXT,
        )
        await self.kit.on_tool_call(message, self.uow)
        results = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        assert len(results) == 1, results
        return results[0]

    async def decide(self, result: ToolResult, decision: str = "apply") -> ProposalOutcome:
        assert result.widget is not None
        before = len(self.uow.messages(ProposalOutcome))
        await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind=result.widget.kind,
                decision=decision,
                actor=OPERATOR,
            ),
            self.uow,
        )
        outcomes = self.uow.messages(ProposalOutcome, PROPOSALS_OUTCOMES.name)[before:]
        assert len(outcomes) == 1, outcomes
        return outcomes[0]


async def new_world() -> World:
    workspace = FakeWorkspace(
        orgs={ORG: "Acme", "other": "Other"},
        guilds=[Guild(GUILD, ORG, "Support"), Guild("sales", ORG, "Sales"), Guild("og", "other", "Theirs")],
        agents=[Agent("a1", ORG, GUILD, "Ada"), Agent("out", ORG, "sales", "Cy"), Agent("x1", "other", "og", "Xi")],
    )
    repo = FakeRoutines(
        {
            "rtn_1": live_routine(),
            "rtn_out": live_routine(schedule_id="rtn_out", agent_id="out", guild_id="sales"),
            "rtn_x": live_routine(schedule_id="rtn_x", org_id="other", agent_id="x1", guild_id="og"),
        }
    )
    uow = FakeUnitOfWork(workspace=workspace, stores={RoutinesRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("routines", [RoutineKind()]), uow, repo)


def create(**overrides: Any) -> dict[str, Any]:
    return {
        "action": "create",
        "agent_id": "a1",
        "window": "every 2 hours between 09:00 and 17:00 on weekdays",
        "timezone": "Europe/Paris",
        "description": "Queue sweep",
        "instruction": "Sweep the queue.",
        "reason": "why",
        **overrides,
    }


def edit(**overrides: Any) -> dict[str, Any]:
    return {"action": "edit", "schedule_id": "rtn_1", "reason": "why", **overrides}


async def test_each_rule_refuses_with_its_reason_and_records_nothing() -> None:
    world = await new_world()
    refused = {
        "bad_cron": create(window=None, cron="61 * * * *"),
        "bad_window": create(window="every two hours"),
        "bad_timezone": create(timezone="Mars/Olympus"),
        "two_timings": create(cron="0 9 * * *"),
        "timing_required": create(window=None),
        "missing_field": create(instruction=None),
        "no_change": edit(description="Morning sweep", paused=False),
        "unknown_routine": edit(schedule_id="rtn_nope", description="x"),
        "agent_out_of_reach": create(agent_id="out"),
        "unknown_agent": create(agent_id="x1"),
    }
    for seq, (code, arguments) in enumerate(refused.items(), start=1):
        result = await world.call({k: v for k, v in arguments.items() if v is not None}, seq=seq)
        assert result.error is not None and result.error.code == code, (code, result)
    other_org = await world.call(edit(schedule_id="rtn_x", description="x"), seq=20)
    assert other_org.error is not None and (other_org.error.code, other_org.error.status) == ("unknown_routine", 404)
    outside = await world.call(edit(schedule_id="rtn_out", description="x"), seq=21)
    assert outside.error is not None and outside.error.code == "agent_out_of_reach"
    assert world.uow.proposals.proposals == {}
    assert world.repo.writes == []


async def test_a_create_card_shows_the_routine_and_when_the_agent_wakes() -> None:
    world = await new_world()
    result = await world.call(create(paused=True), seq=1)
    assert result.ok and result.widget is not None and result.widget.kind == "routine"
    [proposed] = world.uow.messages(ProposalProposed)
    assert proposed.card.before == ""
    assert proposed.card.after == (
        "Agent: Ada (a1)\nDescription: Queue sweep\n"
        "Timing: every 2 hours between 09:00 and 17:00 on weekdays, Europe/Paris\nPaused: yes\n"
        "Instruction:\nSweep the queue.\n"
    )
    assert proposed.card.apply_label == "Create routine"
    assert proposed.card.effects == ("Ada does not wake for it while it is paused.",)
    live = await world.call(create(), seq=2)
    assert live.ok
    [_, running] = world.uow.messages(ProposalProposed)
    assert running.card.effects == (
        "Ada wakes every 2 hours between 09:00 and 17:00 on weekdays, Europe/Paris: next "
        "Tue 01 Dec 2026 11:00 CET (UTC+01:00); Tue 01 Dec 2026 13:00 CET (UTC+01:00); "
        "Tue 01 Dec 2026 15:00 CET (UTC+01:00)",
        "The next wake-up is planned again from the moment the change is applied.",
    )


async def test_an_edit_keeps_what_it_leaves_out_and_says_what_applying_does() -> None:
    world = await new_world()
    world.repo.switches[GUILD] = False
    result = await world.call(edit(instruction="Answer the newest thread.", paused=True), seq=1)
    assert result.ok
    [proposed] = world.uow.messages(ProposalProposed)
    assert "Description: Morning sweep\n" in proposed.card.after and "Paused: yes" in proposed.card.after
    assert proposed.card.effects == (
        "Ada does not wake for it while it is paused.",
        "The new instruction reaches later wake-ups only: a wake-up already sent keeps its own.",
        "Pauses the routine.",
        "The guild's routines are off: Ada does not wake for any of them until they are turned on.",
    )
    assert proposed.base.version == 3 and proposed.base.hash == live_routine().hash


async def test_apply_creates_as_the_operator_with_provenance_and_announces_it() -> None:
    world = await new_world()
    result = await world.call(create(), seq=4)
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("applied", 200, OPERATOR)
    [(op, schedule_id, provenance)] = world.repo.writes
    assert (op, provenance) == ("create", {"actor": OPERATOR, "session_id": SESSION, "seq": 4})
    created = world.repo.routines[schedule_id]
    assert created.next_wake_at == datetime(2026, 12, 1, 10, tzinfo=UTC)  # 11:00 in Paris, planned from the apply
    [(topic, key, changed)] = [e for e in world.uow.emitted if isinstance(e[2], RoutinesChanged)]
    assert (topic, key, changed.change, changed.schedule_id, changed.studio_seq) == (
        AGENT_ROUTINES_CHANGED.name,
        GUILD,
        "created",
        schedule_id,
        4,
    )
    again = await world.decide(result)
    assert (again.outcome, again.status) == ("refused", 422)
    assert len(world.repo.writes) == 1


async def test_an_edit_that_passes_a_timing_replaces_it_and_a_delete_deletes() -> None:
    world = await new_world()
    result = await world.call(edit(cron="0 12 * * *"), seq=1)
    outcome = await world.decide(result)
    assert outcome.outcome == "applied"
    changed = world.repo.routines["rtn_1"]
    assert (changed.timing, changed.version) == (Timing("0 12 * * *", None, "Europe/Paris"), 4)
    assert changed.next_wake_at == datetime(2026, 12, 1, 11, tzinfo=UTC)
    deleted = await world.decide(await world.call(edit(action="delete"), seq=2))
    assert deleted.outcome == "applied" and "rtn_1" not in world.repo.routines


async def test_a_routine_that_moved_is_409_and_a_fire_does_not_make_it_stale() -> None:
    world = await new_world()
    result = await world.call(edit(description="Evening sweep"), seq=1)
    world.repo.clock = datetime(2026, 12, 2, 8, 0, 1, tzinfo=UTC)
    assert await fire_due(world.uow, 10) == 3  # every routine was due; a fire moves the planned wake-up only
    outcome = await world.decide(result)
    assert outcome.outcome == "applied"
    moved = await world.call(edit(description="Night sweep"), seq=2)
    world.repo.routines["rtn_1"] = replace(world.repo.routines["rtn_1"], instruction="Changed meanwhile.")
    stale = await world.decide(moved)
    assert (stale.outcome, stale.status) == ("stale", 409)
    assert world.repo.routines["rtn_1"].description == "Evening sweep"


async def test_a_fire_carries_the_instruction_in_force_and_plans_after_now_once() -> None:
    world = await new_world()
    del world.repo.routines["rtn_out"], world.repo.routines["rtn_x"]
    world.repo.clock = datetime(2026, 12, 5, 9, tzinfo=UTC)  # four daily wake-ups missed
    assert await fire_due(world.uow, 10) == 1
    assert await fire_due(world.uow, 10) == 0
    [woke] = world.uow.messages(RoutineWokeUp)
    assert (woke.agent_id, woke.schedule_id, woke.instruction, woke.due_at) == (
        "a1",
        "rtn_1",
        "Answer the oldest thread.",
        "2026-12-02T08:00:00+00:00",
    )
    assert world.repo.routines["rtn_1"].next_wake_at == datetime(2026, 12, 6, 8, tzinfo=UTC)
    world.repo.routines["rtn_1"] = replace(world.repo.routines["rtn_1"], paused=True)
    world.repo.clock += timedelta(days=2)
    assert await fire_due(world.uow, 10) == 0
    world.repo.routines["rtn_1"] = replace(world.repo.routines["rtn_1"], paused=False)
    world.repo.switches[GUILD] = False
    assert await fire_due(world.uow, 10) == 0


async def test_list_shows_the_source_guilds_routines() -> None:
    world = await new_world()
    result = await world.call({}, seq=1, tool="studio_list_routines")
    assert result.ok and result.output is not None
    assert [r["schedule_id"] for r in result.output["routines"]] == ["rtn_1"]
    assert result.output["routines_on"] is True


@pytest.mark.parametrize(
    ("arguments", "tray"),
    [
        (create(), (6, 0)),  # the routine's six lines, from nothing
        (edit(instruction="Answer the newest thread.", paused=True), (2, 2)),  # its pause and its instruction
        ({"action": "delete", "schedule_id": "rtn_1", "reason": "why"}, (0, 6)),
    ],
    ids=["create", "edit", "delete"],
)
async def test_the_tray_counts_the_lines_the_card_shows(arguments: dict[str, Any], tray: tuple[int, int]) -> None:
    world = await new_world()
    result = await world.call(arguments, seq=1)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, [("routine", *tray)])
    assert shown.tray == shown.card_total


# --- reverting -----------------------------------------------------------------------------------------

BEFORE = {
    "cron": "0 9 * * *",
    "timezone": "Europe/Paris",
    "description": "Morning sweep",
    "instruction": "Answer the oldest thread.",
    "paused": False,
}
"""rtn_1 as the world places it, as ``studio_edit_routine`` takes it."""


@pytest.mark.parametrize(
    ("case", "request_", "since", "inverse"),
    [
        ("a create is deleted", create(), None, {"action": "delete"}),
        (
            "an edit gets its routine back",
            edit(description="Noon sweep", paused=True),
            None,
            {"action": "edit", **BEFORE},
        ),
        ("a delete is created again", edit(action="delete"), None, {"action": "create", "agent_id": "a1", **BEFORE}),
        (
            "an edit deleted since is created again",
            edit(paused=True),
            "deleted",
            {"action": "create", "agent_id": "a1", **BEFORE},
        ),
        ("an edit set back since: nothing to do", edit(paused=True), "set back", 409),
        ("a create deleted since: nothing to do", create(), "deleted", 409),
    ],
)
async def test_a_routine_request_reverts_to_the_routine_before_it(
    case: str, request_: dict[str, Any], since: str | None, inverse: dict[str, Any] | int
) -> None:
    world = await new_world()
    result = await world.call(request_, seq=3)
    outcome = await world.decide(result)
    assert outcome.outcome == "applied", case
    schedule_id = request_.get("schedule_id") or outcome.effects["schedule_id"]
    if since == "deleted":
        del world.repo.routines[schedule_id]
    elif since == "set back":
        world.repo.routines[schedule_id] = live_routine(version=9)
    assert result.widget is not None
    request = RevertRequest(session_id="rev", seq=1)
    filed = await world.kit.revert(result.widget.proposal_id, request, org=ORG, actor=OPERATOR, uow=world.uow)
    if isinstance(inverse, int):
        assert isinstance(filed, Refusal) and (filed.status, filed.code) == (inverse, "already_reverted"), filed
        return
    assert isinstance(filed, Reverted), filed
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert proposed.action == inverse["action"] and proposed.reason == f"Revert of request #3 of session {SESSION}"
    stored = await world.uow.proposals.get(filed.proposal_id)
    assert stored is not None
    if inverse["action"] != "delete":
        payload = stored.payload
        wanted = {k: payload[k] for k in ("cron", "timezone", "description", "instruction", "paused")}
        assert wanted == {k: v for k, v in inverse.items() if k not in ("action", "agent_id")}, case
    else:
        assert stored.payload["schedule_id"] == schedule_id
