"""The scheduler: fires due routines onto ``routines.wakeups``, exactly once per due time.

A fire is one transaction: take the due routines ``FOR UPDATE SKIP LOCKED`` (not paused, their guild's routines
on), move each one's planned wake-up to its next one after now, and write its ``RoutineWokeUp`` to the outbox; the
runtime's relay publishes it after the commit. A replica that dies mid-fire rolls back (the row is due again for
any replica); one that commits has moved the plan, so no replica takes that due time again. Every replica runs the
loop; ``SKIP LOCKED`` shares the due rows between them. A wake-up missed while every replica was down fires once
when one comes back: the plan moves to the next wake-up after *now*, not after the missed one.

"Now" is the database's clock plus the clock table's offset (:meth:`RoutinesRepository.now`), one clock for every
replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from assent.runtime.uow import UnitOfWork
from routines_contract.messages import RoutineWokeUp
from routines_contract.topics import ROUTINES_WAKEUPS

from .adapters.repository import RoutinesRepository

log = logging.getLogger(__name__)


async def fire_due(uow: UnitOfWork, limit: int) -> int:
    """Fire up to ``limit`` due routines in ``uow``'s transaction; how many fired."""
    repo = uow.store(RoutinesRepository)
    now = await repo.now()
    due = await repo.take_due(now, limit)
    for routine in due:
        assert routine.next_wake_at is not None
        following = routine.timing.next_after(now)
        await repo.plan(routine.schedule_id, following)
        await uow.emit(
            ROUTINES_WAKEUPS,
            routine.agent_id,
            RoutineWokeUp(
                org_id=routine.org_id,
                guild_id=routine.guild_id,
                agent_id=routine.agent_id,
                schedule_id=routine.schedule_id,
                description=routine.description,
                instruction=routine.instruction,
                due_at=routine.next_wake_at.isoformat(),
                fired_at=now.isoformat(),
                next_wake_at=None if following is None else following.isoformat(),
            ),
        )
    return len(due)


async def plans_changed() -> None:
    """Wake this process's schedulers to look again: one of its transactions planned a wake-up and committed
    (``uow.on_commit(plans_changed)``)."""
    for scheduler in list(_RUNNING):
        scheduler._woken.set()


class Scheduler:
    """The loop every replica runs. It fires what is due, then sleeps until the next planned wake-up, or until
    this replica plans one (:func:`plans_changed`, after the commit), or for ``poll_seconds`` at most: the longest a
    wake-up planned by another replica, or a clock moved by hand, waits for this one. A fire that took a full
    batch is followed by another at once."""

    def __init__(
        self,
        unit_of_work: Callable[[], AbstractAsyncContextManager[UnitOfWork]],
        claim_relay: Callable[[], Awaitable[None]],
        *,
        poll_seconds: float,
        batch: int,
    ) -> None:
        self.unit_of_work = unit_of_work
        self.claim_relay = claim_relay
        self.poll_seconds = poll_seconds
        self.batch = batch
        self._woken = asyncio.Event()

    async def tick(self) -> tuple[int, float | None]:
        """Fire what is due; how many fired, and the seconds until the next planned wake-up (None: none)."""
        async with self.unit_of_work() as uow:
            fired = await fire_due(uow, self.batch)
            return fired, await uow.store(RoutinesRepository).seconds_to_next_wake()

    async def _loop(self) -> None:
        while True:
            self._woken.clear()  # before the look: a plan committed during it wakes the next sleep
            try:
                fired, until_next = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # an outage or a failed fire rolls back; the next tick tries again
                log.exception("routines: a fire failed; trying again")
                fired, until_next = 0, None
            if fired >= self.batch:
                continue
            sleep = self.poll_seconds if until_next is None else min(self.poll_seconds, max(until_next, 0.0))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), sleep)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # The outbox rows a fire writes name this process's relay, so it takes its lock before the first fire. It is
        # taken here, before the loop starts, not from the loop: the runtime claims it next, finds it held and goes
        # on, where two claims at once would each take a lock.
        await self.claim_relay()
        task = asyncio.create_task(self._loop(), name="routines-scheduler")
        _RUNNING.add(self)
        try:
            yield
        finally:
            _RUNNING.discard(self)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_RUNNING: weakref.WeakSet[Scheduler] = weakref.WeakSet()
"""This process's running schedulers."""
