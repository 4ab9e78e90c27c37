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
