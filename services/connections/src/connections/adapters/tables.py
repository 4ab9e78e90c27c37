"""The connections service's tables, all in its own schema ``connections``. The shared tables (inbox, outbox,
sessions, proposals and the read copy of the workspace directory) come from the shared history."""

from sqlalchemy import Boolean, Column, DateTime, Index, Integer, Table, Text, Uuid, func
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata
from assent.runtime.tables import last_update

SCHEMA = "connections"
metadata, shared = service_metadata(SCHEMA)

logins = Table(
    "logins",
    metadata,
    Column("login_id", Text, primary_key=True),
    Column("org_id", Text, nullable=True),
    Column("scope", Text, nullable=False),
    Column("scope_id", Text, nullable=True),
    Column("name", Text, nullable=False),
    Column("server_url", Text, nullable=False),
    Column("account", Text, nullable=False),
    Column("connected", Boolean, nullable=False),
    Column("verified", Boolean, nullable=False),
    Column("tools", JSONB, nullable=False),
    Column("credentials", Text, nullable=True),
    Column("key_id", Text, nullable=True),
    Column("revision", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    *last_update(),
    Index("logins_org_scope", "org_id", "scope", "scope_id"),
    Index("logins_key_id", "key_id"),
)
"""Every login. ``org_id`` null: a platform login (``ASSENT_PLATFORM_LOGINS``). ``credentials`` is a Fernet token
of the credentials' JSON, made with the key ``key_id`` names (a fingerprint, never the key); ``revision`` grows by
one per change, and is the catalog's."""

grants = Table(
    "grants",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("login_id", Text, primary_key=True),
    Column("granted_by", Text, nullable=False),
    Column("granted_at", DateTime(timezone=True), nullable=False),
    Column("via", Text, nullable=False),
    Column("seq", Integer, nullable=True),
    Column("revoked_by", Text, nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("expires_at", DateTime(timezone=True), nullable=True),
)
"""A session's grants of logins: one row per login it was ever granted; revoked ones keep who revoked them and when
(a call after a revoke says so). ``via`` is ``request`` (the login request at ``seq``) or ``popover``. ``expires_at``
is when a grant given with a lifetime lapses (null: it lasts until the session closes); a lapsed one stays, so a call
after it says when it lapsed, until the login is granted again. A session's rows go when it closes."""

calls = Table(
    "calls",
    metadata,
    Column("call_id", Uuid, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("call", JSONB, nullable=False),
    Column("trace", JSONB, nullable=False),
    Column("taken_until", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Proxied calls admitted and not answered yet: ``call`` is the ``ToolCall`` (``call_id``, its message id), ``trace``
the trace it goes on in. A runner takes one until ``taken_until`` (another replica takes it again past that), calls the
login's MCP server with no transaction open, and deletes the row in the transaction that answers the call."""
