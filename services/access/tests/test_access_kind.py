"""The access kind on the proposal kit, on an in-memory unit of work (no broker, no database)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from access.adapters.repository import AccessRepository, HeldBinding
from access.domain.access import Binding, CatalogTool, Change, Connection, Scope
from access.kinds.access import AccessKind
from access_contract.widget import AccessWidget
from assent.contracts import DecisionMade, ProposalOutcome, ProposalProposed, SessionContext, ToolCall, ToolResult
from assent.domain import Agent, Guild, Refusal
from assent.runtime import OwnerKit, Reverted, RevertRequest
from assent.testing import FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, TOOL_RESULTS

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
DESK = Connection("c1", "Desk", (CatalogTool("list_orders", False), CatalogTool("cancel_order", True)))


@dataclass
class FakeAccess:
    """Reachable logins per agent and bindings per scope in memory, with every write."""

    connections: list[Connection] = field(default_factory=lambda: [DESK])
    held: dict[tuple[str, str, str, str], bool] = field(default_factory=dict)
    named: dict[tuple[str, str, str, str], str | None] = field(default_factory=dict)
    """The connection a server's binding names, by the binding's key."""
    writes: list[tuple[str, str, Change, dict[str, Any]]] = field(default_factory=list)
    first: dict[tuple[str, str, str, str], bool] | None = None
    """The bindings as they were before the first write."""

    async def settings_before(
        self, agent_id: str, session_id: str, seq: int, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """What each agent-level binding said before the request's write: the write before it, else as first held."""
        at = next(i for i, w in enumerate(self.writes) if (w[3]["session_id"], w[3]["seq"]) == (session_id, seq))
        before: dict[tuple[str, str], str] = {}
        for kind, subject in keys:
            earlier = [
                w[2].setting
                for w in self.writes[:at]
                if (w[0], w[1], w[2].kind, w[2].subject) == ("agent", agent_id, kind, subject)
            ]
            held = (self.first or {}).get(("agent", agent_id, kind, subject))
            before[(kind, subject)] = earlier[-1] if earlier else "inherit" if held is None else "on" if held else "off"
        return before

    async def lock_org(self, org_id: str) -> None:
        return None

    async def reachable(self, org_id: str, guild_id: str | None, agent_id: str | None) -> list[Connection]:
        return list(self.connections)

    async def bindings_of(self, org_id: str, guild_id: str | None, agent_id: str | None) -> list[HeldBinding]:
        ids = {"org": org_id, "guild": guild_id, "agent": agent_id}
        return [
            HeldBinding(
                Binding(scope, kind, subject, on, self.named.get((scope, scope_id, kind, subject))),  # type: ignore[arg-type]  # stored literals
                scope_id,
                "someone",
                None,
                None,
            )
            for (scope, scope_id, kind, subject), on in self.held.items()
            if ids[scope] == scope_id
        ]

    async def write(
        self,
        org_id: str,
        scope: Scope,
        scope_id: str,
        changes: Sequence[Change],
        *,
        actor: str,
        session_id: str | None = None,
        seq: int | None = None,
    ) -> None:
        if self.first is None:
            self.first = dict(self.held)
        for change in changes:
            key = (scope, scope_id, change.kind, change.subject)
            if change.setting == "inherit":
                del self.held[key]
                self.named.pop(key, None)
            else:
                self.held[key] = change.setting == "on"
                self.named[key] = change.connection_id
            self.writes.append((scope, scope_id, change, {"actor": actor, "session_id": session_id, "seq": seq}))


@dataclass
class World:
    kit: OwnerKit
    uow: FakeUnitOfWork
    repo: FakeAccess

    async def call(self, arguments: dict[str, Any], seq: int, tool: str = "studio_edit_access") -> ToolResult:
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
    repo = FakeAccess()
    uow = FakeUnitOfWork(workspace=workspace, stores={AccessRepository: repo})
    await uow.sessions.ensure(SESSION, CONTEXT)
    return World(OwnerKit("access", [AccessKind()]), uow, repo)


def edit(**overrides: Any) -> dict[str, Any]:
    return {"agent_id": "a1", "reason": "why", **overrides}


async def test_each_rule_refuses_with_its_reason_and_records_nothing() -> None:
    world = await new_world()
    world.repo.held[("agent", "a1", "native_tool", "send_email")] = True
    refused = [
        (edit(native_tools={"report_issue": "off"}), 422, "not_a_binding"),
        (edit(native_tools={"browser_click": "off"}), 422, "not_a_binding"),
        (edit(native_tools={"memory": "off"}), 422, "agent_configuration"),
        (edit(native_tools={"teleport": "on"}), 422, "unknown_native_tool"),
        (edit(connections={"c9": "on"}), 422, "unknown_connection"),
        (edit(connection_tools={"c1/drop_table": "on"}), 422, "unknown_connection_tool"),
        (edit(native_tools={"send_email": "on", "web_search": "inherit"}), 422, "no_change"),
        (edit(), 422, "no_change"),
        (edit(agent_id="out", native_tools={"web_search": "off"}), 422, "agent_out_of_reach"),
        (edit(agent_id="x1", native_tools={"web_search": "off"}), 404, "unknown_agent"),
    ]
    for seq, (arguments, status, code) in enumerate(refused, start=1):
        result = await world.call(arguments, seq=seq)
        assert result.error is not None and (result.error.status, result.error.code) == (status, code), (code, result)
    named = await world.call(edit(connection_tools={"c1/drop_table": "on"}), seq=30)
    assert named.error is not None and "'c1/drop_table'" in named.error.message
    assert world.uow.proposals.proposals == {}
    assert world.repo.writes == []


async def test_read_gives_the_access_and_its_hash() -> None:
    world = await new_world()
    result = await world.call({"agent_id": "a1"}, seq=1, tool="studio_read_access")
    assert result.ok and result.output is not None
    proposed = await world.call(edit(native_tools={"web_search": "off"}), seq=2)
    assert proposed.widget is not None and proposed.widget.base.hash == result.output["hash"]
    assert [line["id"] for line in result.output["lines"]][-3:] == ["c1", "c1/cancel_order", "c1/list_orders"]


async def test_a_widening_card_says_so_and_names_the_data_changing_tools_it_gives_back() -> None:
    world = await new_world()
    world.repo.held[("guild", GUILD, "connection", "c1")] = False
    world.repo.held[("org", ORG, "native_tool", "web_search")] = False
    result = await world.call(edit(connections={"c1": "on"}, native_tools={"fetch_url": "off"}), seq=1)
    assert result.ok and result.widget is not None and result.widget.widens
    assert result.output is None
    assert result.widget.read_as(AccessWidget).edit is not None
    assert result.widget.read_as(AccessWidget).edit.model_dump() == {
        "changes": (
            {"kind": "native_tool", "id": "fetch_url", "label": "fetch_url", "setting": "off"},
            {"kind": "connection", "id": "c1", "label": "Desk (c1)", "setting": "on"},
        ),
        "widens": True,
    }
    [proposed] = world.uow.messages(ProposalProposed)
    assert proposed.widens and proposed.card.apply_label == "Apply edit"
    assert proposed.card.before.splitlines()[0] == (
        "Native tool web_search: off; inherited from the organisation (agent none, guild none, organisation off); "
        "reads only"
    )
    assert (
        "Connection Desk (c1): on; the agent sets it itself, through c1 (agent on via c1, guild off, organisation none)"
        in (proposed.card.after)
    )
    assert proposed.card.effects == (
        "Takes effect from Ada's next run; a run already going keeps the access it started with.",
        "Only the agent's own bindings are written; the guild's and the organisation's stay as they are.",
        "Gives back connection tools that can change data: Desk / cancel_order.",
        "This widens what Ada can use, so it is decided on its own: Apply all leaves it to its own apply.",
    )
    narrowing = await world.call(edit(native_tools={"fetch_url": "off"}), seq=2)
    assert narrowing.widget is not None and not narrowing.widget.widens
    assert narrowing.widget.read_as(AccessWidget).edit is not None
    assert narrowing.widget.read_as(AccessWidget).edit.model_dump() == {
        "changes": ({"kind": "native_tool", "id": "fetch_url", "label": "fetch_url", "setting": "off"},),
        "widens": False,
    }


async def test_apply_writes_the_agents_bindings_only_with_provenance_and_inherit_deletes() -> None:
    world = await new_world()
    world.repo.held[("guild", GUILD, "native_tool", "send_email")] = False
    world.repo.held[("agent", "a1", "connection", "c1")] = False
    result = await world.call(edit(native_tools={"send_email": "on"}, connections={"c1": "inherit"}), seq=4)
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("applied", 200, OPERATOR)
    assert [(scope, scope_id, c.subject, c.setting, p) for scope, scope_id, c, p in world.repo.writes] == [
        ("agent", "a1", "send_email", "on", {"actor": OPERATOR, "session_id": SESSION, "seq": 4}),
        ("agent", "a1", "c1", "inherit", {"actor": OPERATOR, "session_id": SESSION, "seq": 4}),
    ]
    assert world.repo.held == {
        ("guild", GUILD, "native_tool", "send_email"): False,
        ("agent", "a1", "native_tool", "send_email"): True,
    }
    again = await world.decide(result)
    assert (again.outcome, again.status) == ("refused", 422)
    assert len(world.repo.writes) == 2


async def test_a_binding_moved_at_any_scope_or_a_catalog_change_makes_apply_409() -> None:
    movers = {
        "org": lambda repo: repo.held.__setitem__(("org", ORG, "native_tool", "generate_image"), True),
        "guild": lambda repo: repo.held.__setitem__(("guild", GUILD, "native_tool", "web_search"), True),
        "agent": lambda repo: repo.held.__setitem__(("agent", "a1", "connection_tool", "c1/list_orders"), False),
        "catalog": lambda repo: repo.connections.__setitem__(0, Connection("c1", "Desk", DESK.tools[:1])),
    }
    for seq, (where, move) in enumerate(movers.items(), start=1):
        world = await new_world()
        result = await world.call(edit(native_tools={"send_email": "on"}), seq=seq)
        move(world.repo)
        stale = await world.decide(result)
        assert (stale.outcome, stale.status) == ("stale", 409), where
        assert world.repo.writes == [], where
        card = await world.kit.live_card(result.widget.proposal_id, world.uow)  # type: ignore[union-attr]  # a widget
        assert card is not None and card.stale, where


async def test_a_connection_of_a_server_the_guild_reaches_through_its_login_is_written_naming_that_login() -> None:
    world = await new_world()
    server = "https://mcp.shop.example"
    world.repo.connections = [
        Connection("c_org", "Shop", (CatalogTool("list_orders", False),), server),
        Connection("c_guild", "Shop guild", (CatalogTool("list_orders", False),), server),
    ]
    world.repo.held[("guild", GUILD, "connection", server)] = False
    world.repo.named[("guild", GUILD, "connection", server)] = "c_guild"
    result = await world.call(edit(connections={"c_org": "on"}), seq=1)
    assert result.widget is not None and result.widget.read_as(AccessWidget).edit is not None and result.widget.widens
    assert [c.model_dump() for c in result.widget.read_as(AccessWidget).edit.changes] == [
        {"kind": "connection", "id": "c_guild", "label": f"Shop guild (c_guild) at {server}", "setting": "on"}
    ]
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.effects["changes"]) == (
        "applied",
        [result.widget.read_as(AccessWidget).edit.changes[0].model_dump()],
    )
    assert [(scope, c.subject, c.connection_id, c.setting) for scope, _, c, _ in world.repo.writes] == [
        ("agent", server, "c_guild", "on")
    ]
    assert world.repo.named == {
        ("guild", GUILD, "connection", server): "c_guild",
        ("agent", "a1", "connection", server): "c_guild",
    }
    assert world.repo.held[("guild", GUILD, "connection", server)] is False


@pytest.mark.parametrize(
    ("arguments", "tray"),
    [
        (edit(native_tools={"web_search": "off"}), (1, 1)),  # the tool's line says off
        (edit(native_tools={"web_search": "off", "fetch_url": "off"}), (2, 2)),
        (edit(connections={"c1": "off"}), (3, 3)),  # the connection's line and its two tools'
    ],
    ids=["one tool", "two tools", "a connection"],
)
async def test_the_tray_counts_the_lines_the_card_shows(arguments: dict[str, Any], tray: tuple[int, int]) -> None:
    world = await new_world()
    result = await world.call(arguments, seq=1)
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == (tray, [("access", *tray)])
    assert shown.tray == shown.card_total


# --- reverting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "held", "asked", "since", "inverse"),
    [
        ("unbound: inherit again", None, {"native_tools": {"send_email": "off"}}, None, {"send_email": "inherit"}),
        ("on: on again", True, {"native_tools": {"send_email": "off"}}, None, {"send_email": "on"}),
        ("off: off again", False, {"native_tools": {"send_email": "inherit"}}, None, {"send_email": "off"}),
        ("set back since: nothing to do", None, {"native_tools": {"send_email": "off"}}, "inherit", 409),
    ],
)
async def test_an_access_change_reverts_each_agent_binding_to_what_it_said_before(
    case: str, held: bool | None, asked: dict[str, Any], since: str | None, inverse: dict[str, str] | int
) -> None:
    world = await new_world()
    key = ("agent", "a1", "native_tool", "send_email")
    if held is not None:
        world.repo.held[key] = held
    result = await world.call(edit(**asked), seq=3)
    assert (await world.decide(result)).outcome == "applied", case
    if since == "inherit":
        del world.repo.held[key]
    assert result.widget is not None
    request = RevertRequest(session_id="rev", seq=1)
    filed = await world.kit.revert(result.widget.proposal_id, request, org=ORG, actor=OPERATOR, uow=world.uow)
    if isinstance(inverse, int):
        assert isinstance(filed, Refusal) and (filed.status, filed.code) == (inverse, "already_reverted"), filed
        return
    assert isinstance(filed, Reverted), filed
    proposed = world.uow.messages(ProposalProposed)[-1]
    assert proposed.reason == f"Revert of request #3 of session {SESSION}"
    stored = await world.uow.proposals.get(filed.proposal_id)
    assert stored is not None
    assert {c["subject"]: c["setting"] for c in stored.payload["changes"]} == inverse, case
