"""Logins on the public API, owned by the connections service: the workspace's logins and a session's connections
(the Logins popover). A login request is decided like every request, at the gateway's ``POST …/logins/{seq}``
(:mod:`gateway.decisions`), which answers with the session's connections (``session_connections``, the login kind's
:attr:`~assent.kinds.Answer.route`).

A login is a connection to an external service (an MCP server, the account it acts as, its credentials, whether it
is connected, whether its connector is verified, its tool manifest) at the organisation's, a guild's or an agent's
scope; platform logins come from the deployment (``ASSENT_PLATFORM_LOGINS``) and are reachable from every
organisation. Credentials are write-only: no answer carries them (``has_credentials`` says whether there are some).

A session reaches every login of the platform, of its organisation, of its source guild and of the source guild's
live member agents; it reads through one only while it holds it: a login request granted (``POST …/logins/{seq}``)
or the login granted in the popover (``PUT …/connections/{connection_id}``), until it is revoked or the session
closes. Organisations are walls: another organisation's session or login answers 404, as a missing one does.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, PlainSerializer, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from assent.api.declare import Matching, PublicRoute, RequestModel
from assent.api.roles import Permission
from assent.http import Identifier, NoNul, Omissible, OneLine

OWNER = "connections"
SERVER_URL = r"^https?://(?:\[[0-9A-Fa-f:.]+\](?::[0-9]*)?|[^/?#@\[\]\x00-\x20\x7f]+)(?:[/?#][^\x00-\x20\x7f]*)?$"
"""An MCP server's address: http or https, a host (brackets only around an IPv6 one), and no user or password in
it (credentials go in ``credentials``, which no answer shows). The pattern is the whole check, as published: an
address it admits that no URL parser reads (a port past 65535, a bracketed host that is no address) is taken, named
as written (:func:`connections.domain.servers.server_identity`), and fails when called (``connection_failed``)."""


Label = Annotated[str, Field(min_length=1, max_length=200), OneLine]
ServerUrl = Annotated[
    str,
    Field(min_length=1, max_length=2000),
    Matching(SERVER_URL, "an http:// or https:// URL with a host and no user or password in it"),
]
TOOL_NAME = r"^[A-Za-z0-9_.\-]+$"
ToolName = Annotated[str, Field(min_length=1, max_length=128, pattern=TOOL_NAME)]
"""An MCP tool's name: 1 to 128 letters, digits, ``_``, ``-`` and ``.``."""
Secret = Annotated[str, Field(min_length=8, max_length=4096), OneLine]
"""A credential's value: at least 8 characters (a shorter one could not be told from ordinary text in a result,
which is redacted against every credential)."""
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z\-]+$"
HeaderName = Annotated[str, Field(min_length=1, max_length=100, pattern=HEADER_NAME)]


class ToolIn(RequestModel):
    """One tool of a login's manifest (named by its key in ``tools``): ``read_only_hint`` as its MCP server marks it
    (``readOnlyHint``), ``mutating`` as the connector's manifest lists it (null: the manifest does not list it),
    ``default_off``: off by default (never called through a login grant)."""

    description: Annotated[str, Field(max_length=2000), NoNul] = ""
    read_only_hint: bool = False
    default_off: bool = False
    mutating: bool | None = None


def keys_named(pattern: str, max_length: int) -> dict[str, Any]:
    """The JSON Schema of a mapping whose keys match ``pattern``: pydantic says a key's pattern as
    ``patternProperties`` alone, which lets any other key through; this says the keys' rule whole."""
    return {
        "propertyNames": {"minLength": 1, "maxLength": max_length, "pattern": pattern},
        "additionalProperties": False,
    }


Tools = Annotated[dict[ToolName, ToolIn], Field(max_length=500, json_schema_extra=keys_named(TOOL_NAME, 128))]
"""A login's manifest: each tool by its name, in the order given."""


class CredentialsIn(RequestModel):
    """What the login sends its MCP server: ``headers`` as they are, and ``token`` as ``Authorization: Bearer
    <token>`` (over an ``Authorization`` header). Stored encrypted; never shown again."""

    token: Secret | None = None
    headers: dict[HeaderName, Secret] = Field(
        default_factory=dict, max_length=20, json_schema_extra=keys_named(HEADER_NAME, 100)
    )


class _LoginFields(RequestModel):
    login_id: Identifier
    name: Label
    server_url: ServerUrl
    account: Label
    connected: bool = True
    verified: bool = False
    credentials: CredentialsIn | None = None
    tools: Tools = Field(default_factory=dict)


class OrgLoginIn(_LoginFields):
    """A new login of the caller's organisation."""

    scope: Literal["org"]


class ScopedLoginIn(_LoginFields):
    """A new login of a guild or an agent (``scope_id``) of the caller's organisation."""

    scope: Literal["guild", "agent"]
    scope_id: Identifier


LoginIn = Annotated[OrgLoginIn | ScopedLoginIn, Field(discriminator="scope")]
"""A new login: ``scope`` ``org``, or ``guild`` or ``agent`` with ``scope_id``."""


class PlatformLoginIn(_LoginFields):
    """A platform login, as the deployment lists it (``ASSENT_PLATFORM_LOGINS``, a JSON list of these)."""


class LoginPatch(RequestModel):
    """A change of a login: a field left out is kept; ``credentials`` replaces the stored ones (null: none any
    more); ``tools`` replaces the manifest."""

    name: Omissible[Label] = None
    server_url: Omissible[ServerUrl] = None
    account: Omissible[Label] = None
    connected: Omissible[bool] = None
    verified: Omissible[bool] = None
    credentials: CredentialsIn | None = None
    tools: Omissible[Tools] = None


LIFETIME = (
    r"^P(?!$)(?:([0-9]{1,6})W)?(?:([0-9]{1,6})D)?(?:T(?=[0-9])(?:([0-9]{1,6})H)?(?:([0-9]{1,6})M)?(?:([0-9]{1,8})S)?)?$"
)
"""An ISO 8601 duration in weeks, days, hours, minutes and seconds (``PT30M``, ``PT8H``, ``P1D``). Years and months
are not taken: their length depends on the calendar (and ``P1M`` is a month, not a minute)."""
MAX_LIFETIME = timedelta(days=30)
"""The longest lifetime a grant may have; a session that needs a login longer asks again."""
LIFETIME_RULE = "an ISO 8601 duration as text (PT30M, PT8H, P1D), greater than zero and at most 30 days (P30D)"


def lifetime_of(text: str) -> timedelta:
    """The length of the lifetime ``text`` (:data:`LIFETIME`); ``ValueError`` saying why when it is not one, or is
    zero, or longer than :data:`MAX_LIFETIME`."""
    found = re.fullmatch(LIFETIME, text)
    if found is None:
        raise ValueError(f"must be {LIFETIME_RULE}, not {text!r}")
    weeks, days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    length = timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    if not timedelta(0) < length <= MAX_LIFETIME:
        raise ValueError(f"must be {LIFETIME_RULE}, not {text!r}")
    return length


class _LifetimeRule:
    """The check of a :data:`Lifetime`: a 422 that says the rule, and the pattern in the JSON Schema."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def text(value: Any) -> Any:
            if not isinstance(value, str):  # a number of seconds, say: the rule, not only "a string"
                raise PydanticCustomError(
                    "lifetime", "must be {rule}, not {value}", {"rule": LIFETIME_RULE, "value": value}
                )
            return value

        def check(value: str) -> str:
            try:
                lifetime_of(value)
            except ValueError as exc:
                raise PydanticCustomError("lifetime", "{why}", {"why": str(exc)}) from None
            return value

        checked = core_schema.no_info_after_validator_function(check, handler(source))
        return core_schema.no_info_before_validator_function(text, checked)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = LIFETIME
        json_schema["examples"] = ["PT30M", "PT8H", "P1D"]
        return json_schema


Lifetime = Annotated[str, Field(min_length=2, max_length=40), _LifetimeRule()]
"""How long a grant lasts (:data:`LIFETIME`, at most :data:`MAX_LIFETIME`): the session's calls through the login are
refused once it is over (``connection_grant_expired``). Left out: until the session closes."""


class LoginGrant(RequestModel):
    """What granting a login request takes besides the decision: ``lifetime``, an ISO 8601 duration as text
    (``PT30M``, ``PT8H``, ``P1D``; more than zero, at most 30 days) after which the grant lapses and the session's calls
    through the login are refused (the coach may ask again). Left out: the grant lasts until the session closes."""

    lifetime: Lifetime | None = None


class GrantIn(RequestModel):
    """Grant (true) or revoke (false) the login for the session; a grant may take a ``lifetime`` (an ISO 8601
    duration as text, ``PT8H``; more than zero, at most 30 days) after which it lapses. Left out: until the session
    closes. A login the session holds already keeps its grant as it is."""

    granted: bool
    lifetime: Lifetime | None = None


# --- answers --------------------------------------------------------------------------------------------------

Instant = Annotated[
    datetime,
    PlainSerializer(datetime.isoformat, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A moment, written as ISO 8601 with its offset (``+00:00``)."""


class ConnectionTool(BaseModel):
    """A tool of a login, with the read-only policy's word on it: whether the proxy calls it (``readable``), whether
    it changes data, and the rule that decided (``default_off``, ``manifest``, ``read_only_hint`` or ``verbs``)."""

    name: str
    description: str
    read_only_hint: bool
    default_off: bool
    mutating: bool | None
    readable: bool
    changes_data: bool
    rule: str


class Login(BaseModel):
    """A login; ``org_id`` null: a platform login. Its credentials are never shown."""

    login_id: str
    org_id: str | None
    scope: str
    scope_id: str | None
    name: str
    server_url: str
    account: str
    connected: bool
    verified: bool
    has_credentials: bool
    tools: list[ConnectionTool]
    revision: int
    updated_by: str
    updated_at: Instant | None


class LoginDeleted(BaseModel):
    login_id: str
    deleted: bool


class SessionConnection(BaseModel):
    """A login the session reaches, and whether the session holds it (``granted``; a revoked grant says who revoked
    it and when). ``expires_at`` is when a grant with a lifetime lapses (null: it lasts until the session closes); a
    grant past it is no longer ``granted``."""

    connection_id: str
    name: str
    scope: str
    scope_id: str | None
    server_url: str
    account: str
    connected: bool
    verified: bool
    tools: list[ConnectionTool]
    granted: bool
    granted_by: str | None
    granted_at: Instant | None
    revoked_by: str | None
    revoked_at: Instant | None
    expires_at: Instant | None


class SessionConnections(BaseModel):
    """Every login reachable from the session's source guild: the platform's, the organisation's, the guild's and its
    live members'."""

    session_id: str
    closed: bool
    connections: list[SessionConnection]


class StudioSession(BaseModel):
    """A session, with the logins it holds (its grants end when it closes)."""

    session_id: str
    org_id: str
    source_guild_id: str
    operator_user_id: str
    closed: bool
    granted_connection_ids: list[str]


# --- routes ---------------------------------------------------------------------------------------------------

LOGIN_404 = {404: "No such login in the caller's organisation"}
SESSION_404 = {404: "No such session in the caller's organisation"}
PLATFORM_403 = {403: "The role may not change the workspace, or the login is the platform's (set by the deployment)"}


def _route(
    method: Any, path: str, name: str, summary: str, permission: Permission, tag: str, **more: Any
) -> PublicRoute:
    return PublicRoute(OWNER, method, path, name, summary, permission, tag, **more)


LOGINS = (
    _route(
        "POST",
        "/logins",
        "create_login",
        "Create a login of the caller's organisation, a guild or an agent (its credentials are stored encrypted)",
        Permission.CHANGE_WORKSPACE,
        "logins",
        body=LoginIn,
        response=Login,
        status=201,
        errors={404: "No such guild or agent (scope_id) in the caller's organisation", 409: "The login exists"},
    ),
    _route(
        "GET",
        "/orgs/{org_id}/logins",
        "list_logins",
        "The organisation's logins (of every scope) and the platform's",
        Permission.READ,
        "logins",
        response=list[Login],
        errors={404: "No such org, or another organisation's"},
    ),
    _route(
        "GET",
        "/logins/{login_id}",
        "get_login",
        "A login, with the read-only policy's word on each of its tools",
        Permission.READ,
        "logins",
        response=Login,
        errors=LOGIN_404,
    ),
    _route(
        "PATCH",
        "/logins/{login_id}",
        "update_login",
        "Change a login: its name, server, account, credentials, whether it is connected or verified, its tools",
        Permission.CHANGE_WORKSPACE,
        "logins",
        body=LoginPatch,
        response=Login,
        errors={**LOGIN_404, **PLATFORM_403},
    ),
    _route(
        "DELETE",
        "/logins/{login_id}",
        "delete_login",
        "Delete a login; every session's grant of it ends",
        Permission.CHANGE_WORKSPACE,
        "logins",
        response=LoginDeleted,
        errors={**LOGIN_404, **PLATFORM_403},
    ),
)

SESSIONS = (
    _route(
        "GET",
        "/sessions/{session_id}/connections",
        "session_connections",
        "Every login reachable from the session's source guild, and whether the session holds it (the Logins popover)",
        Permission.READ,
        "studio",
        prefix="/api/studio",
        response=SessionConnections,
        errors=SESSION_404,
    ),
    _route(
        "PUT",
        "/sessions/{session_id}/connections/{connection_id}",
        "set_connection_grant",
        "Grant or revoke a login for the session; a grant also answers a waiting request of it",
        Permission.CHANGE_WORKSPACE,
        "studio",
        prefix="/api/studio",
        body=GrantIn,
        response=StudioSession,
        rules="a lifetime of zero or longer than 30 days (P30D), or a lifetime with a revoke",
        errors={
            404: "No such session, or no such login reachable from its source guild, in the caller's organisation",
            409: "The session is closed, or the login is not connected (granting)",
        },
    ),
)

ROUTES: tuple[PublicRoute, ...] = (*LOGINS, *SESSIONS)
"""The connections service's public routes."""
