"""The access service against the real services, the connections service and its catalog included: every refusal
of ``studio_edit_access``, the widens flag both ways, the card's lines, staleness caused at each scope and by a
catalog change, inherit deleting the agent's binding, apply writing the agent's bindings only with provenance, and
organisations' walls on every route."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from access_contract.widget import AccessWidget
from assent.coach import CoachClient, CoachTurn
from connections_contract.messages import ConnectionCatalog
from tests.conftest import OPERATOR, Stack, World, as_admin_of, new_world, wait_for
from tests.test_memory_edits import wait_pending

W = "/api/workspace"
TOOLS: dict[str, dict[str, Any]] = {"list_orders": {"read_only_hint": True}, "refund_order": {}}
"""The manifest of the tests' logins: one tool that reads, one that changes data."""
SERVER = "https://mcp.example/mcp"
"""The tests' logins' server, unless one is given."""


async def create_login(
    http: httpx.AsyncClient, scope: str, scope_id: str | None = None, server_url: str = SERVER
) -> str:
    """A login (its catalog is the manifest's) of the organisation, a guild or an agent; its id."""
    login_id = f"desk_{uuid.uuid4().hex[:8]}"
    body = {
        "login_id": login_id,
        "name": "Desk",
        "scope": scope,
        **({"scope_id": scope_id} if scope_id is not None else {}),
        "server_url": server_url,
        "account": "support@acme.example",
        "tools": TOOLS,
    }
    response = await http.post(f"{W}/logins", json=body)  # the connections service's copy reads the owner's writes
    assert response.status_code == 201, response.text
    return login_id


async def access_of(http: httpx.AsyncClient, agent_id: str, *, until: Any = None) -> dict[str, Any]:
    """The agent's access once the access service knows the agent (and ``until(access)`` holds, when given)."""

    async def read() -> dict[str, Any] | None:
        response = await http.get(f"{W}/agents/{agent_id}/access")
        if response.status_code != 200:
            return None
        found = dict(response.json())
        return found if until is None or until(found) else None

    return dict(await wait_for(read, timeout=30))


def has(*ids: str) -> Any:
    return lambda access: {line["id"] for line in access["lines"]} >= set(ids)


async def setting_up(http: httpx.AsyncClient) -> tuple[World, str]:
    """A world whose organisation has a login the agent resolves, once the access service knows both."""
    world = await new_world(http)
    login = await create_login(http, "org")
    await access_of(http, world.agent_id, until=has(login, f"{login}/refund_order"))
    return world, login


async def open_turn(coach: CoachClient, world: World) -> CoachTurn:
    session = await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)
    return session.begin_turn()


def url(turn: CoachTurn, tool_call_id: str) -> str:
    return f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[tool_call_id].seq}"


async def card(http: httpx.AsyncClient, turn: CoachTurn, tool_call_id: str) -> dict[str, Any]:
    """The request as the gateway shows it, once it does (it projects proposals as it reads them)."""

    async def shown() -> dict[str, Any] | None:
        response = await http.get(url(turn, tool_call_id))
        return dict(response.json()) if response.status_code == 200 else None

    return dict(await wait_for(shown, timeout=30))


async def decide(http: httpx.AsyncClient, turn: CoachTurn, tool_call_id: str) -> httpx.Response:
    await card(http, turn, tool_call_id)
    return await http.post(url(turn, tool_call_id), json={"decision": "apply"})


async def test_every_refusal_and_every_routes_wall(stack: Stack) -> None:
    async with stack.http() as theirs:
        other, other_login = await setting_up(theirs)
    async with stack.http() as http, stack.coach() as coach:
        world, login = await setting_up(http)
        await access_of(http, world.outsider_id)
        sales_login = await create_login(http, "guild", f"{world.guild_id}_b")  # the outsider's guild's only
        await access_of(http, world.outsider_id, until=has(sales_login))
        turn = await open_turn(coach, world)
        base = {"agent_id": world.agent_id, "reason": "r"}
        refused = [
            ({**base, "native_tools": {"report_issue": "off"}}, 422, "not_a_binding"),
            ({**base, "native_tools": {"browser_click": "off"}}, 422, "not_a_binding"),
            ({**base, "native_tools": {"coding": "on"}}, 422, "agent_configuration"),
            ({**base, "native_tools": {"teleport": "on"}}, 422, "unknown_native_tool"),
            ({**base, "connections": {sales_login: "on"}}, 422, "unknown_connection"),
            ({**base, "connections": {other_login: "on"}}, 422, "unknown_connection"),
            ({**base, "connection_tools": {f"{login}/drop_table": "on"}}, 422, "unknown_connection_tool"),
            ({**base, "native_tools": {"web_search": "inherit"}}, 422, "no_change"),
            ({**base, "agent_id": world.outsider_id, "native_tools": {"web_search": "off"}}, 422, "agent_out_of_reach"),
            ({**base, "agent_id": other.agent_id, "native_tools": {"web_search": "off"}}, 404, "unknown_agent"),
        ]
        for arguments, status, code in refused:
            result = await turn.call("studio_edit_access", arguments)
            assert result.error is not None, (code, result)
            assert (result.error.status, result.error.code) == (status, code), result.error
        named = await turn.call("studio_edit_access", {**base, "connections": {sales_login: "on"}})
        assert named.error is not None and repr(sales_login) in named.error.message
        tool = await turn.call("studio_edit_access", {**base, "connection_tools": {f"{login}/drop_table": "on"}})
        assert tool.error is not None and repr(f"{login}/drop_table") in tool.error.message
        theirs_read = await turn.call("studio_read_access", {"agent_id": other.agent_id})
        assert theirs_read.error is not None and (theirs_read.error.status, theirs_read.error.code) == (
            404,
            "unknown_agent",
        )
        # The workspace routes refuse the same entries, and an organisation's binding is its admin's only.
        bad = await http.put(f"{W}/guilds/{world.guild_id}/access", json={"native_tools": {"report_issue": "off"}})
        assert (bad.status_code, bad.json()["code"]) == (422, "not_a_binding")
        as_admin_of(http, world.org_id, roles=("developer",))
        developer = await http.put(f"{W}/orgs/{world.org_id}/access", json={"native_tools": {"send_email": "on"}})
        assert developer.status_code == 403, developer.text
        as_admin_of(http, world.org_id)
        # Another organisation's agent, guild and organisation are missing ones, on every route.
        for path in (f"agents/{other.agent_id}", f"guilds/{other.guild_id}", f"orgs/{other.org_id}"):
            assert (await http.get(f"{W}/{path}/access")).status_code == 404, path
            put = await http.put(f"{W}/{path}/access", json={"native_tools": {"send_email": "on"}})
            assert put.status_code == 404, (path, put.text)
        async with stack.http() as theirs:
            as_admin_of(theirs, other.org_id)
            untouched = (await theirs.get(f"{W}/orgs/{other.org_id}/access")).json()
            assert untouched == {"scope": "org", "scope_id": other.org_id, "bindings": []}
        assert (await http.get(f"{W}/agents/{world.agent_id}/access")).json()["bindings"] == []


async def test_widening_the_card_and_apply_writing_the_agents_bindings_only(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world, login = await setting_up(http)
        guild = await http.put(f"{W}/guilds/{world.guild_id}/access", json={"connections": {login: "off"}})
        assert guild.status_code == 200, guild.text
        org = await http.put(f"{W}/orgs/{world.org_id}/access", json={"native_tools": {"web_search": "off"}})
        assert org.status_code == 200, org.text
        turn = await open_turn(coach, world)
        read = await turn.call("studio_read_access", {"agent_id": world.agent_id})
        live = await access_of(http, world.agent_id)
        assert read.output is not None and (read.output["hash"], read.output["text"]) == (live["hash"], live["text"])

        widening = await turn.call(
            "studio_edit_access", {"agent_id": world.agent_id, "connections": {login: "on"}, "reason": "Refunds."}
        )
        assert widening.widget is not None and widening.widget.widens is True, widening.error
        assert widening.widget.read_as(AccessWidget).edit is not None and widening.widget.read_as(
            AccessWidget
        ).edit.model_dump() == {
            "changes": ({"kind": "connection", "id": login, "label": f"Desk ({login}) at {SERVER}", "setting": "on"},),
            "widens": True,
        }
        narrowing = await turn.call(
            "studio_edit_access", {"agent_id": world.agent_id, "native_tools": {"fetch_url": "off"}, "reason": "No."}
        )
        assert narrowing.widget is not None and narrowing.widget.widens is False, narrowing.error
        assert (
            narrowing.widget.read_as(AccessWidget).edit is not None
            and narrowing.widget.read_as(AccessWidget).edit.widens is False
        )

        shown = await card(http, turn, widening.tool_call_id)
        # Both requests are projected by the gateway in their own time: the widening card being there says nothing
        # of the narrowing one.
        pending = await wait_pending(http, turn.session.session_id, 2)
        assert {item["seq"]: item["widens"] for item in pending["items"]} == {
            turn.calls[widening.tool_call_id].seq: True,
            turn.calls[narrowing.tool_call_id].seq: False,
        }
        [field] = shown["fields"]
        lines = field["proposal"].splitlines()
        assert lines[0] == (
            "Native tool web_search: off; inherited from the organisation (agent none, guild none, organisation off); "
            "reads only"
        )
        assert lines[-3:] == [
            f"Connection Desk ({login}) at {SERVER}: on; the agent sets it itself, through {login} "
            f"(agent on via {login}, guild off via {login}, organisation none)",
            "  Connection tool Desk / list_orders: on; by default (agent none, guild none, organisation none); "
            "reads only",
            "  Connection tool Desk / refund_order: on; by default (agent none, guild none, organisation none); "
            "changes data",
        ]
        assert shown["effects"] == [
            f"Takes effect from {shown['target']['label'].removeprefix('Access of ')}'s next run; a run already going "
            "keeps the access it started with.",
            "Only the agent's own bindings are written; the guild's and the organisation's stay as they are.",
            "Gives back connection tools that can change data: Desk / refund_order.",
            f"This widens what {shown['target']['label'].removeprefix('Access of ')} can use, so it is decided on its "
            "own: Apply all leaves it to its own apply.",
        ]

        applied = await decide(http, turn, widening.tool_call_id)
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
        after = await access_of(http, world.agent_id)
        seq = turn.calls[widening.tool_call_id].seq
        assert [(b["scope"], b["kind"], b["id"], b["setting"]) for b in after["bindings"]] == [
            ("agent", "connection", SERVER, "on"),
            ("guild", "connection", SERVER, "off"),
            ("org", "native_tool", "web_search", "off"),
        ]
        mine = after["bindings"][0]
        assert (mine["updated_by"], mine["studio_session_id"], mine["studio_seq"]) == (
            OPERATOR,
            turn.session.session_id,
            seq,
        )
        assert [b["studio_session_id"] for b in after["bindings"][1:]] == [None, None]
        # The apply moved the agent's access: the narrowing request read it before, so it is stale now.
        stale = await decide(http, turn, narrowing.tool_call_id)
        assert stale.status_code == 409, stale.text

        back = await turn.call(
            "studio_edit_access", {"agent_id": world.agent_id, "connections": {login: "inherit"}, "reason": "Undo."}
        )
        assert back.widget is not None and back.widget.widens is False, back.error
        assert back.widget.read_as(AccessWidget).edit is not None and [
            c.setting for c in back.widget.read_as(AccessWidget).edit.changes
        ] == ["inherit"]
        undone = await decide(http, turn, back.tool_call_id)
        assert undone.status_code == 200, undone.text
        final = await access_of(http, world.agent_id)
        assert [(b["scope"], b["id"]) for b in final["bindings"]] == [("guild", SERVER), ("org", "web_search")]
        assert final["hash"] == live["hash"]


async def test_a_tool_named_alone_keeps_the_connection_a_wider_binding_goes_through(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world, login = await setting_up(http)
        guild_login = await create_login(http, "guild", world.guild_id)  # a second login listing the same tools
        await access_of(http, world.agent_id, until=has(guild_login, f"{guild_login}/refund_order"))
        turn = await open_turn(coach, world)
        asked = {"agent_id": world.agent_id, "connection_tools": {"refund_order": "off"}, "reason": "No refunds."}
        ambiguous = await turn.call("studio_edit_access", asked)
        assert ambiguous.error is not None and ambiguous.error.code == "ambiguous_connection_tool", ambiguous
        assert "'refund_order'" in ambiguous.error.message

        guild = await http.put(
            f"{W}/guilds/{world.guild_id}/access", json={"connection_tools": {f"{guild_login}/refund_order": "on"}}
        )
        assert guild.status_code == 200, guild.text
        kept = await turn.call("studio_edit_access", asked)
        assert kept.widget is not None and kept.widget.read_as(AccessWidget).edit is not None, kept.error
        assert [c.model_dump() for c in kept.widget.read_as(AccessWidget).edit.changes] == [
            {
                "kind": "connection_tool",
                "id": f"{guild_login}/refund_order",
                "label": "Desk / refund_order",
                "setting": "off",
            }
        ]
        applied = await decide(http, turn, kept.tool_call_id)
        assert applied.status_code == 200, applied.text
        after = await access_of(http, world.agent_id)
        assert [(b["scope"], b["id"], b["setting"]) for b in after["bindings"]] == [
            ("agent", f"{guild_login}/refund_order", "off"),
            ("guild", f"{guild_login}/refund_order", "on"),
        ]
        usable = {line["id"]: line["usable"] for line in after["lines"]}
        assert (usable[f"{guild_login}/refund_order"], usable[f"{login}/refund_order"]) == (False, True)


async def test_a_binding_moved_at_each_scope_or_a_catalog_change_makes_apply_409(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world, login = await setting_up(http)
        turn = await open_turn(coach, world)

        async def patch_tools(tools: dict[str, dict[str, Any]]) -> None:
            """Change the login's manifest, then wait for the access service to show exactly its tools."""
            changed = await http.patch(f"{W}/logins/{login}", json={"tools": tools})
            assert changed.status_code == 200, changed.text
            want = {f"{login}/{name}" for name in tools}
            await access_of(
                http,
                world.agent_id,
                until=lambda access: (
                    {x["id"] for x in access["lines"] if x["connection_id"] == login} - {login} == want
                ),
            )

        async def put(path: str, body: dict[str, Any]) -> None:
            response = await http.put(f"{W}/{path}/access", json=body)
            assert response.status_code == 200, response.text

        send_email = {"native_tools": {"send_email": "on"}}
        movers = {
            "org": (send_email, lambda: put(f"orgs/{world.org_id}", {"native_tools": {"generate_image": "on"}})),
            "guild": (
                send_email,
                lambda: put(f"guilds/{world.guild_id}", {"connection_tools": {f"{login}/list_orders": "off"}}),
            ),
            "agent": (send_email, lambda: put(f"agents/{world.agent_id}", {"native_tools": {"fetch_url": "off"}})),
            "catalog adds a tool": (send_email, lambda: patch_tools({**TOOLS, "void_order": {}})),
            # The request names the very tool the catalog then drops.
            "catalog removes a tool": (
                {"connection_tools": {f"{login}/refund_order": "off"}},
                lambda: patch_tools({"list_orders": TOOLS["list_orders"], "void_order": {}}),
            ),
        }
        for where, (asked, move) in movers.items():
            result = await turn.call("studio_edit_access", {"agent_id": world.agent_id, **asked, "reason": "r"})
            assert result.ok, (where, result.error)
            await card(http, turn, result.tool_call_id)
            await move()
            stale = await decide(http, turn, result.tool_call_id)
            assert stale.status_code == 409, (where, stale.text)
            shown = await card(http, turn, result.tool_call_id)
            assert (shown["stale"], shown["status"]) == (True, "pending"), where
        bindings = (await access_of(http, world.agent_id))["bindings"]
        assert [(b["scope"], b["id"]) for b in bindings] == [
            ("agent", "fetch_url"),
            ("guild", f"{login}/list_orders"),
            ("org", "generate_image"),
        ]


async def test_a_connection_sets_its_servers_binding_keeping_the_login_the_guilds_binding_names(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        host = f"mcp-{uuid.uuid4().hex[:8]}.example"
        server = f"https://{host}/mcp"
        # Two logins of one server, written differently: the catalog names the server they share.
        org_login = await create_login(http, "org", server_url=f"https://{host.upper()}:443/mcp/")
        guild_login = await create_login(http, "guild", world.guild_id, server_url=server)
        await access_of(http, world.agent_id, until=has(org_login, guild_login))
        guild = await http.put(f"{W}/guilds/{world.guild_id}/access", json={"connections": {guild_login: "on"}})
        assert guild.status_code == 200, guild.text
        guild_bindings = guild.json()["bindings"]
        assert [(b["scope"], b["kind"], b["id"], b["connection_id"], b["setting"]) for b in guild_bindings] == [
            ("guild", "connection", server, guild_login, "on")
        ]
        before = await access_of(http, world.agent_id)
        lines = {x["id"]: x for x in before["lines"]}
        assert [(lines[c]["server"], lines[c]["through"], lines[c]["usable"]) for c in (org_login, guild_login)] == [
            (server, guild_login, False),
            (server, guild_login, True),
        ]

        turn = await open_turn(coach, world)
        asked = await turn.call(
            "studio_edit_access", {"agent_id": world.agent_id, "connections": {org_login: "on"}, "reason": "Desk."}
        )
        assert asked.widget is not None and asked.widget.read_as(AccessWidget).edit is not None, asked.error
        assert asked.widget.read_as(AccessWidget).edit.model_dump() == {
            "changes": (
                {
                    "kind": "connection",
                    "id": guild_login,
                    "label": f"Desk ({guild_login}) at {server}",
                    "setting": "on",
                },
            ),
            "widens": False,
        }
        applied = await decide(http, turn, asked.tool_call_id)
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text

        after = await access_of(http, world.agent_id)
        assert [(b["scope"], b["kind"], b["id"], b["connection_id"], b["setting"]) for b in after["bindings"]] == [
            ("agent", "connection", server, guild_login, "on"),
            ("guild", "connection", server, guild_login, "on"),
        ]
        mine = after["bindings"][0]
        assert (mine["updated_by"], mine["studio_session_id"], mine["studio_seq"]) == (
            OPERATOR,
            turn.session.session_id,
            turn.calls[asked.tool_call_id].seq,
        )
        assert (await http.get(f"{W}/guilds/{world.guild_id}/access")).json()["bindings"] == guild_bindings
        lines = {x["id"]: x for x in after["lines"]}
        assert [(lines[c]["source"], lines[c]["usable"]) for c in (org_login, guild_login)] == [
            ("agent", False),
            ("agent", True),
        ]


async def test_a_binding_of_a_login_whose_catalog_named_no_server_becomes_its_servers(stack: Stack) -> None:
    """A catalog from a producer that predates ``server``: the login is its own server until a catalog names one."""
    async with stack.http() as http:
        world = await new_world(http)
        login, server = f"legacy_{uuid.uuid4().hex[:8]}", f"https://mcp-{uuid.uuid4().hex[:8]}.example"
        producer = AIOKafkaProducer(bootstrap_servers=stack.endpoints.kafka)
        await producer.start()

        async def publish(revision: int, named: str | None) -> None:
            message = ConnectionCatalog(
                connection_id=login, org_id=world.org_id, scope="org", name="Old", revision=revision, server=named
            )
            await producer.send_and_wait(stack.topic("connections.catalogs"), message.to_bytes(), key=login.encode())

        def line(access: dict[str, Any]) -> dict[str, Any] | None:
            return next((x for x in access["lines"] if x["id"] == login), None)

        try:
            await publish(1, None)
            await access_of(http, world.agent_id, until=has(login))
            put = await http.put(f"{W}/guilds/{world.guild_id}/access", json={"connections": {login: "off"}})
            assert [(b["id"], b["connection_id"], b["setting"]) for b in put.json()["bindings"]] == [
                (login, login, "off")
            ]
            await publish(2, server)
            after = await access_of(http, world.agent_id, until=lambda a: (line(a) or {}).get("server") == server)
        finally:
            await producer.stop()
        assert [(b["scope"], b["id"], b["connection_id"], b["setting"]) for b in after["bindings"]] == [
            ("guild", server, login, "off")
        ]
        assert (line(after) or {})["usable"] is False
