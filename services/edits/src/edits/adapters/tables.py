"""The edits service's tables, all in its own schema ``edits``."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

from assent.inbox import inbox_table
from assent.outbox import outbox_table
from assent.sessions import sessions_table

SCHEMA = "edits"
metadata = MetaData(schema=SCHEMA)

orgs = Table(
    "orgs",
    metadata,
    Column("org_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

guilds = Table(
    "guilds",
    metadata,
    Column("guild_id", Text, primary_key=True),
    Column("org_id", Text, ForeignKey(orgs.c.org_id), nullable=False),
    Column("name", Text, nullable=False),
    Column("about", Text, nullable=False, server_default=""),
    Column("description", Text, nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

agents = Table(
    "agents",
    metadata,
    Column("agent_id", Text, primary_key=True),
    Column("org_id", Text, ForeignKey(orgs.c.org_id), nullable=False),
    Column("guild_id", Text, ForeignKey(guilds.c.guild_id), nullable=True),
    Column("name", Text, nullable=False),
    Column("live", Boolean, nullable=False, server_default="true"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

memory = Table(
    "memory",
    metadata,
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), primary_key=True),
    Column("content", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("hash", Text, nullable=False),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

memory_revisions = Table(
    "memory_revisions",
    metadata,
    Column("revision_id", BigInteger, Identity(), primary_key=True),
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), nullable=False),
    Column("version", Integer, nullable=False),
    Column("content", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("author_user_id", Text, nullable=False),
    Column("studio_session_id", Text),
    Column("studio_seq", Integer),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("agent_id", "version"),
)

file_changes = Table(
    "file_changes",
    metadata,
    Column("change_id", BigInteger, Identity(), primary_key=True),
    Column("agent_id", Text, ForeignKey(agents.c.agent_id), nullable=False),
    Column("path", Text, nullable=False),
    Column("revision_id", BigInteger, ForeignKey(memory_revisions.c.revision_id), nullable=False),
    Column("change", Text, nullable=False),
    Column("actor_user_id", Text, nullable=False),
    Column("tool_call_id", Text),
    Column("tool_name", Text),
    Column("studio_session_id", Text),
    Column("studio_seq", Integer),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

sessions = sessions_table(metadata)

requests = Table(
    "requests",
    metadata,
    Column("proposal_id", Text, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("tool_call_id", Text, nullable=False, unique=True),
    Column("tool", Text, nullable=False),
    Column("arguments", JSONB, nullable=False),
    Column("kind", Text, nullable=False),
    Column("agent_id", Text),
    Column("base_version", Integer),
    Column("base_hash", Text, nullable=False),
    Column("proposed_hash", Text, nullable=False),
    Column("edit_status", Text, nullable=False, server_default="pending"),
    Column("stale", Boolean, nullable=False, server_default="false"),
    Column("edit_resolved_at", DateTime(timezone=True)),
    Column("resolved_by_user_id", Text),
    Column("edit_version", Integer),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("session_id", "seq"),
)

inbox = inbox_table(metadata)
outbox = outbox_table(metadata)
