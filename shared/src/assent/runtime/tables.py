"""The tables every service holds in its own schema, from one shared migration history.

- ``inbox`` and ``outbox``: effects once over at-least-once delivery (:mod:`assent.inbox`, :mod:`assent.outbox`);
- ``sessions``: the studio sessions, copied from ``studio.sessions`` and from the calls themselves;
- ``proposals``: the requests an owner recorded and how each was resolved (the seed's studio_messages tool rows);
- ``orgs``, ``guilds``, ``agents``: the workspace directory. The workspace owner writes them; every other
  service keeps them as a read copy from ``workspace.events``.

The provenance columns every service's own tables carry are declared here too, once: who changed a row last and
when (:func:`last_update`), and the Studio request a write carried out (:func:`studio_request`).

A service's own migrations come after these (``alembic_version_shared`` records this history's head).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from ..inbox import inbox_table
from ..outbox import outbox_table

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version_shared"
TABLE_NAMES = frozenset({"inbox", "outbox", "sessions", "proposals", "orgs", "guilds", "agents"})
"""The shared tables: a service's own history leaves them to this one."""


def last_update() -> tuple[Column[Any], Column[Any]]:
    """Who changed a row last, and when: ``updated_by`` (the person's user id, or the actor a service writes as) and
    ``updated_at`` (the database's now by default), both required. Fresh columns for each table (a column belongs
    to one): ``Table(..., *last_update())``."""
    return (
        Column("updated_by", Text, nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )


def studio_request() -> tuple[Column[Any], Column[Any]]:
    """The Studio request a write carried out, if one did: its session (``studio_session_id``) and that session's
    message (``studio_seq``), both null for a direct write. Fresh columns for each table:
    ``Table(..., *studio_request())``."""
    return Column("studio_session_id", Text), Column("studio_seq", Integer)


@dataclass(frozen=True)
class SharedTables:
    inbox: Table
    outbox: Table
    sessions: Table
    proposals: Table
    orgs: Table
    guilds: Table
    agents: Table


def shared_tables(metadata: MetaData) -> SharedTables:
    """Define the shared tables in ``metadata`` (whose schema is the service's own)."""
    sessions = Table(
        "sessions",
        metadata,
        Column("session_id", Text, primary_key=True),
        Column("org_id", Text, nullable=False),
        Column("source_guild_id", Text, nullable=False),
        Column("operator_user_id", Text, nullable=False),
        Column("source_guild_snapshot", JSONB),
        Column("opened_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("closed_at", DateTime(timezone=True)),
    )
    proposals = Table(
        "proposals",
        metadata,
        Column("proposal_id", Text, primary_key=True),
        Column("session_id", Text, nullable=False),
        Column("seq", Integer, nullable=False),
        Column("turn_id", Text, nullable=False),
        Column("step", Integer, nullable=False),
        Column("tool_call_id", Text, nullable=False, unique=True),
        Column("tool", Text, nullable=False),
        Column("kind", Text, nullable=False),
        Column("action", Text, nullable=False),
        Column("agent_id", Text),
        Column("target", JSONB, nullable=False),
        Column("base", JSONB, nullable=False),
        Column("proposed_hash", Text, nullable=False),
        Column("payload", JSONB, nullable=False),
        Column("result", JSONB, nullable=False),
        Column("status", Text, nullable=False, server_default="pending"),
        Column("stale", Boolean, nullable=False, server_default="false"),
        Column("resolved_by", Text),
        Column("resolved_at", DateTime(timezone=True)),
        Column("resolution", JSONB),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        UniqueConstraint("session_id", "seq"),
    )
    orgs = Table(
        "orgs",
        metadata,
        Column("org_id", Text, primary_key=True),
        Column("name", Text, nullable=False),
        Column("revision", Integer, nullable=False, server_default="1"),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    )
    guilds = Table(
        "guilds",
        metadata,
        Column("guild_id", Text, primary_key=True),
        Column("org_id", Text, nullable=False),
        Column("name", Text, nullable=False),
        Column("about", Text, nullable=False, server_default=""),
        Column("description", Text, nullable=False, server_default=""),
        Column("revision", Integer, nullable=False, server_default="1"),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Index("ix_guilds_org_id", "org_id"),
    )
    agents = Table(
        "agents",
        metadata,
        Column("agent_id", Text, primary_key=True),
        Column("org_id", Text, nullable=False),
        Column("guild_id", Text),
        Column("name", Text, nullable=False),
        Column("live", Boolean, nullable=False, server_default="true"),
        Column("task", Text, nullable=False, server_default=""),
        Column("owners", JSONB, nullable=False, server_default="[]"),
        Column("editors", JSONB, nullable=False, server_default="[]"),
        Column("revision", Integer, nullable=False, server_default="1"),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Index("ix_agents_org_id", "org_id"),
        Index("ix_agents_guild_id", "guild_id"),
    )
    return SharedTables(
        inbox=inbox_table(metadata),
        outbox=outbox_table(metadata),
        sessions=sessions,
        proposals=proposals,
        orgs=orgs,
        guilds=guilds,
        agents=agents,
    )
