"""The routines service's tables, all in its own schema ``routines``. The shared tables (inbox, outbox,
sessions, proposals and the read copy of the workspace directory) come from the shared history."""

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    Interval,
    Table,
    Text,
    func,
    text,
)

from assent.runtime import service_metadata

SCHEMA = "routines"
metadata, shared = service_metadata(SCHEMA)

routines = Table(
    "routines",
    metadata,
    Column("schedule_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("guild_id", Text, nullable=False),
    Column("agent_id", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("instruction", Text, nullable=False),
    Column("cron", Text),
    Column("window", Text),
    Column("timezone", Text, nullable=False),
    Column("paused", Boolean, nullable=False),
    Column("next_wake_at", DateTime(timezone=True)),
    Column("version", Integer, nullable=False),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("studio_session_id", Text),
    Column("studio_seq", Integer),
    CheckConstraint('(cron IS NULL) <> ("window" IS NULL)', name="routines_one_timing"),
    Index("routines_agent", "agent_id"),
    Index("routines_guild", "guild_id"),
    Index("routines_due", "next_wake_at", postgresql_where=text("NOT paused AND next_wake_at IS NOT NULL")),
)
"""Each routine with its planned next wake-up (None while paused); ``studio_*`` name the proposal that last wrote
it, if one did."""

guild_switches = Table(
    "guild_switches",
    metadata,
    Column("guild_id", Text, primary_key=True),
    Column("org_id", Text, nullable=False),
    Column("routines_on", Boolean, nullable=False),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""A guild's routines switch; a guild without a row has its routines on."""

clock = Table(
    "clock",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("offset", Interval, nullable=False),
    CheckConstraint("id = 1", name="clock_one_row"),
)
"""The scheduler's clock: the database's ``now()`` plus ``offset`` (a single row; none, or a zero offset, in
production). Tests move it forward to make routines due without waiting."""
