"""When the deployer's job workers look for queued jobs: at once while there are jobs, when this process makes one,
when the next queued job comes due (a retry), and otherwise every ``idle_seconds`` at most. The looks are scripted
(what each would find); the idle period is a minute, so a look that comes within seconds came for one of those
reasons."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deployer.adapters.artifacts import Artifacts
from deployer.adapters.git import GitRepos
from deployer.adapters.targets import Targets
from deployer.deploys import Deploys

IDLE_SECONDS = 60.0
SOON = 10.0  # how long a look that must come now may take on a busy machine; far below the idle period


class Scripted(Deploys):
    """Job workers whose looks return ``(ran a job, seconds to the next due job)`` from a script, and are counted."""

    def __init__(self, tmp: Path, *looks: tuple[bool, float | None], concurrency: int = 1) -> None:
        super().__init__(
            GitRepos(tmp / "repos"),
            Artifacts(tmp / "artifacts"),
            Targets(tmp / "live", {"kind": "local"}),
            {},
            concurrency=concurrency,
            poll_seconds=0,
            idle_seconds=IDLE_SECONDS,
        )
        self.script = list(looks)
        self.looks: asyncio.Queue[None] = asyncio.Queue()

    async def run_one(self, unit_of_work: Any) -> bool:
        self.looks.put_nowait(None)
        ran, self.next_job_in = self.script.pop(0) if self.script else (False, None)
        return ran

    async def next_look(self) -> None:
        await asyncio.wait_for(self.looks.get(), SOON)


async def run(deploys: Scripted) -> asyncio.Task[None]:
    async def workers() -> None:
        async with deploys.running(lambda: None):
            await asyncio.Event().wait()

    return asyncio.create_task(workers())


@pytest.mark.parametrize(
    "first",
    [
        pytest.param((False, 0.05), id="a retry comes due in 50 ms"),
        pytest.param((False, -1.0), id="a job is due already"),
        pytest.param((True, None), id="the look ran a job: there may be more"),
    ],
)
async def test_the_polling_worker_looks_again_before_its_idle_period(
    tmp_path: Path, first: tuple[bool, float | None]
) -> None:
    deploys = Scripted(tmp_path, first)
    task = await run(deploys)
    try:
        await deploys.next_look()
        await deploys.next_look()  # within SOON, where the idle period is a minute
        assert deploys.script == []
    finally:
        task.cancel()


async def test_a_job_made_in_this_process_wakes_the_workers(tmp_path: Path) -> None:
    deploys = Scripted(tmp_path, (False, None), (False, None), concurrency=2)  # two idle workers, nothing queued
    task = await run(deploys)
    try:
        await deploys.next_look()
        await deploys.next_look()
        deploys.wake.set()  # what a commit that queued a job does
        await deploys.next_look()
        await deploys.next_look()
    finally:
        task.cancel()
