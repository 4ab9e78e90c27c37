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
    text,
)

from assent.runtime import service_metadata
from assent.runtime.tables import last_update, studio_request

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
    *last_update(),
    *studio_request(),
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
    *last_update(),
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
