"""One agent's access on the public API, owned by the access service: the agent's effective access, and the
bindings (on, off, or inherit to remove one) of native tools, connections and connection tools at the agent, its
guild and its organisation.

The native tools, the defaults and how the scopes resolve are ``services/access/src/access/domain/access.py``'s. A
connection tool is named ``<connection id>/<tool>``. A connection's binding is its server's: setting a connection
writes the binding of its server, naming the connection a binding of that server already names at the scope or a
wider one, else the connection given. Binding at the agent needs permission to change the agent
(admin or developer, or its owner or editor); at a guild, the admin or developer role; at the organisation, the
admin role. Another organisation's agent, guild or organisation answers 404.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from assent.api.declare import PublicRoute, RequestModel
from assent.api.roles import Permission
from assent.http import Identifier, Omissible

OWNER = "access"
TAG = "access"

Setting = Literal["on", "off", "inherit"]
Settings = Annotated[dict[Identifier, Setting], Field(max_length=200)]

BINDING_RULE = (
    "a native tool that is not on the service's list, report_issue or a browser tool, the browser, coding, scripting "
    "or memory switch, a connection not reachable from the scope, a tool not listed on its connection"
)


class BindingsIn(RequestModel):
    """Bindings to write at one scope: each entry on, off, or inherit (remove the binding there)."""

    native_tools: Omissible[Settings] = None
    connections: Omissible[Settings] = None
    connection_tools: Omissible[Settings] = None


class Answer(BaseModel):
    """An answer of the access routes: a value, built once and never changed."""

    model_config = ConfigDict(frozen=True)


class Binding(Answer):
    scope: Literal["org", "guild", "agent"]
    scope_id: str
    kind: Literal["native_tool", "connection", "connection_tool"]
    id: str
    """A native tool's name, a connection's server (a binding of a connection is its server's), or
    ``<connection id>/<tool>``."""
    setting: Literal["on", "off"]
    connection_id: str | None
    """A server's binding: the connection (login) it names, through which the server is reached."""
    updated_by: str
    studio_session_id: str | None
    """The Studio session whose applied proposal wrote it last; None: written directly."""
    studio_seq: int | None


class AccessLine(Answer):
    kind: Literal["native_tool", "connection", "connection_tool"]
    id: str
    label: str
    on: bool
    """Its own setting."""
    usable: bool
    """Whether the agent can use it (a connection tool needs its connection on too)."""
    source: Literal["org", "guild", "agent"] | None
    """The scope whose binding decides it; None: its default."""
    bindings: dict[str, Literal["on", "off"] | None]
    changes_data: bool | None
    connection_id: str | None
    server: str | None
    """A connection's server: what its bindings are keyed by."""
    through: str | None
    """A connection's: the connection its server goes through, as the narrowest binding naming one says."""


class AgentAccess(Answer):
    agent_id: str
    hash: str
    """The hash of ``text``: what an access proposal binds."""
    text: str
    lines: list[AccessLine]
    bindings: list[Binding]
    """The bindings of the organisation, the agent's guild and the agent."""


class ScopeBindings(Answer):
    scope: Literal["org", "guild"]
    scope_id: str
    bindings: list[Binding]


AGENT_404 = {404: "No such agent in the caller's organisation"}
GUILD_404 = {404: "No such guild in the caller's organisation"}
ORG_404 = {404: "No such org, or another organisation's"}


def _route(method: str, path: str, name: str, summary: str, permission: Permission, **more: object) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, TAG, **more)  # type: ignore[arg-type]


ROUTES = (
    _route(
        "GET",
        "/agents/{agent_id}/access",
        "agent_access",
        "The agent's effective access, and the bindings it is resolved from",
        Permission.READ,
        response=AgentAccess,
        errors=AGENT_404,
    ),
    _route(
        "PUT",
        "/agents/{agent_id}/access",
        "set_agent_access",
        "Bind native tools, connections and connection tools at the agent",
        Permission.CHANGE_AGENT,
        body=BindingsIn,
        response=AgentAccess,
        errors=AGENT_404,
        rules=BINDING_RULE,
    ),
    _route(
        "GET",
        "/guilds/{guild_id}/access",
        "guild_access",
        "The guild's bindings",
        Permission.READ,
        response=ScopeBindings,
        errors=GUILD_404,
    ),
    _route(
        "PUT",
        "/guilds/{guild_id}/access",
        "set_guild_access",
        "Bind native tools, connections and connection tools at the guild",
        Permission.CHANGE_WORKSPACE,
        body=BindingsIn,
        response=ScopeBindings,
        errors=GUILD_404,
        rules=BINDING_RULE,
    ),
    _route(
        "GET",
        "/orgs/{org_id}/access",
        "org_access",
        "The organisation's bindings",
        Permission.READ,
        response=ScopeBindings,
        errors=ORG_404,
    ),
    _route(
        "PUT",
        "/orgs/{org_id}/access",
        "set_org_access",
        "Bind native tools, connections and connection tools at the organisation (admins)",
        Permission.CHANGE_WORKSPACE,
        body=BindingsIn,
        response=ScopeBindings,
        errors={**ORG_404, 403: "Binding at the organisation needs the admin role"},
        rules=BINDING_RULE,
    ),
)
