"""Messages on ``connections.catalogs``: each login's tool catalog, as the connections service now holds it.

Event-carried state transfer, as ``workspace.events``: each message carries a login's whole catalog and its
``revision`` (which grows by one per change of the login), so a reader (the access service, naming connection tools
and whether each changes data) keeps its copy by upserting and ignores a message older than what it holds. Keyed by
``connection_id``: one login's catalogs keep order.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict

from assent.contracts import Id, Message, Text

Scope = Literal["platform", "org", "guild", "agent"]
"""Where a login is reachable: every organisation (``platform``), its organisation, one guild, or one agent."""


class CatalogTool(BaseModel):
    """One tool listed on a login: whether it changes data, by the connections service's read-only policy (the one
    the proxy calls by), and whether it is off by default."""

    model_config = ConfigDict(frozen=True)

    name: Id
    description: Text = ""
    changes_data: bool
    default_off: bool = False


class ConnectionCatalog(Message):
    """A login was created or deleted, or what its catalog depends on changed (its tools, whether its connector is
    verified, its scope, its name or its server). ``org_id`` None: a platform login, reachable from every
    organisation; ``scope_id`` is the guild or agent of a guild or agent login.

    ``server`` is the identity of the login's MCP server: its URL normalized (lower-case scheme and host, the port
    unless it is the scheme's default, the path without a trailing slash; no user, query or fragment), so several
    logins reaching one server carry the same ``server``. A reader keys the server's bindings by it. None (the
    default) comes from a producer that predates the field; a reader then takes the login as its own server."""

    type: Literal["ConnectionCatalog"] = "ConnectionCatalog"
    v: Literal[1] = 1
    connection_id: Id
    org_id: Id | None
    scope: Scope
    scope_id: Id | None = None
    name: Text
    revision: int
    deleted: bool = False
    tools: tuple[CatalogTool, ...] = ()
    server: Text | None = None
