"""When the scheduler looks for due routines: at the next planned wake-up, when this process plans one, at once
after a full batch, and otherwise every ``poll_seconds`` at most. The looks are scripted (what each would find); the
poll period is a minute, so a look that comes within seconds came for one of those reasons."""

from __future__ import annotations

import asyncio

import pytest

from routines.scheduler import Scheduler, plans_changed

POLL_SECONDS = 60.0
SOON = 10.0  # how long a look that must come now may take on a busy machine; far below the poll period


class Scripted(Scheduler):
    """A scheduler whose looks return ``(fired, seconds to the next wake-up)`` from a script, and are counted."""

    def __init__(self, *looks: tuple[int, float | None]) -> None:
        async def no_relay() -> None:
            return None

        super().__init__(lambda: None, no_relay, poll_seconds=POLL_SECONDS, batch=10)  # type: ignore[arg-type,return-value]
        self.script = list(looks)
        self.looks: asyncio.Queue[None] = asyncio.Queue()

    async def tick(self) -> tuple[int, float | None]:
        self.looks.put_nowait(None)
        return self.script.pop(0) if self.script else (0, None)

    async def next_look(self) -> None:
        await asyncio.wait_for(self.looks.get(), SOON)


async def run(scheduler: Scripted) -> asyncio.Task[None]:
    async def loop() -> None:
        async with scheduler.running():
            await asyncio.Event().wait()

    return asyncio.create_task(loop())


@pytest.mark.parametrize(
    "first",
    [
        pytest.param((0, 0.05), id="the next planned wake-up is due in 50 ms"),
        pytest.param((0, -3.0), id="a wake-up is overdue"),
        pytest.param((10, None), id="the look fired a full batch: there may be more"),
    ],
)
async def test_the_scheduler_looks_again_before_its_poll_period(first: tuple[int, float | None]) -> None:
    scheduler = Scripted(first)
    task = await run(scheduler)
    try:
        await scheduler.next_look()
        await scheduler.next_look()  # within SOON, where the poll period is a minute
        assert scheduler.script == []
    finally:
        task.cancel()


async def test_a_plan_committed_in_this_process_wakes_its_schedulers() -> None:
    one, two = Scripted((0, None)), Scripted((0, 3600.0))  # nothing planned; the next wake-up in an hour
    tasks = [await run(one), await run(two)]
    try:
        await one.next_look()
        await two.next_look()
        await plans_changed()
        await one.next_look()
        await two.next_look()
    finally:
        for task in tasks:
            task.cancel()
