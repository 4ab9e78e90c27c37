"""Logins and their reach: what a login is, which sessions reach it, what a login request binds, and its catalog.

A login is a connection to an external service: its MCP server, the account it acts as, whether it is connected,
its stored credentials (never shown), whether its connector is verified, and its tool manifest. It lives at one
scope: the platform (every organisation), an organisation, a guild, or an agent.

A session reaches a login of the platform, of its organisation, of its source guild, or of a live member agent of
its source guild; it reads through one only while it holds a grant of it (:mod:`connections.kinds.login`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assent.contracts import Id, Text
from assent.domain import Agent, Refusal, Session
from assent.hashing import content_hash
from connections_contract.messages import CatalogTool, ConnectionCatalog
from connections_contract.routes import ConnectionTool

from .policy import ToolSpec, Verdict, classify
from .servers import server_identity

Scope = Literal["platform", "org", "guild", "agent"]
Reason = Annotated[Text, StringConstraints(min_length=1, max_length=4000, strip_whitespace=True)]


@dataclass(frozen=True)
class Credentials:
    """A login's credentials, as sent to its MCP server: ``token`` as ``Authorization: Bearer <token>``, and
    ``headers`` as they are."""

    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def http_headers(self) -> dict[str, str]:
        sent = dict(self.headers)
        if self.token is not None:
            sent = {name: value for name, value in sent.items() if name.lower() != "authorization"}
            sent["Authorization"] = f"Bearer {self.token}"
        return sent

    def secrets(self) -> list[str]:
        """Every value a result must not show: the token, each header's value, and a header value's credentials
        after its scheme (``Basic <credentials>``)."""
        found = [self.token] if self.token else []
        for value in self.headers.values():
            found.append(value)
            scheme, _, rest = value.partition(" ")
            if scheme and rest.strip():
                found.append(rest.strip())
        return found


@dataclass(frozen=True)
class Login:
    """A login as the connections service holds it (its credentials apart: :class:`Credentials`)."""

    login_id: str
    org_id: str | None
    scope: Scope
    scope_id: str | None
    name: str
    server_url: str
    account: str
    connected: bool
    verified: bool
    tools: tuple[ToolSpec, ...]
    revision: int = 1
    has_credentials: bool = False
    updated_by: str = ""
    updated_at: datetime | None = None

    def tool(self, name: str) -> ToolSpec | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def verdict(self, tool: ToolSpec) -> Verdict:
        return classify(tool, verified=self.verified)

    @property
    def card_hash(self) -> str:
        """What a login request binds: the server and the account the card shows."""
        return content_hash(self.card_text)

    @property
    def card_text(self) -> str:
        return f"server: {self.server_url}\naccount: {self.account}\n"

    @property
    def label(self) -> str:
        return f"Read access to {self.name} ({self.server_url}, as {self.account})"

    def tool_notes(self) -> tuple[str, ...]:
        """What a grant opens and what stays shut, as a login request's card says it: the tools that become
        readable, and each that stays blocked with the read-only policy's reason."""
        verdicts = [(tool.name, self.verdict(tool)) for tool in self.tools]
        readable = [name for name, verdict in verdicts if verdict.readable]
        blocked = [f"{name} ({verdict.reason})" for name, verdict in verdicts if not verdict.readable]
        return (
            f"Becomes readable: {', '.join(readable) if readable else 'no tool'}",
            f"Stays blocked: {'; '.join(blocked) if blocked else 'no tool'}",
        )


def check_reach(session: Session, login: Login | None, agent: Agent | None, connection_id: str) -> Refusal | None:
    """The login must exist and be reachable from the session's source guild: a platform login, one of its
    organisation, of its source guild, or of a live member agent of it (``agent``: the login's agent, for an agent
    login). Another organisation's login is unknown, as a missing one is."""
    if login is None or (login.org_id is not None and login.org_id != session.org_id):
        return Refusal(404, "unknown_connection", f"connection {connection_id!r} does not exist in this organisation")
    if reaches(session, login, agent):
        return None
    where = "guild" if login.scope == "guild" else "agent"
    return Refusal(
        422,
        "connection_out_of_reach",
        f"connection {connection_id!r} belongs to the {where} {login.scope_id!r}, which is not the session's source "
        f"guild {session.source_guild_id!r} or one of its live members",
    )


def reaches(session: Session, login: Login, agent: Agent | None) -> bool:
    if login.scope == "platform":
        return True
    if login.org_id != session.org_id:
        return False
    if login.scope == "org":
        return True
    if login.scope == "guild":
        return login.scope_id == session.source_guild_id
    return (
        agent is not None
        and agent.agent_id == login.scope_id
        and agent.org_id == session.org_id
        and agent.live
        and agent.guild_id == session.source_guild_id
    )


def catalog(login: Login, *, deleted: bool = False) -> ConnectionCatalog:
    """The login's catalog now: each tool with whether it changes data by the read-only policy, and the identity of
    its server (:func:`server_identity`), which logins reaching one server share."""
    return ConnectionCatalog(
        connection_id=login.login_id,
        server=server_identity(login.server_url),
        org_id=login.org_id,
        scope=login.scope,
        scope_id=login.scope_id,
        name=login.name,
        revision=login.revision,
        deleted=deleted,
        tools=()
        if deleted
        else tuple(
            CatalogTool(
                name=tool.name,
                description=tool.description,
                changes_data=login.verdict(tool).changes_data,
                default_off=tool.default_off,
            )
            for tool in login.tools
        ),
    )


def tool_views(login: Login) -> list[ConnectionTool]:
    """The login's tools as the API shows them, each with the policy's word on it."""
    views = []
    for tool in login.tools:
        verdict = login.verdict(tool)
        views.append(
            ConnectionTool(
                name=tool.name,
                description=tool.description,
                read_only_hint=tool.read_only_hint,
                default_off=tool.default_off,
                mutating=tool.mutating,
                readable=verdict.readable,
                changes_data=verdict.changes_data,
                rule=verdict.rule,
            )
        )
    return views


def tool_names(tools: Iterable[ToolSpec]) -> str:
    return ", ".join(tool.name for tool in tools) or "none"


# --- the coach's tools ----------------------------------------------------------------------------------------


class RequestAccess(BaseModel):
    """Arguments of ``studio_request_connection_access(connection_id, reason)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    connection_id: Id
    reason: Reason


class CallTool(BaseModel):
    """Arguments of ``studio_call_connection_tool(connection_id, tool, arguments)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    connection_id: Id
    tool: Id
    arguments: dict[str, Any] = Field(default_factory=dict)
