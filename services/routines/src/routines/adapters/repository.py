"""Queries over the routines schema. A repository works inside the caller's transaction (a unit of work's)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import and_, delete, func, select, text, true, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from ..domain.routine import Provenance, Routine
from ..domain.timing import Timing
from . import tables as t

NOW_SQL = f"SELECT now() + coalesce((SELECT \"offset\" FROM {t.SCHEMA}.clock WHERE id = 1), interval '0')"
NOW = text(NOW_SQL)
NEXT_WAKE = text(
    f"SELECT extract(epoch FROM min(r.next_wake_at) - ({NOW_SQL}))::float8 FROM {t.SCHEMA}.routines r "
    f"LEFT JOIN {t.SCHEMA}.guild_switches g ON g.guild_id = r.guild_id "
    "WHERE NOT r.paused AND coalesce(g.routines_on, true)"
)


def _routine(row: Any) -> Routine:
    return Routine(
        schedule_id=row.schedule_id,
        org_id=row.org_id,
        guild_id=row.guild_id,
        agent_id=row.agent_id,
        description=row.description,
        instruction=row.instruction,
        timing=Timing(row.cron, row.window, row.timezone),
        paused=row.paused,
        next_wake_at=row.next_wake_at,
        version=row.version,
    )


class RoutinesRepository:
    """Routines, the guilds' switches and the scheduler's clock."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def now(self) -> datetime:
        """The scheduler's now: the database's clock plus the clock table's offset (none: zero)."""
        return cast(datetime, (await self.conn.execute(NOW)).scalar_one())

    async def get(self, schedule_id: str, *, for_update: bool = False) -> Routine | None:
        statement = select(t.routines).where(t.routines.c.schedule_id == schedule_id)
        if for_update:
            statement = statement.with_for_update()
        row = (await self.conn.execute(statement)).first()
        return None if row is None else _routine(row)

    async def of_agents(self, agent_ids: Sequence[str]) -> list[Routine]:
        statement = (
            select(t.routines)
            .where(t.routines.c.agent_id.in_(list(agent_ids)))
            .order_by(t.routines.c.agent_id, t.routines.c.schedule_id)
        )
        return [_routine(row) for row in await self.conn.execute(statement)]

    async def of_guild(self, guild_id: str) -> list[Routine]:
        statement = select(t.routines).where(t.routines.c.guild_id == guild_id).order_by(t.routines.c.schedule_id)
        return [_routine(row) for row in await self.conn.execute(statement)]

    async def routines_on(self, guild_id: str) -> bool:
        found = (
            await self.conn.execute(
                select(t.guild_switches.c.routines_on).where(t.guild_switches.c.guild_id == guild_id)
            )
        ).scalar_one_or_none()
        return True if found is None else bool(found)

    async def create(self, routine: Routine, by: Provenance) -> None:
        await self.conn.execute(insert(t.routines).values(**_values(routine, by)))

    async def replace(self, routine: Routine, by: Provenance) -> None:
        """Write ``routine`` over its row (its ``version`` is the new one)."""
        values = _values(routine, by)
        values["updated_at"] = func.now()
        await self.conn.execute(
            update(t.routines).where(t.routines.c.schedule_id == routine.schedule_id).values(**values)
        )

    async def delete(self, schedule_id: str) -> None:
        await self.conn.execute(delete(t.routines).where(t.routines.c.schedule_id == schedule_id))

    async def set_switch(self, guild_id: str, org_id: str, routines_on: bool, actor: str) -> None:
        statement = insert(t.guild_switches).values(
            guild_id=guild_id, org_id=org_id, routines_on=routines_on, updated_by=actor
        )
        statement = statement.on_conflict_do_update(
            index_elements=[t.guild_switches.c.guild_id],
            set_={"routines_on": routines_on, "updated_by": actor, "updated_at": func.now()},
        )
        await self.conn.execute(statement)

    async def plan(self, schedule_id: str, next_wake_at: datetime | None) -> None:
        """Move the planned wake-up only (a fire, or a guild's routines turned on): the hash does not move."""
        await self.conn.execute(
            update(t.routines).where(t.routines.c.schedule_id == schedule_id).values(next_wake_at=next_wake_at)
        )

    async def take_due(self, now: datetime, limit: int) -> list[Routine]:
        """Routines due at ``now`` (not paused, their guild's routines on), locked for this transaction; a routine
        another transaction holds is skipped (``FOR UPDATE SKIP LOCKED``), so replicas never take the same one."""
        r, g = t.routines, t.guild_switches
        statement = (
            select(r)
            .select_from(r.outerjoin(g, g.c.guild_id == r.c.guild_id))
            .where(
                and_(
                    r.c.paused.is_(False),
                    r.c.next_wake_at.is_not(None),
                    r.c.next_wake_at <= now,
                    func.coalesce(g.c.routines_on, true()),
                )
            )
            .order_by(r.c.next_wake_at)
            .limit(limit)
            .with_for_update(of=r, skip_locked=True)
        )
        return [_routine(row) for row in await self.conn.execute(statement)]

    async def seconds_to_next_wake(self) -> float | None:
        """Seconds from the scheduler's now to the earliest planned wake-up of a routine that may fire (not paused,
        its guild's routines on; negative when one is overdue); None when no routine may fire."""
        return cast("float | None", (await self.conn.execute(NEXT_WAKE)).scalar_one())


def _values(routine: Routine, by: Provenance) -> dict[str, Any]:
    """The row of ``routine``, written ``by`` someone, as the statement's values."""
    return {
        "schedule_id": routine.schedule_id,
        "org_id": routine.org_id,
        "guild_id": routine.guild_id,
        "agent_id": routine.agent_id,
        "description": routine.description,
        "instruction": routine.instruction,
        "cron": routine.timing.cron,
        "window": routine.timing.window,
        "timezone": routine.timing.timezone,
        "paused": routine.paused,
        "next_wake_at": routine.next_wake_at,
        "version": routine.version,
        "updated_by": by.actor,
        "studio_session_id": by.session_id,
        "studio_seq": by.seq,
    }
