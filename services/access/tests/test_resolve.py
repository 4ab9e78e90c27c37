"""The effective access of an agent, resolved across the organisation, the guild and the agent: table-driven."""

from __future__ import annotations

import pytest

from access.domain.access import (
    Access,
    Binding,
    CatalogTool,
    Change,
    Connection,
    NativeTool,
    changed_bindings,
    given_back_changing_data,
    resolve,
    wanted_changes,
    widens,
)
from assent.domain import Refusal

NATIVES = (NativeTool("search", "Search", False, True), NativeTool("mail", "Mail", True, False))
DESK = Connection(
    "c1", "Desk", (CatalogTool("list_orders", False), CatalogTool("cancel_order", True, default_off=True))
)


def b(scope: str, kind: str, subject: str, on: bool) -> Binding:
    return Binding(scope, kind, subject, on)  # type: ignore[arg-type]  # the table's literals, spelled short


RESOLUTION = [
    # (what the case shows, bindings, (kind, subject), expected (on, usable, source))
    ("a native tool's default on", [], ("native_tool", "search"), (True, True, None)),
    ("a native tool's default off", [], ("native_tool", "mail"), (False, False, None)),
    (
        "the organisation's binding",
        [b("org", "native_tool", "mail", True)],
        ("native_tool", "mail"),
        (True, True, "org"),
    ),
    (
        "the guild over the organisation",
        [b("org", "native_tool", "mail", True), b("guild", "native_tool", "mail", False)],
        ("native_tool", "mail"),
        (False, False, "guild"),
    ),
    (
        "the agent over the guild and the organisation",
        [
            b("org", "native_tool", "search", False),
            b("guild", "native_tool", "search", False),
            b("agent", "native_tool", "search", True),
        ],
        ("native_tool", "search"),
        (True, True, "agent"),
    ),
    ("a connection is on by default", [], ("connection", "c1"), (True, True, None)),
    ("a connection tool's default", [], ("connection_tool", "c1/list_orders"), (True, True, None)),
    ("a tool the catalog marks off by default", [], ("connection_tool", "c1/cancel_order"), (False, False, None)),
    (
        "a tool on under a connection turned off cannot be used",
        [b("guild", "connection", "c1", False), b("agent", "connection_tool", "c1/list_orders", True)],
        ("connection_tool", "c1/list_orders"),
        (True, False, "agent"),
    ),
    (
        "a binding of another subject leaves it alone",
        [b("agent", "native_tool", "mail", True)],
        ("native_tool", "search"),
        (True, True, None),
    ),
]


@pytest.mark.parametrize(("bindings", "entry", "expected"), [c[1:] for c in RESOLUTION], ids=[c[0] for c in RESOLUTION])
def test_resolution(bindings: list[Binding], entry: tuple[str, str], expected: tuple[bool, bool, str | None]) -> None:
    line = resolve([DESK], bindings, NATIVES).line(*entry)  # type: ignore[arg-type]  # the table's literals
    assert line is not None
    assert (line.on, line.usable, line.source) == expected


def test_the_text_names_every_scope_so_a_shadowed_binding_moves_the_hash() -> None:
    agent_on = [b("agent", "native_tool", "mail", True)]
    before = resolve([DESK], agent_on, NATIVES)
    after = resolve([DESK], [*agent_on, b("guild", "native_tool", "mail", False)], NATIVES)
    assert before.line("native_tool", "mail") is not None and after.line("native_tool", "mail") is not None
    assert before.line("native_tool", "mail").usable and after.line("native_tool", "mail").usable  # type: ignore[union-attr]  # not None above
    assert before.hash != after.hash
    assert before.text() == (
        "Native tool search: on; by default (agent none, guild none, organisation none); reads only\n"
        "Native tool mail: on; the agent sets it itself (agent on, guild none, organisation none); changes data\n"
        "Connection Desk (c1): on; by default (agent none, guild none, organisation none)\n"
        "  Connection tool Desk / cancel_order: off; by default (agent none, guild none, organisation none); "
        "changes data\n"
        "  Connection tool Desk / list_orders: on; by default (agent none, guild none, organisation none); "
        "reads only\n"
    )
    fewer_tools = Connection("c1", "Desk", DESK.tools[:1])
    assert resolve([fewer_tools], agent_on, NATIVES).hash != before.hash


CHANGES = [
    # (what the case shows, held bindings, request (natives, connections, tools), expected changes or refusal code)
    ("on writes a binding", [], ({"mail": "on"}, {}, {}), [("native_tool", "mail", "on")]),
    ("on held by the agent is no change", [b("agent", "native_tool", "mail", True)], ({"mail": "on"}, {}, {}), []),
    (
        "on held by the guild only is a change (the agent's own binding)",
        [b("guild", "native_tool", "mail", True)],
        ({"mail": "on"}, {}, {}),
        [("native_tool", "mail", "on")],
    ),
    ("inherit without a binding is no change", [], ({"mail": "inherit"}, {}, {}), []),
    (
        "inherit deletes the agent's binding",
        [b("agent", "connection", "c1", False)],
        ({}, {"c1": "inherit"}, {}),
        [("connection", "c1", "inherit")],
    ),
    ("a tool by its name alone", [], ({}, {}, {"cancel_order": "on"}), [("connection_tool", "c1/cancel_order", "on")]),
    ("report_issue", [], ({"report_issue": "off"}, {}, {}), "not_a_binding"),
    ("a browser tool", [], ({"browser_navigate": "off"}, {}, {}), "not_a_binding"),
    ("a switch", [], ({"coding": "on"}, {}, {}), "agent_configuration"),
    ("an unknown native tool", [], ({"teleport": "on"}, {}, {}), "unknown_native_tool"),
    ("a connection the agent does not resolve", [], ({}, {"c9": "on"}, {}), "unknown_connection"),
    ("a tool not on its connections", [], ({}, {}, {"c1/drop_table": "on"}), "unknown_connection_tool"),
]


@pytest.mark.parametrize(("held", "request_", "expected"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_changes(
    held: list[Binding], request_: tuple[dict[str, str], ...], expected: list[tuple[str, str, str]] | str
) -> None:
    access = resolve([DESK], held, NATIVES)
    found = wanted_changes(access, held, "agent", *request_)  # type: ignore[arg-type]  # the table's literals
    if isinstance(expected, str):
        assert isinstance(found, Refusal) and found.code == expected, found
    else:
        assert not isinstance(found, Refusal)
        assert [(c.kind, c.subject, c.setting) for c in found] == expected


SHOP = Connection("c2", "Shop", (CatalogTool("list_orders", False), CatalogTool("refund", True)))

TIES = [
    # (what the case shows, held bindings, scope written, tools asked, expected changes or refusal code)
    ("a name on two connections with no binding", [], "agent", {"list_orders": "off"}, "ambiguous_connection_tool"),
    ("a name on one of them only", [], "agent", {"refund": "off"}, [("c2/refund", "off")]),
    (
        "the guild's binding keeps its connection",
        [b("guild", "connection_tool", "c2/list_orders", True)],
        "agent",
        {"list_orders": "off"},
        [("c2/list_orders", "off")],
    ),
    (
        "the organisation's binding keeps its connection",
        [b("org", "connection_tool", "c1/list_orders", False)],
        "agent",
        {"list_orders": "on"},
        [("c1/list_orders", "on")],
    ),
    (
        "the narrowest scope's binding wins",
        [b("org", "connection_tool", "c1/list_orders", False), b("guild", "connection_tool", "c2/list_orders", False)],
        "agent",
        {"list_orders": "on"},
        [("c2/list_orders", "on")],
    ),
    (
        "the agent's own binding is kept before a wider one",
        [b("agent", "connection_tool", "c1/list_orders", True), b("guild", "connection_tool", "c2/list_orders", True)],
        "agent",
        {"list_orders": "off"},
        [("c1/list_orders", "off")],
    ),
    (
        "inherit deletes the binding that names the connection",
        [b("agent", "connection_tool", "c2/list_orders", False)],
        "agent",
        {"list_orders": "inherit"},
        [("c2/list_orders", "inherit")],
    ),
    (
        "already held through the kept connection is no change",
        [b("guild", "connection_tool", "c1/list_orders", True), b("agent", "connection_tool", "c1/list_orders", True)],
        "agent",
        {"list_orders": "on"},
        [],
    ),
    (
        "a scope binding the name on both is ambiguous",
        [b("guild", "connection_tool", "c1/list_orders", True), b("guild", "connection_tool", "c2/list_orders", True)],
        "agent",
        {"list_orders": "off"},
        "ambiguous_connection_tool",
    ),
    (
        "a named connection is taken as named, whatever a binding ties",
        [b("guild", "connection_tool", "c2/list_orders", True)],
        "agent",
        {"c1/list_orders": "off"},
        [("c1/list_orders", "off")],
    ),
    (
        "a binding of another tool ties nothing",
        [b("guild", "connection_tool", "c2/refund", False)],
        "agent",
        {"list_orders": "off"},
        "ambiguous_connection_tool",
    ),
    (
        "a guild write keeps the organisation's connection",
        [b("org", "connection_tool", "c2/list_orders", False)],
        "guild",
        {"list_orders": "on"},
        [("c2/list_orders", "on")],
    ),
]


@pytest.mark.parametrize(("held", "scope", "tools", "expected"), [c[1:] for c in TIES], ids=[c[0] for c in TIES])
def test_a_tool_named_alone_keeps_the_connection_a_binding_already_names(
    held: list[Binding], scope: str, tools: dict[str, str], expected: list[tuple[str, str]] | str
) -> None:
    access = resolve([DESK, SHOP], held, NATIVES)
    found = wanted_changes(access, held, scope, {}, {}, tools)  # type: ignore[arg-type]  # the table's literals
    if isinstance(expected, str):
        assert isinstance(found, Refusal) and found.code == expected, found
        assert "'list_orders'" in found.message
    else:
        assert not isinstance(found, Refusal), found
        assert [(c.subject, c.setting) for c in found] == expected
        assert all(c.kind == "connection_tool" for c in found)


def test_widening_is_what_the_agent_cannot_use_today() -> None:
    held = [b("guild", "connection", "c1", False)]
    before = resolve([DESK], held, NATIVES)

    def after(*changes: Change) -> Access:
        return resolve([DESK], changed_bindings(held, "agent", changes), NATIVES)

    connection_on = after(Change("connection", "c1", "Desk", "on"))
    assert widens(before, connection_on)
    assert [x.subject for x in given_back_changing_data(before, connection_on)] == []
    both_on = after(Change("connection", "c1", "Desk", "on"), Change("connection_tool", "c1/cancel_order", "x", "on"))
    assert [x.subject for x in given_back_changing_data(before, both_on)] == ["c1/cancel_order"]
    narrowing = after(Change("native_tool", "search", "search", "off"))
    assert not widens(before, narrowing)
    tool_under_off_connection = after(Change("connection_tool", "c1/cancel_order", "x", "on"))
    assert not widens(before, tool_under_off_connection)


# --- server bindings: a connection's binding is its server's and names the login it goes through ---------------

S = "https://mcp.desk.example/mcp"
ORG_DESK = Connection("co", "Desk", (CatalogTool("list_orders", False),), S)
GUILD_DESK = Connection("cg", "Desk guild", (CatalogTool("list_orders", False),), S)
LONE = Connection("cl", "Lone", ())
CONNECTIONS = [ORG_DESK, GUILD_DESK, LONE]


def sb(scope: str, on: bool, connection_id: str | None, server: str = S) -> Binding:
    return Binding(scope, "connection", server, on, connection_id)  # type: ignore[arg-type]  # the table's literals


SERVERS = [
    # (what the case shows, bindings, expected (usable co, usable cg, usable cl), through, source of co's line)
    ("no binding: each login of the server is used", [], (True, True, True), None, None),
    (
        "the guild's binding names its login: the other is not used",
        [sb("guild", True, "cg")],
        (False, True, True),
        "cg",
        "guild",
    ),
    ("off at the organisation: every login of the server", [sb("org", False, "co")], (False, False, True), "co", "org"),
    (
        "the agent's own setting over the guild's, through the connection the agent's names",
        [sb("guild", False, "cg"), sb("agent", True, "co")],
        (True, False, True),
        "co",
        "agent",
    ),
    (
        "a binding naming a login the agent does not resolve: a wider binding's connection is taken",
        [sb("guild", False, "cg"), sb("agent", True, "c_gone")],
        (False, True, True),
        "cg",
        "agent",
    ),
    (
        "a binding naming no connection decides the setting only",
        [sb("org", False, None)],
        (False, False, True),
        None,
        "org",
    ),
    (
        "a binding of another server leaves it alone",
        [sb("org", False, "cx", "https://other.example")],
        (True, True, True),
        None,
        None,
    ),
    (
        "a login whose catalog names no server is its own server",
        [sb("guild", False, "cl", "cl")],
        (True, True, False),
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("bindings", "usable", "goes", "source"), [c[1:] for c in SERVERS], ids=[c[0] for c in SERVERS]
)
def test_a_connection_resolves_by_its_servers_bindings(
    bindings: list[Binding], usable: tuple[bool, bool, bool], goes: str | None, source: str | None
) -> None:
    access = resolve(CONNECTIONS, bindings, NATIVES)
    lines = [access.line("connection", c.connection_id) for c in CONNECTIONS]
    assert all(line is not None for line in lines)
    assert tuple(line.usable for line in lines) == usable  # type: ignore[union-attr]  # not None above
    co = access.line("connection", "co")
    assert co is not None and (co.server, co.through, co.source) == (S, goes, source)
    tool = access.line("connection_tool", "co/list_orders")
    assert tool is not None and tool.usable == usable[0]


def test_the_text_names_each_scopes_connection_so_a_binding_naming_another_moves_the_hash() -> None:
    through_guild = resolve(CONNECTIONS, [sb("guild", True, "cg")], NATIVES)
    through_org = resolve(CONNECTIONS, [sb("guild", True, "co")], NATIVES)
    assert through_guild.hash != through_org.hash
    assert [x.text() for x in through_guild.lines if x.kind == "connection"] == [
        f"Connection Desk (co) at {S}: off (its server goes through cg); inherited from the guild, through cg "
        "(agent none, guild on via cg, organisation none)",
        f"Connection Desk guild (cg) at {S}: on; inherited from the guild, through cg "
        "(agent none, guild on via cg, organisation none)",
        "Connection Lone (cl): on; by default (agent none, guild none, organisation none)",
    ]


WRITES = [
    # (what the case shows, held bindings, scope written, connections asked, expected (server, names, setting) or code)
    ("no binding names one: the connection asked", [], "agent", {"cg": "on"}, [(S, "cg", "on")]),
    ("the guild's binding names its login: kept", [sb("guild", True, "cg")], "agent", {"co": "on"}, [(S, "cg", "on")]),
    ("the organisation's: kept", [sb("org", False, "co")], "agent", {"cg": "on"}, [(S, "co", "on")]),
    (
        "the guild's over the organisation's",
        [sb("org", True, "cg"), sb("guild", True, "co")],
        "agent",
        {"cg": "off"},
        [(S, "co", "off")],
    ),
    (
        "the agent's own over the guild's",
        [sb("guild", True, "cg"), sb("agent", True, "co")],
        "agent",
        {"cg": "off"},
        [(S, "co", "off")],
    ),
    (
        "held through the kept connection is no change",
        [sb("guild", True, "cg"), sb("agent", True, "cg")],
        "agent",
        {"co": "on"},
        [],
    ),
    (
        "the agent's binding naming a login it does not resolve is rewritten to the guild's",
        [sb("guild", True, "cg"), sb("agent", True, "c_gone")],
        "agent",
        {"co": "on"},
        [(S, "cg", "on")],
    ),
    (
        "inherit deletes the binding, whichever it names",
        [sb("agent", False, "cg")],
        "agent",
        {"co": "inherit"},
        [(S, "cg", "inherit")],
    ),
    ("inherit without the scope's binding is no change", [sb("guild", True, "cg")], "agent", {"co": "inherit"}, []),
    ("two logins of one server asked alike: one binding", [], "agent", {"co": "on", "cg": "on"}, [(S, "co", "on")]),
    ("two logins of one server asked differently", [], "agent", {"co": "on", "cg": "off"}, "conflicting_connections"),
    (
        "a guild write keeps the organisation's connection",
        [sb("org", False, "co")],
        "guild",
        {"cg": "on"},
        [(S, "co", "on")],
    ),
    ("a guild write ignores an agent's binding", [sb("agent", True, "cg")], "guild", {"co": "off"}, [(S, "co", "off")]),
    ("a login without a server is bound by its id", [], "agent", {"cl": "off"}, [("cl", "cl", "off")]),
    ("a connection the agent does not resolve", [], "agent", {"c_gone": "on"}, "unknown_connection"),
]


@pytest.mark.parametrize(("held", "scope", "asked", "expected"), [c[1:] for c in WRITES], ids=[c[0] for c in WRITES])
def test_setting_a_connection_writes_its_servers_binding_keeping_the_connection_one_names(
    held: list[Binding], scope: str, asked: dict[str, str], expected: list[tuple[str, str, str]] | str
) -> None:
    access = resolve(CONNECTIONS, held, NATIVES)
    found = wanted_changes(access, held, scope, {}, asked, {})  # type: ignore[arg-type]  # the table's literals
    if isinstance(expected, str):
        assert isinstance(found, Refusal) and found.code == expected, found
        return
    assert not isinstance(found, Refusal), found
    assert [(c.subject, c.connection_id, c.setting) for c in found] == expected
    assert all(c.kind == "connection" for c in found)


def test_a_server_change_shows_the_connection_it_names_and_is_written_naming_it() -> None:
    held = [sb("guild", True, "cg")]
    found = wanted_changes(resolve(CONNECTIONS, held, NATIVES), held, "agent", {"mail": "on"}, {"co": "off"}, {})
    assert not isinstance(found, Refusal)
    assert [c.as_json() for c in found] == [
        {"kind": "native_tool", "id": "mail", "label": "mail", "setting": "on"},
        {"kind": "connection", "id": "cg", "label": f"Desk guild (cg) at {S}", "setting": "off"},
    ]
    assert [Change.from_stored(c.stored()) for c in found] == found
    written = changed_bindings(held, "agent", found)
    assert sb("agent", False, "cg") in written and sb("guild", True, "cg") in written
    after = resolve(CONNECTIONS, written, NATIVES)
    assert [after.line("connection", c).usable for c in ("co", "cg")] == [False, False]  # type: ignore[union-attr]
