"""What one agent may use, and the rules of ``studio_edit_access``: pure functions, no I/O.

An agent is offered native tools (:data:`NATIVE_TOOLS`, this service's own list), the connections (logins) it
resolves, and each connection's tools (from the catalog the connections service publishes). Each of them may be
bound ``on`` or ``off`` at three scopes: the organisation, the guild, and the agent. :func:`resolve` takes the
binding of the narrowest scope that has one (agent, then guild, then organisation) and otherwise the default: a
native tool's own, on for a connection, and for a connection tool on unless its catalog says it is off by default.
A connection tool can be used only while its connection is on too.

**Server bindings.** A connection's binding is its MCP server's: it is keyed by the server (the catalog's
``server``, the login's URL normalized; a login whose catalog names no server is its own server) and it names the
connection (login) through which the server is reached. Several logins, of the platform, the organisation, the
guild or the agent, may reach one server; one binding decides them all:

- on or off: the server's binding at the narrowest scope that has one; with none, on.
- through: the connection named by the server's binding at the narrowest scope whose named connection the agent
  resolves and reaches that server (a binding naming a login the agent no longer resolves names nothing here, and a
  wider one's connection is taken). With no such binding, none: each of the server's logins is used as it is.
- a connection is usable when its server is on and it is the connection the server goes through (or none is named);
  a login of a server that goes through another is off and says so.

Writing a connection (:func:`wanted_changes`, for a request's ``connections: {<connection id>: on|off|inherit}``)
writes the binding of that connection's server at the scope written:

- on and off write it naming the connection a server binding already names: the one the server goes through now
  across the scope written and every wider scope (the agent's own first, then the guild's, then the organisation's),
  and only when none names one, the connection the request named. So asking ``{<org login>: on}`` for an agent whose
  guild's binding of that server names the guild's login writes the agent's binding on, naming the guild's login.
- inherit deletes the scope's binding of the server, whichever connection it names.
- the scope's binding already saying that setting through that connection (or, for inherit, no binding) is not a
  change; two connections of one server asked for different settings in one request are refused.

Each change (``edit.changes``) is ``{kind: "connection", id, label, setting}`` with ``id`` the connection the
written (or deleted) binding names and ``label`` that connection's name, id and server.

A connection tool's binding names the connection it goes through (``<connection id>/<tool>``). When a request names
a tool alone and several of the agent's connections list it, :func:`wanted_changes` keeps the connection a binding of
that tool already goes through, so on and off write the agent's binding on the connection the guild or the
organisation chose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Refusal
from assent.hashing import content_hash

Scope = Literal["agent", "guild", "org"]
SCOPES: tuple[Scope, ...] = ("agent", "guild", "org")
"""Narrowest first: the order in which :func:`resolve` looks for a binding."""
SCOPE_WORDS: Mapping[Scope, str] = {"agent": "agent", "guild": "guild", "org": "organisation"}
SubjectKind = Literal["native_tool", "connection", "connection_tool"]
Setting = Literal["on", "off", "inherit"]


@dataclass(frozen=True)
class NativeTool:
    name: str
    label: str
    changes_data: bool
    default_on: bool


NATIVE_TOOLS: tuple[NativeTool, ...] = (
    NativeTool("web_search", "Search the web", changes_data=False, default_on=True),
    NativeTool("fetch_url", "Read a web page", changes_data=False, default_on=True),
    NativeTool("generate_image", "Make an image", changes_data=False, default_on=False),
    NativeTool("send_email", "Send an e-mail", changes_data=True, default_on=False),
    NativeTool("create_ticket", "Open a ticket in the guild's queue", changes_data=True, default_on=True),
)
"""The native tools an agent may be offered, in the order its access lists them: which change data, and whether
each is on when no scope binds it."""

NOT_BINDINGS: frozenset[str] = frozenset(
    {"report_issue", "browser_open", "browser_click", "browser_type", "browser_read", "browser_screenshot"}
)
"""Native tools every agent has that are not bound at any scope: ``report_issue`` and the browser tools (any
name starting ``browser_`` is one)."""

AGENT_SWITCHES: frozenset[str] = frozenset({"browser", "coding", "scripting", "memory"})
"""Switches of the agent's configuration, outside access requests."""


def not_a_binding(name: str) -> bool:
    return name in NOT_BINDINGS or name.startswith("browser_")


@dataclass(frozen=True)
class CatalogTool:
    name: str
    changes_data: bool
    default_off: bool = False


@dataclass(frozen=True)
class Connection:
    """A login the agent resolves, with the tools its catalog lists."""

    connection_id: str
    name: str
    tools: tuple[CatalogTool, ...] = ()
    server: str | None = None
    """The identity of its MCP server, from its catalog; None: the catalog names none."""

    @property
    def server_key(self) -> str:
        """What its server's bindings are keyed by: the server, or the login's own id when the catalog names none."""
        return self.server or self.connection_id

    @property
    def label(self) -> str:
        at = f" at {self.server}" if self.server else ""
        return f"{self.name} ({self.connection_id}){at}"


@dataclass(frozen=True)
class Binding:
    """One binding at one scope. ``subject``: a native tool's name, a connection's server
    (:attr:`Connection.server_key`), or ``<connection id>/<tool>``; ``connection_id``: for a server's binding, the
    connection it names."""

    scope: Scope
    kind: SubjectKind
    subject: str
    on: bool
    connection_id: str | None = None


def tool_subject(connection_id: str, tool: str) -> str:
    return f"{connection_id}/{tool}"


@dataclass(frozen=True)
class Line:
    """One entry of an agent's access: its own setting (``on``), where that came from (``source``: a scope, or None
    for the default), each scope's binding, and whether the agent can use it (a connection tool needs its
    connection on too; a connection, its server on and to go through it). A connection's line says its ``server``
    (:attr:`Connection.server_key`), the connection each scope's binding of it names (``via``) and the one the server
    goes through (``through``)."""

    kind: SubjectKind
    subject: str
    label: str
    on: bool
    usable: bool
    source: Scope | None
    bound: tuple[tuple[Scope, bool | None], ...]
    changes_data: bool
    connection_id: str | None = None
    server: str | None = None
    via: tuple[tuple[Scope, str | None], ...] = ()
    through: str | None = None

    def text(self) -> str:
        state = "on" if self.usable else "off"
        if self.on and not self.usable:
            if self.kind == "connection":
                state = f"off (its server goes through {self.through})"
            else:
                state = "off (its connection is off)"
        if self.source == "agent":
            whence = "the agent sets it itself"
        elif self.source is None:
            whence = "by default"
        else:
            whence = f"inherited from the {SCOPE_WORDS[self.source]}"
        named = dict(self.via)
        scopes = ", ".join(
            f"{SCOPE_WORDS[s]} {'none' if b is None else ('on' if b else 'off')}"
            + (f" via {named[s]}" if named.get(s) else "")
            for s, b in self.bound
        )
        data = ""
        if self.kind != "connection":
            data = "; changes data" if self.changes_data else "; reads only"
        elif self.through is not None:
            whence += f", through {self.through}"
        head = {"native_tool": "Native tool", "connection": "Connection", "connection_tool": "  Connection tool"}
        return f"{head[self.kind]} {self.label}: {state}; {whence} ({scopes}){data}"


@dataclass(frozen=True)
class Access:
    """An agent's resolved access: one line per native tool, then per connection followed by its tools."""

    lines: tuple[Line, ...]

    def text(self) -> str:
        return "".join(line.text() + "\n" for line in self.lines)

    @property
    def hash(self) -> str:
        return content_hash(self.text())

    def line(self, kind: SubjectKind, subject: str) -> Line | None:
        return next((x for x in self.lines if x.kind == kind and x.subject == subject), None)

    def usable(self) -> frozenset[tuple[SubjectKind, str]]:
        return frozenset((x.kind, x.subject) for x in self.lines if x.usable)


def _bound(bindings: Iterable[Binding], kind: SubjectKind, subject: str) -> tuple[tuple[Scope, bool | None], ...]:
    held = {b.scope: b.on for b in bindings if b.kind == kind and b.subject == subject}
    return tuple((scope, held.get(scope)) for scope in SCOPES)


def _setting(bound: tuple[tuple[Scope, bool | None], ...], default: bool) -> tuple[bool, Scope | None]:
    for scope, on in bound:
        if on is not None:
            return on, scope
    return default, None


def server_binding(bindings: Iterable[Binding], server: str, scope: Scope) -> Binding | None:
    return next((b for b in bindings if b.kind == "connection" and b.subject == server and b.scope == scope), None)


def through(connections: Sequence[Connection], bindings: Sequence[Binding], server: str) -> str | None:
    """The connection ``server`` goes through: the one named by its binding at the narrowest scope whose named
    connection is among ``connections`` and reaches that server; None when no binding names one."""
    reaching = {c.connection_id for c in connections if c.server_key == server}
    for scope in SCOPES:
        held = server_binding(bindings, server, scope)
        if held is not None and held.connection_id in reaching:
            return held.connection_id
    return None


def resolve(
    connections: Sequence[Connection], bindings: Sequence[Binding], natives: Sequence[NativeTool] = NATIVE_TOOLS
) -> Access:
    """The effective access of an agent that resolves ``connections`` and whose organisation, guild and own
    bindings are ``bindings``; a connection by its server's bindings (the module's "Server bindings"). Bindings of
    subjects the agent is not offered are ignored."""
    lines: list[Line] = []
    for native in natives:
        bound = _bound(bindings, "native_tool", native.name)
        on, source = _setting(bound, native.default_on)
        lines.append(Line("native_tool", native.name, native.name, on, on, source, bound, native.changes_data))
    for connection in sorted(connections, key=lambda c: (c.name, c.connection_id)):
        server = connection.server_key
        bound = _bound(bindings, "connection", server)
        via = tuple(
            (scope, getattr(server_binding(bindings, server, scope), "connection_id", None)) for scope in SCOPES
        )
        server_on, source = _setting(bound, True)
        goes = through(connections, bindings, server)
        conn_on = server_on and goes in (None, connection.connection_id)
        lines.append(
            Line(
                "connection",
                connection.connection_id,
                connection.label,
                server_on,
                conn_on,
                source,
                bound,
                False,
                server=server,
                via=via,
                through=goes,
            )
        )
        for tool in sorted(connection.tools, key=lambda t: t.name):
            subject = tool_subject(connection.connection_id, tool.name)
            bound = _bound(bindings, "connection_tool", subject)
            on, source = _setting(bound, not tool.default_off)
            lines.append(
                Line(
                    "connection_tool",
                    subject,
                    f"{connection.name} / {tool.name}",
                    on,
                    on and conn_on,
                    source,
                    bound,
                    tool.changes_data,
                    connection.connection_id,
                )
            )
    return Access(tuple(lines))


# --- studio_edit_access --------------------------------------------------------------------------------------

Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]
Settings = Annotated[dict[Id, Setting], Field(max_length=200)]


class ReadAccess(BaseModel):
    """Arguments of ``studio_read_access(agent_id)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id


class EditAccess(BaseModel):
    """Arguments of ``studio_edit_access(agent_id, native_tools?, connections?, connection_tools?, reason)``. A
    connection tool is named ``<connection id>/<tool>``, or by its tool name alone when only one of the agent's
    connections lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: Id
    native_tools: Settings = Field(default_factory=dict)
    connections: Settings = Field(default_factory=dict)
    connection_tools: Settings = Field(default_factory=dict)
    reason: Reason


@dataclass(frozen=True)
class Change:
    """One binding a request writes at its scope: ``setting`` on or off writes it, inherit deletes it. A server's
    binding (``kind`` connection) has the server as ``subject`` and names ``connection_id``."""

    kind: SubjectKind
    subject: str
    label: str
    setting: Setting
    connection_id: str | None = None

    def as_json(self) -> dict[str, str]:
        """As ``edit.changes`` shows it: a server's binding by the connection it names."""
        shown = self.connection_id if self.kind == "connection" and self.connection_id else self.subject
        return {"kind": self.kind, "id": shown, "label": self.label, "setting": self.setting}

    def stored(self) -> dict[str, str | None]:
        """As a proposal keeps it: :meth:`as_json` with the binding's own key."""
        return {**self.as_json(), "subject": self.subject, "connection_id": self.connection_id}

    @classmethod
    def from_stored(cls, data: Mapping[str, str | None]) -> Change:
        return cls(
            data["kind"],  # type: ignore[arg-type]  # written by stored()
            data.get("subject") or data["id"] or "",
            data["label"] or "",
            data["setting"],  # type: ignore[arg-type]  # written by stored()
            data.get("connection_id"),
        )


def refuse(code: str, message: str, status: int = 422) -> Refusal:
    return Refusal(status, code, message)


def _tied(named: Sequence[Line], bindings: Sequence[Binding]) -> Line | Refusal | None:
    """Of the connection tools ``named`` (one tool name on several of the agent's connections), the one a binding
    already ties the name to: the narrowest scope binding any of them decides (agent, then guild, then
    organisation); None when no scope binds any; a refusal when that scope binds the name on several."""
    by_subject = {line.subject: line for line in named}
    for scope in SCOPES:
        tied = sorted(
            {
                b.subject
                for b in bindings
                if b.scope == scope and b.kind == "connection_tool" and b.subject in by_subject
            }
        )
        if len(tied) == 1:
            return by_subject[tied[0]]
        if tied:
            key = named[0].subject.split("/", 1)[1]
            return refuse(
                "ambiguous_connection_tool",
                f"connection tool {key!r} is bound at the {SCOPE_WORDS[scope]} on {len(tied)} connections "
                f"({', '.join(tied)}); name it <connection id>/{key}",
            )
    return None


def _find_tool(access: Access, bindings: Sequence[Binding], key: str) -> Line | Refusal:
    """The connection tool ``key`` names: ``<connection id>/<tool>`` exactly, or a tool name alone. A name listed on
    one connection is that connection's; on several, the connection a binding of the name at some scope already goes
    through is kept (:func:`_tied`), and with none it is refused as ambiguous."""
    line = access.line("connection_tool", key)
    if line is not None:
        return line
    named = [x for x in access.lines if x.kind == "connection_tool" and x.subject.split("/", 1)[1] == key]
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        tied = _tied(named, bindings)
        if tied is not None:
            return tied
        return refuse(
            "ambiguous_connection_tool",
            f"connection tool {key!r} is listed on {len(named)} connections and no binding ties it to one; "
            f"name it <connection id>/{key}",
        )
    return refuse("unknown_connection_tool", f"connection tool {key!r} is not listed on any of the agent's connections")


def wanted_changes(
    access: Access,
    bindings: Sequence[Binding],
    scope: Scope,
    native_tools: Mapping[str, Setting],
    connections: Mapping[str, Setting],
    connection_tools: Mapping[str, Setting],
) -> list[Change] | Refusal:
    """The bindings a request writes at ``scope``, given the ``access`` it is checked against and the ``bindings``
    held now; a refusal names the first entry that cannot be bound. An entry whose binding at ``scope`` already says
    what it asks (on, off, or none for inherit) is not a change. A connection tool named alone, whose name several
    connections list, is written on the connection a binding of it already goes through (narrowest scope first):
    on and off keep the connection a wider binding chose, and inherit deletes the binding that names it."""
    held = {(b.kind, b.subject): b.on for b in bindings if b.scope == scope}
    entries: list[tuple[Line, Setting]] = []
    for name, setting in native_tools.items():
        if not_a_binding(name):
            return refuse("not_a_binding", f"{name!r} is not a binding: report_issue and the browser tools always stay")
        if name in AGENT_SWITCHES:
            return refuse(
                "agent_configuration",
                f"the {name} switch is the agent's configuration, outside access requests",
            )
        line = access.line("native_tool", name)
        if line is None:
            return refuse("unknown_native_tool", f"{name!r} is not a native tool")
        entries.append((line, setting))
    servers = _server_changes(access, bindings, scope, connections)
    if isinstance(servers, Refusal):
        return servers
    for key, setting in connection_tools.items():
        found = _find_tool(access, bindings, key)
        if isinstance(found, Refusal):
            return found
        entries.append((found, setting))
    changes: list[Change] = []
    for line, setting in entries:
        now = held.get((line.kind, line.subject))
        if (setting == "inherit" and now is None) or (setting != "inherit" and now == (setting == "on")):
            continue
        if any(c.kind == line.kind and c.subject == line.subject for c in changes):
            continue
        changes.append(Change(line.kind, line.subject, line.label, setting))
    natives_count = sum(1 for c in changes if c.kind == "native_tool")
    return changes[:natives_count] + servers + changes[natives_count:]


def _server_changes(
    access: Access, bindings: Sequence[Binding], scope: Scope, connections: Mapping[str, Setting]
) -> list[Change] | Refusal:
    """The server bindings ``connections`` write at ``scope`` (the module's "Server bindings"): on and off name the
    connection the server goes through across ``scope`` and the wider scopes, else the one asked; inherit deletes
    the scope's binding. ``access`` gives the connections reachable from ``scope``."""
    offered = [
        Connection(x.subject, x.label, (), x.server) for x in access.lines if x.kind == "connection" and x.server
    ]
    labels = {x.subject: x.label for x in access.lines if x.kind == "connection"}
    asked: dict[str, tuple[str, Setting]] = {}
    for connection_id, setting in connections.items():
        line = access.line("connection", connection_id)
        if line is None or line.server is None:
            return refuse("unknown_connection", f"connection {connection_id!r} is not one the agent resolves")
        first = asked.setdefault(line.server, (connection_id, setting))
        if first[1] != setting:
            return refuse(
                "conflicting_connections",
                f"connections {first[0]!r} and {connection_id!r} reach one server ({line.server}) and are asked "
                f"{first[1]} and {setting}; its binding takes one setting",
            )
    wider = [b for b in bindings if SCOPES.index(b.scope) >= SCOPES.index(scope)]
    changes: list[Change] = []
    for server, (connection_id, setting) in asked.items():
        held = server_binding(bindings, server, scope)
        if setting == "inherit":
            if held is None:
                continue
            named = held.connection_id or connection_id
            changes.append(Change("connection", server, labels.get(named, labels[connection_id]), setting, named))
            continue
        named = through(offered, wider, server) or connection_id
        if held is not None and held.on == (setting == "on") and held.connection_id == named:
            continue
        changes.append(Change("connection", server, labels[named], setting, named))
    return changes


def changed_bindings(bindings: Sequence[Binding], scope: Scope, changes: Sequence[Change]) -> list[Binding]:
    """``bindings`` with ``changes`` written at ``scope``."""
    touched = {(c.kind, c.subject) for c in changes}
    kept = [b for b in bindings if not (b.scope == scope and (b.kind, b.subject) in touched)]
    written = [
        Binding(scope, c.kind, c.subject, c.setting == "on", c.connection_id) for c in changes if c.setting != "inherit"
    ]
    return kept + written


def widens(before: Access, after: Access) -> bool:
    """Whether ``after`` lets the agent use a native tool, connection or connection tool ``before`` does not."""
    return bool(after.usable() - before.usable())


def given_back_changing_data(before: Access, after: Access) -> list[Line]:
    """The connection tools that can change data which ``after`` lets the agent use and ``before`` does not."""
    gained = after.usable() - before.usable()
    return [x for x in after.lines if x.kind == "connection_tool" and x.changes_data and (x.kind, x.subject) in gained]


def effects(agent_name: str, before: Access, after: Access) -> tuple[str, ...]:
    """What applying does, in the card's words."""
    said = [
        f"Takes effect from {agent_name}'s next run; a run already going keeps the access it started with.",
        "Only the agent's own bindings are written; the guild's and the organisation's stay as they are.",
    ]
    back = given_back_changing_data(before, after)
    if back:
        said.append("Gives back connection tools that can change data: " + ", ".join(x.label for x in back) + ".")
    if widens(before, after):
        said.append(
            f"This widens what {agent_name} can use, so it is decided on its own: Apply all leaves it to its own apply."
        )
    return tuple(said)
