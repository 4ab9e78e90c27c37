"""The access service's tables, all in its own schema ``access``. The shared tables (inbox, outbox,
sessions, proposals and the read copy of the workspace directory) come from the shared history."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    PrimaryKeyConstraint,
    Table,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from assent.runtime import service_metadata
from assent.runtime.tables import last_update, studio_request

SCHEMA = "access"
metadata, shared = service_metadata(SCHEMA)

bindings = Table(
    "bindings",
    metadata,
    Column("scope", Text, nullable=False),
    Column("scope_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("org_id", Text, nullable=False),
    Column("on", Boolean, nullable=False),
    Column("connection_id", Text),
    *last_update(),
    *studio_request(),
    PrimaryKeyConstraint("scope", "scope_id", "kind", "subject"),
    CheckConstraint("scope IN ('org', 'guild', 'agent')", name="bindings_scope"),
    CheckConstraint("kind IN ('native_tool', 'connection', 'connection_tool')", name="bindings_kind"),
)
"""Each binding (on or off) of a native tool, connection or connection tool at the organisation (``scope_id`` the
organisation's id), a guild or an agent; no row: nothing bound there. A connection's binding is its server's
(``subject`` the server, or a login's id when its catalog names no server) and ``connection_id`` names the login it
goes through. ``studio_*`` name the proposal that wrote it, if one did."""

binding_changes = Table(
    "binding_changes",
    metadata,
    Column("change_id", BigInteger, primary_key=True, autoincrement=True),
    Column("scope", Text, nullable=False),
    Column("scope_id", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("org_id", Text, nullable=False),
    Column("setting", Text, nullable=False),
    Column("connection_id", Text),
    Column("actor", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    *studio_request(),
    CheckConstraint("setting IN ('on', 'off', 'inherit')", name="binding_changes_setting"),
    Index("binding_changes_scope", "scope", "scope_id"),
)
"""Every write of a binding (``inherit``: its deletion), who made it, and the proposal behind it, if any."""

connections = Table(
    "connections",
    metadata,
    Column("connection_id", Text, primary_key=True),
    Column("org_id", Text),
    Column("scope", Text, nullable=False),
    Column("scope_id", Text),
    Column("name", Text, nullable=False),
    Column("server", Text),
    Column("revision", BigInteger, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("tools", JSONB, nullable=False),
    Index("connections_org", "org_id"),
)
"""The read copy of each login's catalog from ``connections.catalogs`` (the newest revision seen; a deleted login
keeps its row, marked, so an older message cannot bring it back). ``server``: the catalog's, None when it names
none."""
