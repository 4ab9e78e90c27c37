"""The login kind on the proposal kit, on an in-memory unit of work (no broker, no database, no MCP server): login
requests, their answers and the popover's grant, and every refusal of the proxy before it calls a server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from assent.contracts import (
    DecisionMade,
    ProposalOutcome,
    ProposalProposed,
    SessionClosed,
    SessionContext,
    ToolCall,
    ToolResult,
)
from assent.domain import Agent, Guild
from assent.testing import FakeProposals, FakeUnitOfWork, FakeWorkspace, shown_line_counts
from assent.topics import PROPOSALS_OUTCOMES, TOOL_RESULTS
from connections import workspace
from connections.adapters.crypto import CredentialBox
from connections.adapters.mcp import ConnectionFailed
from connections.adapters.repository import Grant, LoginsRepository, StoredCredentials
from connections.calls import CallRunner
from connections.domain.evidence import RESULT_CAP_BYTES, CallOutcome
from connections.domain.logins import Credentials, Login
from connections.domain.policy import ToolSpec
from connections.kinds.login import ConnectionsKit, LoginKind

ORG, GUILD, SESSION, OPERATOR = "org", "guild", "s1", "operator@example.com"
CONTEXT = SessionContext(org_id=ORG, source_guild_id=GUILD, operator_user_id=OPERATOR)
KEY = "ZmDfcTF7_60GrrY167zsiPd67pEvs0aGOv2oasOM1Pg="
TOKEN = "tok-secret-12345"
TOOLS = (
    ToolSpec("list_orders", "List orders."),
    ToolSpec("refund_order", "Refund an order."),
    ToolSpec("get_audit_trail", default_off=True),
    ToolSpec("account_summary", read_only_hint=True),
    ToolSpec("sync_status", mutating=False),
    ToolSpec("get_and_lock", mutating=True),
)


def login(login_id: str, scope: str = "guild", scope_id: str | None = GUILD, **more: Any) -> Login:
    fields: dict[str, Any] = {
        "org_id": ORG,
        "name": login_id.title(),
        "server_url": f"https://{login_id}.example/mcp",
        "account": "support@acme.example",
        "connected": True,
        "verified": False,
        "tools": TOOLS,
        **more,
    }
    return Login(login_id, scope=scope, scope_id=scope_id, **fields)  # type: ignore[arg-type]  # scope: a Literal


@dataclass
class FakeLogins:
    """Logins and grants in memory; pending requests are read from the unit of work's proposals."""

    proposals: FakeProposals
    box: CredentialBox
    logins: dict[str, Login] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    grants: dict[tuple[str, str], Grant] = field(default_factory=dict)
    calls: dict[uuid.UUID, tuple[dict[str, Any], dict[str, str]]] = field(default_factory=dict)
    """Proxied calls admitted and not answered yet."""

    def add(self, held: Login, credentials: Credentials | None = None) -> None:
        self.logins[held.login_id] = held
        if credentials is not None:
            self.secrets[held.login_id] = self.box.encrypt(credentials)

    async def get(self, login_id: str, *, for_update: bool = False) -> Login | None:
        return self.logins.get(login_id)

    async def reachable(self, org_id: str, guild_id: str, agent_ids: list[str]) -> list[Login]:
        return sorted(
            (
                held
                for held in self.logins.values()
                if held.scope == "platform"
                or (
                    held.org_id == org_id
                    and (
                        held.scope == "org"
                        or (held.scope == "guild" and held.scope_id == guild_id)
                        or (held.scope == "agent" and held.scope_id in agent_ids)
                    )
                )
            ),
            key=lambda held: held.login_id,
        )

    async def credentials(self, login_id: str) -> StoredCredentials | None:
        token = self.secrets.get(login_id)
        return None if token is None else StoredCredentials(login_id, token, self.box.key_id)

    async def grant(
        self,
        session_id: str,
        login_id: str,
        actor: str,
        via: str,
        seq: int | None,
        at: datetime,
        expires_at: datetime | None = None,
    ) -> None:
        held = self.grants.get((session_id, login_id))
        if held is None or not held.held(at):
            self.grants[(session_id, login_id)] = Grant(login_id, actor, at, via, seq, expires_at=expires_at)

    async def revoke(self, session_id: str, login_id: str, actor: str, at: datetime) -> bool:
        held = self.grants.get((session_id, login_id))
        if held is None or not held.active:
            return False
        self.grants[(session_id, login_id)] = Grant(
            login_id, held.granted_by, held.granted_at, held.via, held.seq, actor, at
        )
        return True

    async def grants_of(self, session_id: str) -> dict[str, Grant]:
        return {login_id: grant for (s, login_id), grant in self.grants.items() if s == session_id}

    async def end_grants(self, session_id: str) -> None:
        self.grants = {key: grant for key, grant in self.grants.items() if key[0] != session_id}

    async def add_call(self, call_id: uuid.UUID, session_id: str, call: ToolCall, trace: dict[str, str]) -> None:
        self.calls.setdefault(call_id, (call.model_dump(mode="json"), trace))

    async def take_call(self, call_id: uuid.UUID, now: datetime, until: datetime) -> Any | None:
        held = self.calls.get(call_id)
        return None if held is None else SimpleNamespace(call=held[0], trace=held[1])

    async def calls_due(self, now: datetime, limit: int) -> list[uuid.UUID]:
        return list(self.calls)[:limit]

    async def finish_call(self, call_id: uuid.UUID) -> bool:
        return self.calls.pop(call_id, None) is not None

    async def pending_proposals(self, session_id: str, login_id: str) -> list[str]:
        return [
            p.proposal_id
            for p in sorted(self.proposals.proposals.values(), key=lambda p: p.seq)
            if p.session_id == session_id
            and p.kind == "login"
            and p.status == "pending"
            and p.payload["connection_id"] == login_id
        ]


@dataclass
class FakeServer:
    """A login's MCP server as the pool would reach it: answers each call with ``answer`` (or raises ``failure``), and
    keeps every call."""

    answer: CallOutcome = field(default_factory=lambda: CallOutcome(("ok",)))
    failure: Exception | None = None
    meanwhile: Callable[[], Awaitable[None]] | None = None
    """What happens elsewhere while the server works on a call."""
    calls: list[tuple[str, str, dict[str, str], str, dict[str, Any]]] = field(default_factory=list)

    async def call(
        self, login_id: str, url: str, headers: Mapping[str, str], tool: str, arguments: dict[str, Any]
    ) -> CallOutcome:
        self.calls.append((login_id, url, dict(headers), tool, arguments))
        if self.meanwhile is not None:
            await self.meanwhile()
        if self.failure is not None:
            raise self.failure
        return self.answer


@dataclass
class Clock:
    """The service's time as the tests move it."""

    now: datetime = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    kit: ConnectionsKit
    runner: CallRunner
    uow: FakeUnitOfWork
    logins: FakeLogins
    server: FakeServer
    clock: Clock
    seq: int = 0

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Send one call; the one ToolResult it emitted (a proxied call's once its transaction committed)."""
        before = len(self.uow.messages(ToolResult))
        await self.kit.on_tool_call(self.tool_call(tool, arguments), self.uow)
        await self.uow.commit()  # a proxied call's runner starts once the call's transaction has committed
        await self.runner.wait()
        [result] = self.uow.messages(ToolResult, TOOL_RESULTS.name)[before:]
        return result

    def tool_call(self, tool: str, arguments: dict[str, Any]) -> ToolCall:
        self.seq += 1
        return ToolCall(
            session_id=SESSION,
            seq=self.seq,
            turn_id="turn1",
            step=1,
            tool_call_id=f"call_{self.seq}",
            tool=tool,
            arguments=arguments,
            session=CONTEXT,
        )

    async def request(self, connection_id: str) -> ToolResult:
        return await self.call(
            "studio_request_connection_access", {"connection_id": connection_id, "reason": "read the orders"}
        )

    async def read(self, connection_id: str, tool: str = "list_orders", **arguments: Any) -> ToolResult:
        return await self.call(
            "studio_call_connection_tool", {"connection_id": connection_id, "tool": tool, "arguments": arguments}
        )

    async def decide(self, result: ToolResult, decision: str = "grant", **options: Any) -> ProposalOutcome:
        assert result.widget is not None
        outcome = await self.kit.on_decision(
            DecisionMade(
                decision_id=uuid.uuid4().hex,
                proposal_id=result.widget.proposal_id,
                session_id=SESSION,
                seq=result.seq,
                kind="login",
                decision=decision,
                actor=OPERATOR,
                options=options,
            ),
            self.uow,
        )
        assert outcome is not None and self.uow.messages(ProposalOutcome, PROPOSALS_OUTCOMES.name)[-1] == outcome
        return outcome

    def grant(self, login_id: str) -> None:
        self.logins.grants[(SESSION, login_id)] = Grant(login_id, OPERATOR, datetime(2026, 12, 1), "popover")


async def new_world(*, result_max_bytes: int = RESULT_CAP_BYTES) -> World:
    workspace_copy = FakeWorkspace(
        orgs={ORG: "Acme", "other": "Other"},
        guilds=[Guild(GUILD, ORG, "Support"), Guild("sales", ORG, "Sales")],
        agents=[
            Agent("ada", ORG, GUILD, "Ada"),
            Agent("retired", ORG, GUILD, "Rita", live=False),
            Agent("cy", ORG, "sales", "Cy"),
        ],
    )
    box = CredentialBox(KEY)
    uow = FakeUnitOfWork(workspace=workspace_copy)
    logins = FakeLogins(uow.proposals, box)
    uow.stores[LoginsRepository] = logins
    await uow.sessions.ensure(SESSION, CONTEXT)
    server = FakeServer()
    clock = Clock()
    kind = LoginKind(box, server, result_max_bytes=result_max_bytes, now=clock)

    @asynccontextmanager
    async def unit_of_work() -> AsyncIterator[FakeUnitOfWork]:
        yield uow
        await uow.commit()

    runner = CallRunner(unit_of_work, kind, lease_seconds=60, max_result_bytes=900_000)
    kit = ConnectionsKit("connections", kind, runner.start)
    logins.add(login("helpdesk"), Credentials(TOKEN))
    logins.add(login("verified", verified=True))
    logins.add(login("offline", connected=False))
    logins.add(login("platform", scope="platform", scope_id=None, org_id=None))
    logins.add(login("orgwide", scope="org", scope_id=None))
    logins.add(login("ada_login", scope="agent", scope_id="ada"))
    logins.add(login("rita_login", scope="agent", scope_id="retired"))
    logins.add(login("sales_login", scope="guild", scope_id="sales"))
    logins.add(login("foreign", org_id="other"))
    return World(kit, runner, uow, logins, server, clock)


async def test_a_login_request_is_a_connection_access_widget_in_the_logins_section() -> None:
    world = await new_world()
    result = await world.request("helpdesk")
    assert result.ok and result.widget is not None
    assert (result.widget.type, result.widget.await_operator, result.widget.kind) == (
        "studio_connection_access",
        True,
        "login",
    )
    assert result.widget.target.ref == "helpdesk"
    [proposed] = world.uow.messages(ProposalProposed)
    assert (proposed.section, proposed.card.apply_label, proposed.action) == ("Logins", "Grant read access", "grant")
    assert proposed.card.notes == (
        "Server: https://helpdesk.example/mcp",
        "Account: support@acme.example",
        "Becomes readable: list_orders, sync_status",
        "Stays blocked: refund_order (the name refund_order says it changes data ('refund')); "
        "get_audit_trail (get_audit_trail is off by default); "
        "account_summary (the name account_summary names no read verb, so it is taken to change data (its read-only "
        "hint counts on a verified connector only)); get_and_lock (the connector's manifest lists get_and_lock as changing data)",
    )
    assert world.logins.grants == {}


async def test_a_login_request_counts_no_lines_in_the_tray_or_on_its_card() -> None:
    """A grant changes no text: the card shows the login as it is, and neither it nor the tray counts a line."""
    world = await new_world()
    result = await world.request("helpdesk")
    assert result.widget is not None, result.error
    shown = await shown_line_counts(world.kit, world.uow, result.widget.proposal_id)
    assert (shown.tray, shown.card) == ((0, 0), [("login", 0, 0)])
    [proposed] = world.uow.messages(ProposalProposed)
    text = "server: https://helpdesk.example/mcp\naccount: support@acme.example\n"
    assert [(f.name, f.before, f.after) for f in proposed.card.fields] == [("login", text, text)]


@pytest.mark.parametrize(
    ("connection_id", "code"),
    [
        ("nothing", "unknown_connection"),
        ("foreign", "unknown_connection"),
        ("sales_login", "connection_out_of_reach"),
        ("rita_login", "connection_out_of_reach"),
        ("offline", "connection_not_connected"),
    ],
)
async def test_a_request_out_of_reach_or_not_connected_is_refused(connection_id: str, code: str) -> None:
    world = await new_world()
    result = await world.request(connection_id)
    assert result.error is not None and result.error.code == code, result
    assert world.uow.proposals.proposals == {}


@pytest.mark.parametrize("connection_id", ["platform", "orgwide", "helpdesk", "ada_login"])
async def test_every_scope_the_source_guild_reaches_may_be_requested(connection_id: str) -> None:
    world = await new_world()
    assert (await world.request(connection_id)).ok


async def test_a_second_request_waits_on_the_first_and_a_held_login_needs_none() -> None:
    world = await new_world()
    first = await world.request("helpdesk")
    again = await world.request("helpdesk")
    assert again.error is not None and again.error.code == "already_requested"
    await world.decide(first)
    held = await world.request("helpdesk")
    assert held.error is not None and held.error.code == "already_granted"


async def test_granting_adds_the_login_to_the_session_once_and_records_who() -> None:
    world = await new_world()
    result = await world.request("helpdesk")
    outcome = await world.decide(result)
    assert (outcome.outcome, outcome.status, outcome.resolved_by) == ("granted", 200, OPERATOR)
    grant = world.logins.grants[(SESSION, "helpdesk")]
    assert (grant.granted_by, grant.via, grant.seq) == (OPERATOR, "request", result.seq)
    again = await world.decide(result, "decline")
    assert (again.outcome, again.status) == ("refused", 422)
    assert world.logins.grants[(SESSION, "helpdesk")].active


async def test_declining_grants_nothing() -> None:
    world = await new_world()
    outcome = await world.decide(await world.request("helpdesk"), "decline")
    assert (outcome.outcome, outcome.status) == ("declined", 200)
    assert world.logins.grants == {}


async def test_a_login_whose_server_changed_since_the_request_is_stale_and_one_disconnected_is_refused() -> None:
    world = await new_world()
    result = await world.request("helpdesk")
    world.logins.logins["helpdesk"] = login("helpdesk", server_url="https://elsewhere.example/mcp")
    stale = await world.decide(result)
    assert (stale.outcome, stale.status) == ("stale", 409)
    world.logins.logins["helpdesk"] = login("helpdesk", connected=False)
    refused = await world.decide(result)
    assert (refused.outcome, refused.status, refused.effects["code"]) == ("refused", 409, "connection_not_connected")
    assert world.logins.grants == {}
    assert world.uow.proposals.proposals[result.widget.proposal_id].status == "pending"  # type: ignore[union-attr]


async def test_a_grant_from_the_popover_answers_the_waiting_request() -> None:
    world = await new_world()
    result = await world.request("helpdesk")
    session = await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", True, ORG, OPERATOR)
    assert session.granted_connection_ids == ["helpdesk"]
    [outcome] = world.uow.messages(ProposalOutcome)
    assert (outcome.outcome, outcome.resolved_by, outcome.seq) == ("granted", OPERATOR, result.seq)
    assert world.logins.grants[(SESSION, "helpdesk")].via == "popover"
    revoked = await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", False, ORG, OPERATOR)
    assert revoked.granted_connection_ids == []


async def test_the_popover_grants_only_a_reachable_connected_login() -> None:
    world = await new_world()
    with pytest.raises(workspace.NotFound):
        await workspace.set_grant(world.uow, world.kit, SESSION, "sales_login", True, ORG, OPERATOR)
    with pytest.raises(workspace.NotFound):
        await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", True, "other", OPERATOR)
    with pytest.raises(workspace.Problem) as refused:
        await workspace.set_grant(world.uow, world.kit, SESSION, "offline", True, ORG, OPERATOR)
    assert refused.value.status == 409
    assert world.logins.grants == {}


# --- the proxy ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connection_id", "tool", "code"),
    [
        ("helpdesk", "list_orders", "not_granted"),
        ("foreign", "list_orders", "unknown_connection"),
        ("sales_login", "list_orders", "connection_out_of_reach"),
    ],
)
async def test_a_call_without_a_grant_is_refused_and_reaches_no_server(
    connection_id: str, tool: str, code: str
) -> None:
    world = await new_world()
    result = await world.read(connection_id, tool)
    assert result.error is not None and result.error.code == code, result
    assert world.server.calls == []


@pytest.mark.parametrize(
    ("connection_id", "tool", "code"),
    [
        ("helpdesk", "nonexistent", "unknown_tool"),
        ("helpdesk", "refund_order", "tool_not_read_only"),
        ("helpdesk", "get_audit_trail", "tool_not_read_only"),
        ("helpdesk", "get_and_lock", "tool_not_read_only"),
        ("helpdesk", "account_summary", "tool_not_read_only"),
        ("offline", "list_orders", "connection_not_connected"),
    ],
)
async def test_a_granted_call_the_policy_refuses_reaches_no_server(connection_id: str, tool: str, code: str) -> None:
    world = await new_world()
    world.grant(connection_id)
    result = await world.read(connection_id, tool)
    assert result.error is not None and result.error.code == code, result
    assert world.server.calls == []


@pytest.mark.parametrize(
    ("connection_id", "tool"),
    [("helpdesk", "list_orders"), ("helpdesk", "sync_status"), ("verified", "account_summary")],
)
async def test_a_granted_readable_call_reaches_the_server_with_the_credentials(connection_id: str, tool: str) -> None:
    world = await new_world()
    world.grant(connection_id)
    result = await world.read(connection_id, tool, customer="c1")
    assert result.ok and result.output is not None and result.output["untrusted"] is True
    [(called, url, headers, name, arguments)] = world.server.calls
    assert (called, url, name, arguments) == (
        connection_id,
        f"https://{connection_id}.example/mcp",
        tool,
        {"customer": "c1"},
    )
    assert headers == ({"Authorization": f"Bearer {TOKEN}"} if connection_id == "helpdesk" else {})


async def test_a_revoked_grant_and_a_closed_session_are_refused_with_the_reason() -> None:
    world = await new_world()
    world.grant("helpdesk")
    await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", False, ORG, "olga")
    revoked = await world.read("helpdesk")
    assert revoked.error is not None and revoked.error.code == "grant_revoked" and "olga" in revoked.error.message
    world.grant("helpdesk")
    await world.kit.on_session_event(SessionClosed(session_id=SESSION), world.uow)
    assert await world.logins.grants_of(SESSION) == {}
    closed = await world.read("helpdesk")
    assert closed.error is not None and closed.error.code == "session_closed"
    assert world.server.calls == []


async def test_the_result_is_redacted_against_the_stored_credentials_even_split_across_blocks() -> None:
    world = await new_world()
    world.grant("helpdesk")
    world.server.answer = CallOutcome(
        (f"you are {TOKEN[:7]}", f"{TOKEN[7:]}; Bearer {TOKEN}", '{"t": "' + TOKEN + '"}')
    )
    result = await world.read("helpdesk")
    assert result.output is not None
    assert "secret" not in result.output["evidence"] and "[redacted]" in result.output["evidence"]


async def test_a_large_result_is_capped_with_a_marker() -> None:
    world = await new_world(result_max_bytes=1024)
    world.grant("helpdesk")
    world.server.answer = CallOutcome(("y" * 5000,))
    result = await world.read("helpdesk")
    assert result.output is not None and result.output["truncated"] is True
    assert "[cut: the result was 5000 bytes; only the first" in result.output["evidence"]


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (ConnectionFailed(504, "connection_timeout", "the MCP server did not answer"), 504, "connection_timeout"),
        (ConnectionFailed(502, "connection_failed", f"broke off near {TOKEN}"), 502, "connection_failed"),
        (RuntimeError("unexpected"), 502, "connection_failed"),
    ],
)
async def test_a_server_that_does_not_answer_is_an_error_result(failure: Exception, status: int, code: str) -> None:
    world = await new_world()
    world.grant("helpdesk")
    world.server.failure = failure
    result = await world.read("helpdesk")
    assert result.error is not None and (result.error.status, result.error.code) == (status, code)
    assert TOKEN not in result.error.message


async def test_a_call_is_made_after_its_transaction_and_checked_again_as_it_is_answered() -> None:
    """Admitted under the session's lock and recorded; the server is called once that transaction has committed, and
    a revoke while it works refuses the answer."""
    world = await new_world()
    world.grant("helpdesk")
    call = world.tool_call(
        "studio_call_connection_tool", {"connection_id": "helpdesk", "tool": "list_orders", "arguments": {}}
    )
    await world.kit.on_tool_call(call, world.uow)
    assert (world.uow.messages(ToolResult), world.server.calls, list(world.logins.calls)) == ([], [], [call.id])

    async def revoke() -> None:
        await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", False, ORG, "olga")

    world.server.meanwhile = revoke
    await world.uow.commit()
    await world.runner.wait()
    [result] = world.uow.messages(ToolResult)
    assert result.error is not None and result.error.code == "grant_revoked" and "olga" in result.error.message
    assert (len(world.server.calls), world.logins.calls) == (1, {})


async def test_a_call_left_by_a_stopped_runner_is_answered_by_a_sweep_once() -> None:
    world = await new_world()
    world.grant("helpdesk")
    call = world.tool_call(
        "studio_call_connection_tool", {"connection_id": "helpdesk", "tool": "list_orders", "arguments": {}}
    )
    await world.kit.on_tool_call(call, world.uow)
    world.uow.committed.clear()  # the process stopped before its runner started
    await world.runner.sweep()
    await world.runner.wait()
    await world.runner.sweep()  # nothing left
    await world.runner.wait()
    [result] = world.uow.messages(ToolResult)
    assert result.ok and result.tool_call_id == call.tool_call_id and len(world.server.calls) == 1


# --- lifetimes ------------------------------------------------------------------------------------------------


async def test_a_grant_with_a_lifetime_lapses_and_the_call_after_says_which_login_when_and_what_to_do() -> None:
    world = await new_world()
    asked = await world.request("helpdesk")
    outcome = await world.decide(asked, lifetime="PT30M")
    assert (outcome.outcome, outcome.status) == ("granted", 200)
    granted_at = world.clock.now
    assert world.logins.grants[(SESSION, "helpdesk")].expires_at == granted_at + timedelta(minutes=30)
    assert (await world.read("helpdesk")).ok
    world.clock.now = granted_at + timedelta(minutes=29, seconds=59)
    assert (await world.read("helpdesk")).ok
    world.clock.now = granted_at + timedelta(minutes=30)
    lapsed = await world.read("helpdesk")
    assert lapsed.error is not None and (lapsed.error.status, lapsed.error.code) == (403, "connection_grant_expired")
    assert "'helpdesk' (Helpdesk)" in lapsed.error.message
    assert "lapsed at 2026-12-03 09:30:00 UTC" in lapsed.error.message
    assert "studio_request_connection_access" in lapsed.error.message
    assert len(world.server.calls) == 2
    listed = await workspace.session_connections(world.uow, SESSION, ORG, world.clock.now)
    [desk] = [c for c in listed.connections if c.connection_id == "helpdesk"]
    assert (desk.granted, desk.expires_at, desk.revoked_at) == (False, granted_at + timedelta(minutes=30), None)


async def test_a_lapsed_grant_may_be_asked_for_and_granted_again_with_a_fresh_lifetime() -> None:
    world = await new_world()
    await world.decide(await world.request("helpdesk"), lifetime="PT1H")
    held = await world.request("helpdesk")
    assert held.error is not None and held.error.code == "already_granted"
    world.clock.now += timedelta(hours=2)
    again = await world.request("helpdesk")
    assert again.ok, again.error
    await world.decide(again, lifetime="PT8H")
    assert world.logins.grants[(SESSION, "helpdesk")].expires_at == world.clock.now + timedelta(hours=8)
    assert (await world.read("helpdesk")).ok
    world.clock.now += timedelta(hours=9)
    await world.decide(await world.request("helpdesk"))  # no lifetime: until the session closes
    assert world.logins.grants[(SESSION, "helpdesk")].expires_at is None
    world.clock.now += timedelta(days=60)
    assert (await world.read("helpdesk")).ok


async def test_a_call_admitted_before_its_grant_lapses_is_refused_as_it_is_answered_after() -> None:
    world = await new_world()
    await world.decide(await world.request("helpdesk"), lifetime="PT5M")

    async def later() -> None:
        world.clock.now += timedelta(minutes=5)

    world.server.meanwhile = later
    result = await world.read("helpdesk")
    assert result.error is not None and result.error.code == "connection_grant_expired"


async def test_the_popover_grants_for_a_lifetime_and_answers_the_waiting_request_with_it() -> None:
    world = await new_world()
    asked = await world.request("helpdesk")
    session = await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", True, ORG, OPERATOR, "P1D")
    assert session.granted_connection_ids == ["helpdesk"]
    [outcome] = world.uow.messages(ProposalOutcome)
    assert (outcome.outcome, outcome.seq) == ("granted", asked.seq)
    assert world.logins.grants[(SESSION, "helpdesk")].expires_at == world.clock.now + timedelta(days=1)
    world.clock.now += timedelta(days=1)
    listed = await workspace.session_connections(world.uow, SESSION, ORG, world.clock.now)
    assert [c.connection_id for c in listed.connections if c.granted] == []
    with pytest.raises(workspace.Problem) as refused:
        await workspace.set_grant(world.uow, world.kit, SESSION, "helpdesk", False, ORG, OPERATOR, "PT1H")
    assert refused.value.status == 422


@pytest.mark.parametrize("lifetime", ["P31D", "PT0S", 3600, "an hour"])
async def test_a_decision_sent_with_a_lifetime_out_of_range_grants_nothing(lifetime: Any) -> None:
    """The gateway refuses these (422) before any decision is sent; one that reached the kit anyway is refused."""
    world = await new_world()
    outcome = await world.decide(await world.request("helpdesk"), lifetime=lifetime)
    assert (outcome.outcome, outcome.status, outcome.effects["code"]) == ("refused", 422, "invalid_lifetime")
    assert world.logins.grants == {}
