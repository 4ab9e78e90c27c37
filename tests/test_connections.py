"""The connections service against the real services and a real MCP server (``tests.mcp_tools``, started here):
login requests and every status of ``…/logins/{seq}``, the Logins popover and its grant answering a waiting request,
every branch of the read-only policy through the proxy, redaction and the 64 KiB cap, calls without a grant, after a
revoke and after close, a server that does not answer in time or was killed and started again between two calls,
key rotation keeping stored logins readable, each login's catalog on its topic, and organisations' walls on every
new route."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from cryptography.fernet import Fernet

from assent.coach import CoachClient, CoachSession, CoachTurn
from assent.contracts import ToolResult, parse_message
from assent_devstack._service import free_port
from assent_devstack.mcp_demo import McpServerProcess, start_mcp_server
from connections.adapters.crypto import key_id
from connections.domain.evidence import RESULT_CAP_BYTES
from connections_contract.messages import ConnectionCatalog
from connections_contract.topics import CONNECTIONS_CATALOGS
from tests.conftest import OPERATOR, SECRETS, Endpoints, Stack, World, as_admin_of, new_world, running_stack, wait_for
from tests.test_memory_edits import wait_pending

TOKEN = f"tok-{uuid.uuid4().hex}"
"""The credential of the tests' logins: no answer and no log may show it (the suite greps the logs for it)."""
SECRETS.add(TOKEN)
PLATFORM = f"platform_desk_{uuid.uuid4().hex[:6]}"
TOOLS: dict[str, dict[str, Any]] = {
    "list_orders": {"read_only_hint": True},
    "refund_order": {},
    "list_calls": {"read_only_hint": True},
    "whoami": {"mutating": False},
    "read_log": {},
    "account_summary": {"read_only_hint": True},
    "get_audit_trail": {"read_only_hint": True, "default_off": True},
    "sync_status": {"mutating": False},
    "close_ticket": {"mutating": True},
    "slow_lookup": {},
}
"""The manifest of the tests' logins: the server's tools, with what the connector's manifest says of some."""


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServerProcess]:
    """The module's one MCP server (a test kills it and starts it again on its port)."""
    server = start_mcp_server(free_port(), tmp_path_factory.mktemp("mcp") / "mcp.log", module="tests.mcp_tools")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
async def cstack(
    endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory, mcp: McpServerProcess
) -> AsyncIterator[Stack]:
    """The module's one stack: a short MCP timeout, and a platform login on the MCP server."""
    platform = [
        {"login_id": PLATFORM, "name": "Platform desk", "server_url": mcp.url, "account": "platform", "tools": TOOLS}
    ]
    env = {"ASSENT_MCP_TIMEOUT_SECONDS": "3", "ASSENT_PLATFORM_LOGINS": json.dumps(platform)}
    async with running_stack(endpoints, tmp_path_factory.mktemp("connections"), env) as running:
        yield running


async def create_login(
    http: httpx.AsyncClient,
    url: str,
    login_id: str,
    scope: str,
    scope_id: str | None = None,
    **more: Any,
) -> dict[str, Any]:
    """Create a login (once the connections service's copy of the workspace holds its guild or agent)."""
    body = {
        "login_id": login_id,
        "name": login_id.split("_")[0].title(),
        "scope": scope,
        **({"scope_id": scope_id} if scope_id is not None else {}),
        "server_url": url,
        "account": "support@acme.example",
        "credentials": {"token": TOKEN},
        "tools": TOOLS,
        **more,
    }

    async def created() -> httpx.Response | None:
        response = await http.post("/api/workspace/logins", json=body)
        return None if response.status_code == 404 else response

    response = await wait_for(created, timeout=30)
    assert response.status_code == 201, response.text
    return dict(response.json())


def ids(n: str) -> str:
    return f"{n}_{uuid.uuid4().hex[:8]}"


async def open_session(coach: CoachClient, http: httpx.AsyncClient, world: World) -> CoachSession:
    """A session the connections service knows (its popover answers)."""
    session = await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)

    async def known() -> bool:
        return (await http.get(f"/api/studio/sessions/{session.session_id}/connections")).status_code == 200

    await wait_for(known, timeout=30)
    return session


async def grant(
    http: httpx.AsyncClient, session: CoachSession, login_id: str, granted: bool = True, **more: Any
) -> httpx.Response:
    return await http.put(
        f"/api/studio/sessions/{session.session_id}/connections/{login_id}", json={"granted": granted, **more}
    )


async def read(turn: CoachTurn, login_id: str, tool: str, timeout: float = 15.0, **arguments: Any) -> ToolResult:
    return await turn.call(
        "studio_call_connection_tool",
        {"connection_id": login_id, "tool": tool, "arguments": arguments},
        timeout=timeout,
    )


async def stored_decision(stack: Stack, decision_id: str) -> asyncpg.Record:
    """The gateway's record of a decision: who, what, from where, when, and its outcome."""
    conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        row = await conn.fetchrow("SELECT * FROM gateway.decisions WHERE decision_id = $1", decision_id)
    finally:
        await conn.close()
    assert row is not None
    return row


def refused(result: ToolResult) -> str:
    assert not result.ok and result.error is not None, result
    assert TOKEN not in result.error.message
    return result.error.code


def evidence(result: ToolResult) -> str:
    assert result.ok and result.output is not None, result
    assert result.output["untrusted"] is True
    text: str = result.output["evidence"]
    assert TOKEN not in text
    return text


async def test_a_login_request_is_answered_on_its_card_with_every_status(cstack: Stack, mcp: McpServerProcess) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "guild", world.guild_id)
        session = await open_session(coach, http, world)
        turn = session.begin_turn()
        asked = await turn.call(
            "studio_request_connection_access", {"connection_id": desk["login_id"], "reason": "check refunds"}
        )
        assert asked.ok and asked.widget is not None
        assert (asked.widget.type, asked.widget.await_operator, asked.widget.target.ref) == (
            "studio_connection_access",
            True,
            desk["login_id"],
        )
        memory = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
        assert memory.output is not None
        edit = await turn.call(
            "studio_edit_memory",
            {
                "agent_id": world.agent_id,
                "content": memory.output["content"] + "Quote the order.\n",
                "base_version": memory.output["version"],
                "reason": "r",
            },
        )
        await turn.end_step()
        sid, seq, edit_seq = session.session_id, turn.calls[asked.tool_call_id].seq, turn.calls[edit.tool_call_id].seq

        async def pending() -> dict[str, Any] | None:
            body = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()
            return body if body.get("waiting_on") == 2 else None

        items = {item["seq"]: item for item in (await wait_for(pending))["items"]}
        assert (items[seq]["section"], items[seq]["apply_label"]) == ("Logins", "Grant read access")

        logins, edits = f"/api/studio/sessions/{sid}/logins", f"/api/studio/sessions/{sid}/edits"
        assert (await http.get(f"{edits}/{seq}")).status_code == 404
        assert (await http.post(f"{edits}/{seq}", json={"decision": "decline"})).status_code == 404
        assert (await http.post(f"{logins}/{edit_seq}", json={"decision": "grant"})).status_code == 404
        assert (await http.post(f"{logins}/{seq + 100}", json={"decision": "grant"})).status_code == 404
        assert (await http.post(f"{logins}/{seq}", json={"decision": "apply"})).status_code == 422
        as_admin_of(http, world.org_id, roles=("viewer",))
        assert (await http.post(f"{logins}/{seq}", json={"decision": "grant"})).status_code == 403
        async with cstack.http() as theirs:
            await new_world(theirs)
            assert (await theirs.post(f"{logins}/{seq}", json={"decision": "grant"})).status_code == 404
        as_admin_of(http, world.org_id)
        login = f"/api/workspace/logins/{desk['login_id']}"
        assert (await http.patch(login, json={"connected": False})).status_code == 200
        offline = await http.post(f"{logins}/{seq}", json={"decision": "grant"})
        assert offline.status_code == 409 and "is not connected" in offline.json()["detail"]
        assert offline.json()["outcome"] == "refused"
        assert (await http.patch(login, json={"connected": True, "account": "other@acme.example"})).status_code == 200
        moved = await http.post(f"{logins}/{seq}", json={"decision": "grant"})
        assert moved.status_code == 409 and moved.json()["outcome"] == "stale", moved.text
        assert (await http.patch(login, json={"account": "support@acme.example"})).status_code == 200
        waiting = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()
        assert waiting["waiting_on"] == 2 and waiting["sections"]["Logins"] == 1  # refusals leave it pending

        granted = await http.post(f"{logins}/{seq}", json={"decision": "grant", "via": "tray"})
        assert granted.status_code == 200, granted.text
        answer = granted.json()
        assert (answer["outcome"], answer["resolved_by"], answer["seq"]) == ("granted", OPERATOR, seq)
        session_now = answer["answer"]
        assert (session_now["session_id"], session_now["closed"]) == (sid, False)
        held = [c for c in session_now["connections"] if c["granted"]]
        assert [(c["connection_id"], c["granted_by"]) for c in held] == [(desk["login_id"], OPERATOR)]
        assert held[0]["granted_at"] is not None and answer["resolved_at"] is not None
        # The answer came once the gateway held the outcome: the pending items show it answered at once.
        after = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()
        assert (after["waiting_on"], [item["seq"] for item in after["items"]]) == (1, [edit_seq])
        row = await stored_decision(cstack, answer["decision_id"])
        assert (row["actor"], row["decision"], row["via"], row["seq"]) == (OPERATOR, "grant", "tray", seq)
        assert row["outcome"]["outcome"] == "granted" and row["decided_at"] <= row["outcome_at"]
        again = await http.post(f"{logins}/{seq}", json={"decision": "decline"})
        assert again.status_code == 409 and f"already granted by {OPERATOR} at " in again.json()["detail"]
        assert (await http.post(f"{edits}/{edit_seq}", json={"decision": "apply"})).status_code == 200

        continuation = await turn.continuation()
        assert f"- seq {seq}: Read access to Desk ({mcp.url}, as support@acme.example): granted by {OPERATOR}" in (
            continuation.text
        )
        assert continuation.text.startswith("The operator decided 2 requests:")

        after = session.begin_turn()
        orders = evidence(await read(after, desk["login_id"], "list_orders", customer="c-1001"))
        assert "A-5512: Espresso machine" in orders


async def test_the_popover_lists_every_reachable_login_and_its_grant_answers_a_waiting_request(
    cstack: Stack, mcp: McpServerProcess
) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        org = await create_login(http, mcp.url, ids("org"), "org")
        guild = await create_login(http, mcp.url, ids("guild"), "guild", world.guild_id)
        member = await create_login(http, mcp.url, ids("member"), "agent", world.agent_id)
        outsider = await create_login(http, mcp.url, ids("outsider"), "agent", world.outsider_id)
        sales = await create_login(http, mcp.url, ids("sales"), "guild", f"{world.guild_id}_b")
        offline = await create_login(http, mcp.url, ids("offline"), "org", connected=False)
        session = await open_session(coach, http, world)
        listed = (await http.get(f"/api/studio/sessions/{session.session_id}/connections")).json()
        reachable = {c["connection_id"]: c for c in listed["connections"]}
        assert set(reachable) == {PLATFORM, org["login_id"], guild["login_id"], member["login_id"], offline["login_id"]}
        assert not any(c["granted"] for c in reachable.values())
        tools = {tool["name"]: tool for tool in reachable[guild["login_id"]]["tools"]}
        assert (tools["list_orders"]["readable"], tools["refund_order"]["changes_data"]) == (True, True)

        turn = session.begin_turn()
        asked = await turn.call(
            "studio_request_connection_access", {"connection_id": org["login_id"], "reason": "read orders"}
        )
        assert asked.ok
        await turn.end_step()
        assert (await grant(http, session, sales["login_id"])).status_code == 404
        assert (await grant(http, session, outsider["login_id"])).status_code == 404
        assert (await grant(http, session, offline["login_id"])).status_code == 409
        granted = await grant(http, session, org["login_id"])
        assert granted.status_code == 200 and granted.json()["granted_connection_ids"] == [org["login_id"]]

        continuation = await turn.continuation()
        assert f"granted by {OPERATOR}" in continuation.text
        seq = turn.calls[asked.tool_call_id].seq
        answered = await http.post(
            f"/api/studio/sessions/{session.session_id}/logins/{seq}", json={"decision": "grant"}
        )
        assert answered.status_code == 409
        listed = (await http.get(f"/api/studio/sessions/{session.session_id}/connections")).json()
        held = {c["connection_id"]: c for c in listed["connections"] if c["granted"]}
        assert list(held) == [org["login_id"]] and held[org["login_id"]]["granted_by"] == OPERATOR


async def test_the_proxy_calls_only_read_only_tools_and_redacts_and_caps_what_they_return(
    cstack: Stack, mcp: McpServerProcess
) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        plain = await create_login(http, mcp.url, ids("plain"), "guild", world.guild_id)
        verified = await create_login(http, mcp.url, ids("verified"), "guild", world.guild_id, verified=True)
        session = await open_session(coach, http, world)
        for login in (plain, verified):
            assert (await grant(http, session, login["login_id"])).status_code == 200
        turn = session.begin_turn()
        plain_id, verified_id = plain["login_id"], verified["login_id"]

        assert "A-5512" in evidence(await read(turn, plain_id, "list_orders", customer="c-1001"))  # verbs
        assert "last sync" in evidence(await read(turn, plain_id, "sync_status"))  # the manifest: not mutating
        assert refused(await read(turn, plain_id, "refund_order", order_id="A-5530", amount_eur=1)) == (
            "tool_not_read_only"  # verbs
        )
        assert refused(await read(turn, plain_id, "close_ticket", ticket_id="T-1")) == "tool_not_read_only"  # manifest
        assert refused(await read(turn, plain_id, "get_audit_trail")) == "tool_not_read_only"  # default-off
        assert refused(await read(turn, plain_id, "account_summary")) == "tool_not_read_only"  # hint: unverified
        assert "plan: business" in evidence(await read(turn, verified_id, "account_summary"))  # hint: verified
        assert refused(await read(turn, plain_id, "drop_everything")) == "unknown_tool"
        ran = evidence(await read(turn, plain_id, "list_calls")).split("\n")
        assert "close_ticket" not in ran and "get_audit_trail" not in ran and ran.count("account_summary") == 1

        echoed = evidence(await read(turn, plain_id, "whoami"))
        assert "you are authenticated with [redacted]\n[redacted] (header: Bearer [redacted])" in echoed
        assert '"token": "[redacted]", "quoted": "\\"[redacted]\\""' in echoed

        cut = await read(turn, plain_id, "read_log")
        assert cut.output is not None and cut.output["truncated"] is True
        text = evidence(cut)
        body = text.split("\n", 1)[1].rsplit("\n", 1)[0]
        assert len(body.encode()) <= RESULT_CAP_BYTES
        assert "\n[cut: the result was 129999 bytes; only the first" in body

        late = await read(turn, plain_id, "slow_lookup", seconds=60)
        assert refused(late) == "connection_timeout" and late.error is not None and late.error.status == 504
        assert "A-5541" in evidence(await read(turn, plain_id, "list_orders", customer="c-1002"))


async def test_calls_without_a_grant_after_a_revoke_and_after_close_are_refused(
    cstack: Stack, mcp: McpServerProcess
) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "org")
        session = await open_session(coach, http, world)
        turn = session.begin_turn()
        assert refused(await read(turn, desk["login_id"], "list_orders", customer="c-1001")) == "not_granted"
        assert (await grant(http, session, desk["login_id"])).status_code == 200
        assert "A-5512" in evidence(await read(turn, desk["login_id"], "list_orders", customer="c-1001"))
        revoked = await grant(http, session, desk["login_id"], granted=False)
        assert revoked.status_code == 200 and revoked.json()["granted_connection_ids"] == []
        after_revoke = await read(turn, desk["login_id"], "list_orders", customer="c-1001")
        assert refused(after_revoke) == "grant_revoked" and after_revoke.error is not None
        assert f"revoked by {OPERATOR}" in after_revoke.error.message
        assert (await grant(http, session, desk["login_id"])).status_code == 200

        await session.close()

        async def closed() -> bool:
            listed = await http.get(f"/api/studio/sessions/{session.session_id}/connections")
            return bool(listed.json()["closed"])

        await wait_for(closed)
        listed = (await http.get(f"/api/studio/sessions/{session.session_id}/connections")).json()
        assert not any(c["granted"] for c in listed["connections"])
        assert refused(await read(turn, desk["login_id"], "list_orders", customer="c-1001")) == "session_closed"
        assert (await grant(http, session, desk["login_id"])).status_code == 409


async def lapse(stack: Stack, session_id: str, login_id: str) -> datetime:
    """Make the session's grant of the login lapse a minute ago (as its lifetime running out would), in the
    database: no test waits for a lifetime."""
    conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        lapsed_at = await conn.fetchval(
            "UPDATE connections.grants SET expires_at = date_trunc('second', now()) - interval '1 minute' "
            "WHERE session_id = $1 AND login_id = $2 RETURNING expires_at",
            session_id,
            login_id,
        )
    finally:
        await conn.close()
    assert isinstance(lapsed_at, datetime)
    return lapsed_at


async def test_a_grant_for_a_lifetime_lapses_and_a_new_grant_reads_again(cstack: Stack, mcp: McpServerProcess) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "guild", world.guild_id)
        desk_id = desk["login_id"]
        session = await open_session(coach, http, world)
        sid = session.session_id
        turn = session.begin_turn()
        asked = await turn.call("studio_request_connection_access", {"connection_id": desk_id, "reason": "refunds"})
        assert asked.ok, asked.error
        await turn.end_step()
        await wait_pending(http, sid, 1)  # the gateway holds the request
        decide = f"/api/studio/sessions/{sid}/logins/{turn.calls[asked.tool_call_id].seq}"
        for bad in (3600, "P31D", "PT0S", "P1M", "an hour"):
            wrong = await http.post(decide, json={"decision": "grant", "lifetime": bad})
            assert wrong.status_code == 422, wrong.text
            [problem] = wrong.json()["detail"]
            assert problem["loc"] == ["body", "lifetime"] and "ISO 8601 duration as text" in problem["msg"], problem
        declined = await http.post(decide, json={"decision": "decline", "lifetime": "PT1H"})
        assert declined.status_code == 422 and "lifetime go with grant only" in declined.json()["detail"]
        assert (await grant(http, session, desk_id, lifetime="P31D")).status_code == 422

        granted = await http.post(decide, json={"decision": "grant", "lifetime": "PT1H"})
        assert granted.status_code == 200, granted.text
        [held] = [c for c in granted.json()["answer"]["connections"] if c["connection_id"] == desk_id]
        assert held["granted"] is True
        granted_at, expires_at = datetime.fromisoformat(held["granted_at"]), datetime.fromisoformat(held["expires_at"])
        assert expires_at - granted_at == timedelta(hours=1)
        await turn.continuation()

        after = session.begin_turn()
        assert "A-5512" in evidence(await read(after, desk_id, "list_orders", customer="c-1001"))
        lapsed_at = await lapse(cstack, sid, desk_id)
        late = await read(after, desk_id, "list_orders", customer="c-1001")
        assert refused(late) == "connection_grant_expired" and late.error is not None and late.error.status == 403
        assert f"grant of connection {desk_id!r} (Desk)" in late.error.message
        assert f"lapsed at {lapsed_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" in late.error.message
        assert "studio_request_connection_access" in late.error.message
        listed = (await http.get(f"/api/studio/sessions/{sid}/connections")).json()
        [shown] = [c for c in listed["connections"] if c["connection_id"] == desk_id]
        assert (shown["granted"], datetime.fromisoformat(shown["expires_at"])) == (False, lapsed_at)

        again = await after.call("studio_request_connection_access", {"connection_id": desk_id, "reason": "refunds"})
        assert again.ok, again.error
        await after.end_step()
        await wait_pending(http, sid, 1)
        regranted = await http.post(
            f"/api/studio/sessions/{sid}/logins/{after.calls[again.tool_call_id].seq}", json={"decision": "grant"}
        )
        assert regranted.status_code == 200, regranted.text
        [held] = [c for c in regranted.json()["answer"]["connections"] if c["connection_id"] == desk_id]
        assert (held["granted"], held["expires_at"]) == (True, None)
        await after.continuation()
        assert "A-5541" in evidence(await read(session.begin_turn(), desk_id, "list_orders", customer="c-1002"))


async def test_a_server_killed_and_started_again_between_two_calls_is_reached_again(
    cstack: Stack, mcp: McpServerProcess
) -> None:
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "org")
        session = await open_session(coach, http, world)
        assert (await grant(http, session, desk["login_id"])).status_code == 200
        turn = session.begin_turn()
        assert "A-5512" in evidence(await read(turn, desk["login_id"], "list_orders", customer="c-1001"))
        mcp.kill()
        down = await read(turn, desk["login_id"], "list_orders", customer="c-1001")
        assert refused(down) == "connection_failed" and down.error is not None and down.error.status == 502
        mcp.start()
        assert "A-5512" in evidence(await read(turn, desk["login_id"], "list_orders", customer="c-1001"))


async def test_rotating_the_key_keeps_stored_logins_readable(cstack: Stack, mcp: McpServerProcess) -> None:
    old = cstack.system.env["ASSENT_CREDENTIALS_KEY"]
    new = Fernet.generate_key().decode()
    SECRETS.add(new)
    async with cstack.http() as http, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "org")
        session = await open_session(coach, http, world)
        assert (await grant(http, session, desk["login_id"])).status_code == 200

        async def stored() -> asyncpg.Record:
            conn = await asyncpg.connect(cstack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                row = await conn.fetchrow(
                    "SELECT credentials, key_id FROM connections.logins WHERE login_id = $1", desk["login_id"]
                )
            finally:
                await conn.close()
            assert row is not None
            return row

        before = await stored()
        assert before["key_id"] == key_id(old.encode()) and TOKEN not in before["credentials"]
        service = cstack.system.connections
        for keys in (f"{new},{old}", new):  # roll out new,old: stored logins move to the new key; then new alone
            await asyncio.to_thread(service.stop)
            await asyncio.to_thread(service.start, {"ASSENT_CREDENTIALS_KEY": keys})
            turn = session.begin_turn()
            echoed = evidence(await read(turn, desk["login_id"], "whoami", timeout=60))  # once it has rejoined
            assert "you are authenticated with [redacted]" in echoed  # the server got the stored token
        after = await stored()
        assert after["key_id"] == key_id(new.encode()) and after["credentials"] != before["credentials"]


async def test_each_change_of_a_login_publishes_its_catalog_and_no_answer_shows_its_credentials(
    cstack: Stack, mcp: McpServerProcess
) -> None:
    async with cstack.http() as http:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "guild", world.guild_id)
        login_id = desk["login_id"]
        assert desk["has_credentials"] is True and "credentials" not in desk
        changed = await http.patch(
            f"/api/workspace/logins/{login_id}", json={"tools": {"list_orders": {}, "get_and_lock": {}}}
        )
        assert changed.status_code == 200 and changed.json()["revision"] == 2
        moved = await http.patch(f"/api/workspace/logins/{login_id}", json={"account": "other@acme.example"})
        assert moved.status_code == 200 and moved.json()["revision"] == 3
        cleared = await http.patch(f"/api/workspace/logins/{login_id}", json={"credentials": None})
        assert cleared.status_code == 200 and (cleared.json()["revision"], cleared.json()["has_credentials"]) == (
            4,
            False,
        )
        sealed = await http.patch(f"/api/workspace/logins/{login_id}", json={"credentials": {"token": TOKEN}})
        assert sealed.status_code == 200 and (sealed.json()["revision"], sealed.json()["has_credentials"]) == (5, True)
        for answer in (
            await http.get(f"/api/workspace/logins/{login_id}"),
            await http.get(f"/api/workspace/orgs/{world.org_id}/logins"),
        ):
            assert answer.status_code == 200 and TOKEN not in answer.text
        assert (await http.delete(f"/api/workspace/logins/{login_id}")).status_code == 200
        assert (await http.get(f"/api/workspace/logins/{login_id}")).status_code == 404

    topic = cstack.topic(CONNECTIONS_CATALOGS.name)

    async def catalogs() -> list[ConnectionCatalog] | None:
        found = [
            message
            for record in await cstack.records(topic, lambda r: r.key == login_id.encode())
            if isinstance(message := parse_message(record.value or b""), ConnectionCatalog)
        ]
        return found if len(found) == 3 else None

    first, second, gone = await wait_for(catalogs)
    assert (first.revision, first.org_id, first.scope, first.scope_id) == (1, world.org_id, "guild", world.guild_id)
    assert {t.name: t.changes_data for t in first.tools}["refund_order"] is True
    assert {t.name: t.changes_data for t in first.tools}["list_orders"] is False
    assert {t.name: t.default_off for t in first.tools}["get_audit_trail"] is True
    assert [(t.name, t.changes_data) for t in second.tools] == [("list_orders", False), ("get_and_lock", True)]
    assert (second.revision, gone.revision, gone.deleted, gone.tools) == (2, 6, True, ())


async def test_organisations_are_walls_on_every_new_route(cstack: Stack, mcp: McpServerProcess) -> None:
    async with cstack.http() as http, cstack.http() as theirs, cstack.coach() as coach:
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "guild", world.guild_id)
        session = await open_session(coach, http, world)
        turn = session.begin_turn()
        asked = await turn.call(
            "studio_request_connection_access", {"connection_id": desk["login_id"], "reason": "read orders"}
        )
        seq = turn.calls[asked.tool_call_id].seq
        other = await new_world(theirs)
        login, studio = f"/api/workspace/logins/{desk['login_id']}", f"/api/studio/sessions/{session.session_id}"
        walled = [
            await theirs.get(login),
            await theirs.patch(login, json={"name": "Mine"}),
            await theirs.delete(login),
            await theirs.get(f"/api/workspace/orgs/{world.org_id}/logins"),
            await theirs.get(f"{studio}/connections"),
            await theirs.put(f"{studio}/connections/{desk['login_id']}", json={"granted": True}),
            await theirs.post(f"{studio}/logins/{seq}", json={"decision": "grant"}),
            await theirs.post(
                "/api/workspace/logins",
                json={**{k: desk[k] for k in ("name", "server_url", "account")}, "login_id": ids("x"), "scope": "guild"}
                | {"scope_id": world.guild_id},
            ),
        ]
        assert [answer.status_code for answer in walled] == [404] * len(walled), [a.text for a in walled]
        theirs_listed = (await theirs.get(f"/api/workspace/orgs/{other.org_id}/logins")).json()
        assert desk["login_id"] not in {login["login_id"] for login in theirs_listed}
        foreign = await create_login(theirs, mcp.url, ids("foreign"), "org")
        mine = await turn.call(
            "studio_request_connection_access", {"connection_id": foreign["login_id"], "reason": "theirs"}
        )
        assert refused(mine) == "unknown_connection"
        assert (await http.get(f"{studio}/connections")).status_code == 200
        assert (await http.get(login)).json()["name"] == "Desk"


async def test_a_slow_call_holds_up_neither_the_sessions_other_calls_nor_its_decisions(
    stack: Stack, mcp: McpServerProcess
) -> None:
    """A call the server holds (until the test releases it) is outstanding while the same session's next call, a login
    request and its decision are all answered; it is answered after them, once released."""
    tools = {**TOOLS, "held_lookup": {}}
    async with (
        stack.http() as http,
        stack.coach() as coach,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{mcp.port}", timeout=60) as server,
    ):
        world = await new_world(http)
        desk = await create_login(http, mcp.url, ids("desk"), "org", tools=tools)
        other = await create_login(http, mcp.url, ids("other"), "org", tools=tools)
        session = await open_session(coach, http, world)
        assert (await grant(http, session, desk["login_id"])).status_code == 200
        turn, key = session.begin_turn(), uuid.uuid4().hex
        held = await turn.send(
            "studio_call_connection_tool",
            {"connection_id": desk["login_id"], "tool": "held_lookup", "arguments": {"key": key}},
        )
        answered = coach.expect_result(held.tool_call_id)
        assert (await server.get(f"/entered/{key}")).status_code == 200  # the server holds the call now

        assert "A-5512" in evidence(await read(turn, desk["login_id"], "list_orders", customer="c-1001"))
        asked = await turn.call(
            "studio_request_connection_access", {"connection_id": other["login_id"], "reason": "read orders"}
        )
        assert asked.ok, asked
        seq, sid = turn.calls[asked.tool_call_id].seq, session.session_id

        async def listed() -> bool:
            body = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()
            return seq in [item["seq"] for item in body["items"]]

        await wait_for(listed)
        decided = await http.post(f"/api/studio/sessions/{sid}/logins/{seq}", json={"decision": "grant"})
        assert decided.status_code == 200, decided.text
        assert not answered.done()  # all of that while the held call was still outstanding

        assert (await server.post(f"/release/{key}")).status_code == 200
        assert f"released {key}" in evidence(await turn.result(held, timeout=30))
