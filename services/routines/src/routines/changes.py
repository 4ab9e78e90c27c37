"""What every write of a routine does besides the row: plan its next wake-up, and announce the change on the
guild's stream (``agent.routines.changed``) in the same transaction (the outbox), and once it commits, wake this
process's scheduler to look at the new plan."""

from __future__ import annotations

from datetime import datetime

from assent.runtime.uow import UnitOfWork
from routines_contract.messages import RoutinesChanged
from routines_contract.topics import AGENT_ROUTINES_CHANGED

from .domain.routine import Provenance, Routine
from .domain.timing import Timing
from .scheduler import plans_changed


def planned(timing: Timing, paused: bool, now: datetime) -> datetime | None:
    """The next wake-up planned from ``now``: None while paused."""
    return None if paused else timing.next_after(now)


async def changed(
    uow: UnitOfWork,
    routine: Routine,
    change: str,
    next_wake: datetime | None,
    by: Provenance,
) -> None:
    uow.on_commit(plans_changed)
    await uow.emit(
        AGENT_ROUTINES_CHANGED,
        routine.guild_id,
        RoutinesChanged(
            org_id=routine.org_id,
            guild_id=routine.guild_id,
            change=change,
            agent_id=routine.agent_id,
            schedule_id=routine.schedule_id,
            version=routine.version,
            next_wake_at=None if next_wake is None else next_wake.isoformat(),
            actor=by.actor,
            studio_session_id=by.session_id,
            studio_seq=by.seq,
        ),
    )
