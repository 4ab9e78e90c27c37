"""Routines against the real services: every refusal of ``studio_edit_routine``, staleness, the timing in words
across a daylight-saving change, the organisation's wall, and the scheduler firing each due time exactly once with
two replicas, one killed with SIGKILL, and every replica down for a while.

The scheduler's clock is the database's plus the clock table's offset (``routines.clock``): the tests move it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from assent.coach import CoachClient, CoachTurn
from assent.contracts import parse_message
from routines_contract import wakeups
from routines_contract.messages import RoutinesChanged, RoutineWokeUp
from routines_contract.topics import AGENT_ROUTINES_CHANGED, ROUTINES_WAKEUPS
from tests.conftest import OPERATOR, Endpoints, Stack, World, new_world, running_stack, wait_for


@pytest.fixture(scope="module")
async def rstack(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The module's one stack: its routines process is a scheduler replica the tests may kill and start again."""
    async with running_stack(
        endpoints, tmp_path_factory.mktemp("routines"), {"ASSENT_SCHEDULER_POLL_SECONDS": "0.2"}
    ) as running:
        yield running


async def set_clock(stack: Stack, at: datetime) -> None:
    """Make the scheduler's now ``at`` (and on from there)."""
    conn = await asyncpg.connect(stack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(
            'INSERT INTO routines.clock (id, "offset") VALUES (1, $1::timestamptz - now()) '
            'ON CONFLICT (id) DO UPDATE SET "offset" = excluded."offset"',
            at,
        )
    finally:
        await conn.close()


async def known(http: httpx.AsyncClient, agent_id: str) -> None:
    """Wait until the routines service's copy of the workspace holds the agent."""

    async def answered() -> bool:
        return (await http.get(f"/api/workspace/agents/{agent_id}/routines")).status_code == 200

    await wait_for(answered, timeout=30)


async def open_turn(coach: CoachClient, world: World) -> CoachTurn:
    session = await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)
    return session.begin_turn()


async def create(http: httpx.AsyncClient, agent_id: str, **body: Any) -> dict[str, Any]:
    fields = {"description": "Sweep", "instruction": "Answer the oldest thread.", **body}
    response = await http.post(f"/api/workspace/agents/{agent_id}/routines", json=fields)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def decide(http: httpx.AsyncClient, turn: CoachTurn, tool_call_id: str) -> httpx.Response:
    """Apply the request once the gateway shows it (it projects proposals as it reads them)."""
    url = f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[tool_call_id].seq}"

    async def shown() -> bool:
        return (await http.get(url)).status_code == 200

    await wait_for(shown, timeout=30)
    return await http.post(url, json={"decision": "apply"})


async def test_every_refusal_of_a_routine_request(rstack: Stack) -> None:
    async with rstack.http() as theirs:
        other = await new_world(theirs)
        await known(theirs, other.agent_id)
        foreign = await create(theirs, other.agent_id, cron="0 9 * * *")
    async with rstack.http() as http, rstack.coach() as coach:
        world = await new_world(http)
        await known(http, world.agent_id)
        await known(http, world.outsider_id)
        mine = await create(http, world.agent_id, window="every 2 hours between 09:00 and 17:00 on weekdays")
        outside = await create(http, world.outsider_id, cron="0 9 * * *")
        turn = await open_turn(coach, world)
        base = {"action": "create", "agent_id": world.agent_id, "description": "d", "instruction": "i", "reason": "r"}
        edit = {"action": "edit", "schedule_id": mine["schedule_id"], "reason": "r"}
        refused = [
            ({**base, "cron": "61 * * * *"}, 422, "bad_cron"),
            ({**base, "window": "every two hours"}, 422, "bad_window"),
            ({**base, "cron": "0 9 * * *", "window": "every 2 hours"}, 422, "two_timings"),
            (base, 422, "timing_required"),
            (
                {**edit, "description": "Sweep", "window": "every 2 hours between 09:00 and 17:00 on weekdays"},
                422,
                "no_change",
            ),
            ({**edit, "schedule_id": "rtn_nope"}, 404, "unknown_routine"),
            ({**base, "agent_id": world.outsider_id, "cron": "0 9 * * *"}, 422, "agent_out_of_reach"),
            ({**edit, "schedule_id": outside["schedule_id"], "paused": True}, 422, "agent_out_of_reach"),
            ({**edit, "schedule_id": foreign["schedule_id"], "paused": True}, 404, "unknown_routine"),
        ]
        for arguments, status, code in refused:
            result = await turn.call("studio_edit_routine", arguments)
            assert result.error is not None, (code, result)
            assert (result.error.status, result.error.code) == (status, code), result.error
        # The workspace API walls routines by organisation, and refuses the same timings.
        other_org = await http.get(f"/api/workspace/agents/{other.agent_id}/routines/{foreign['schedule_id']}")
        assert other_org.status_code == 404, other_org.text
        both = await http.post(
            f"/api/workspace/agents/{world.agent_id}/routines",
            json={"description": "d", "instruction": "i", "cron": "0 9 * * *", "window": "every 2 hours"},
        )
        assert (both.status_code, both.json()["code"]) == (422, "two_timings")
        listed = (await http.get(f"/api/workspace/agents/{world.agent_id}/routines")).json()
        assert [r["schedule_id"] for r in listed["routines"]] == [mine["schedule_id"]]


async def test_a_routine_proposal_applies_with_provenance_and_a_moved_one_is_409(rstack: Stack) -> None:
    async with rstack.http() as http, rstack.coach() as coach:
        world = await new_world(http)
        await known(http, world.agent_id)
        turn = await open_turn(coach, world)
        created = await turn.call(
            "studio_edit_routine",
            {
                "action": "create",
                "agent_id": world.agent_id,
                "cron": "0 9 * * 1-5",
                "timezone": "Europe/Paris",
                "description": "Morning sweep",
                "instruction": "Answer the oldest thread.",
                "paused": True,
                "reason": "Threads wait overnight.",
            },
        )
        assert created.ok and created.widget is not None and created.widget.kind == "routine", created.error
        applied = await decide(http, turn, created.tool_call_id)
        assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
        [routine] = (await http.get(f"/api/workspace/agents/{world.agent_id}/routines")).json()["routines"]
        assert (routine["paused"], routine["next_wake_at"], routine["description"]) == (True, None, "Morning sweep")

        listed = await turn.call("studio_list_routines", {"agent_id": world.agent_id})
        assert listed.output is not None and [r["schedule_id"] for r in listed.output["routines"]] == [
            routine["schedule_id"]
        ]
        edit = await turn.call(
            "studio_edit_routine",
            {"action": "edit", "schedule_id": routine["schedule_id"], "paused": False, "reason": "Start it."},
        )
        assert edit.ok, edit.error
        moved = await http.patch(
            f"/api/workspace/agents/{world.agent_id}/routines/{routine['schedule_id']}",
            json={"instruction": "Answer the newest thread."},
        )
        assert moved.status_code == 200, moved.text
        stale = await decide(http, turn, edit.tool_call_id)
        assert stale.status_code == 409, stale.text
        card = (
            await http.get(f"/api/studio/sessions/{turn.session.session_id}/edits/{turn.calls[edit.tool_call_id].seq}")
        ).json()
        assert card["stale"] is True and card["status"] == "pending"

        async def announced() -> list[tuple[Any, ...]]:
            """The guild's changes on its stream, once both the apply's and the direct edit's are there."""
            records = await rstack.records(
                rstack.topic(AGENT_ROUTINES_CHANGED.name), lambda r: r.key == world.guild_id.encode()
            )
            found = [parse_message(r.value or b"") for r in records]
            changes = [
                (c.change, c.actor, c.studio_session_id, c.studio_seq) for c in found if isinstance(c, RoutinesChanged)
            ]
            return changes if len(changes) >= 2 else []

        assert await wait_for(announced, timeout=30) == [
            ("created", OPERATOR, turn.session.session_id, turn.calls[created.tool_call_id].seq),
            ("edited", OPERATOR, None, None),
        ]


async def test_the_next_wakes_in_words_cross_a_daylight_saving_change(rstack: Stack) -> None:
    async with rstack.http() as http:
        world = await new_world(http)
        await known(http, world.agent_id)
        await set_clock(rstack, datetime(2027, 3, 26, 11, tzinfo=UTC))  # Friday 26 March 2027, noon in Paris
        routine = await create(http, world.agent_id, cron="30 2 * * *", timezone="Europe/Paris")
        assert routine["timing"] == "At 02:30 every day (cron 30 2 * * *), Europe/Paris"
        assert routine["next_wakes"] == [
            "Sat 27 Mar 2027 02:30 CET (UTC+01:00)",
            "Sun 28 Mar 2027 03:00 CEST (UTC+02:00)",  # 02:30 does not exist that night: cron fires at 03:00
            "Mon 29 Mar 2027 02:30 CEST (UTC+02:00)",
        ]
        off = await http.put(f"/api/workspace/guilds/{world.guild_id}/routines-switch", json={"routines_on": False})
        assert off.status_code == 200 and off.json()["routines_on"] is False, off.text
        assert off.json()["routines"][0]["next_wakes"] == []


def wakeups_of(records: list[Any], schedule_id: str) -> list[RoutineWokeUp]:
    found = [parse_message(r.value or b"") for r in records]
    return [m for m in found if isinstance(m, RoutineWokeUp) and m.schedule_id == schedule_id]


async def test_the_scheduler_fires_each_due_time_once_across_replicas_a_kill_and_a_restart(
    rstack: Stack, tmp_path: Path
) -> None:
    from assent_devstack.system import ServiceProcess, free_port

    first = rstack.system.routines
    second = ServiceProcess("routines", free_port(), rstack.system.env, tmp_path / "routines-2.log")
    env = {"ASSENT_SCHEDULER_POLL_SECONDS": "0.2"}
    async with rstack.http() as http, rstack.coach() as coach:
        world = await new_world(http)
        await known(http, world.agent_id)
        await set_clock(rstack, datetime(2027, 1, 4, 10, 30, tzinfo=UTC))
        routine = await create(http, world.agent_id, cron="0 * * * *", instruction="Sweep the queue.")
        schedule_id, url = (
            routine["schedule_id"],
            f"/api/workspace/agents/{world.agent_id}/routines/{routine['schedule_id']}",
        )
        assert routine["next_wake_at"] == "2027-01-04T11:00:00+00:00"

        seen: list[RoutineWokeUp] = []

        async def listen() -> None:
            async for wakeup in wakeups(coach, group_id=f"runtime-{uuid.uuid4().hex[:8]}", agent_ids={world.agent_id}):
                seen.append(wakeup)

        async def fired(due: str) -> bool:
            return any(w.due_at == due for w in seen)

        async def planned(at: str) -> bool:
            return bool((await http.get(url)).json()["next_wake_at"] == at)

        listener = asyncio.create_task(listen())
        await asyncio.to_thread(second.start, env)
        try:
            # Two replicas: the 11:00 wake-up fires once, carrying the instruction in force.
            await set_clock(rstack, datetime(2027, 1, 4, 11, 0, 1, tzinfo=UTC))
            await wait_for(lambda: fired("2027-01-04T11:00:00+00:00"), timeout=30)
            await wait_for(lambda: planned("2027-01-04T12:00:00+00:00"), timeout=30)
            changed = await http.patch(url, json={"instruction": "Sweep the queue, oldest first."})
            assert changed.status_code == 200, changed.text
            # One replica killed mid-run: the other fires 12:00.
            await asyncio.to_thread(first.kill, signal.SIGKILL)
            await set_clock(rstack, datetime(2027, 1, 4, 12, 0, 1, tzinfo=UTC))
            await wait_for(lambda: fired("2027-01-04T12:00:00+00:00"), timeout=30)
            # Every replica down across 13:00, 14:00 and 15:00: the one that comes back fires once, then plans 16:00.
            await asyncio.to_thread(second.stop)
            await set_clock(rstack, datetime(2027, 1, 4, 15, 30, tzinfo=UTC))
            await asyncio.to_thread(first.start, env)
            await wait_for(lambda: fired("2027-01-04T13:00:00+00:00"), timeout=60)
            await wait_for(lambda: planned("2027-01-04T16:00:00+00:00"), timeout=30)
            # Both replicas again: 16:00 fires once.
            await asyncio.to_thread(second.start, env)
            await set_clock(rstack, datetime(2027, 1, 4, 16, 0, 1, tzinfo=UTC))
            await wait_for(lambda: fired("2027-01-04T16:00:00+00:00"), timeout=30)
            await wait_for(lambda: planned("2027-01-04T17:00:00+00:00"), timeout=30)
            # Every outbox row is published before the topic is read to its end.
            conn = await asyncpg.connect(rstack.database_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                await wait_for(lambda: _empty(conn), timeout=30)
            finally:
                await conn.close()
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            await asyncio.to_thread(second.stop)
            if first.process is None or first.process.poll() is not None:
                await asyncio.to_thread(first.start, env)

        woke = wakeups_of(await rstack.records(rstack.topic(ROUTINES_WAKEUPS.name)), schedule_id)
        by_due: dict[str, set[str]] = {}
        for w in woke:
            by_due.setdefault(w.due_at, set()).add(str(w.id))
        assert {due: len(ids) for due, ids in by_due.items()} == {
            "2027-01-04T11:00:00+00:00": 1,
            "2027-01-04T12:00:00+00:00": 1,
            "2027-01-04T13:00:00+00:00": 1,
            "2027-01-04T16:00:00+00:00": 1,
        }
        instructions = {w.due_at: w.instruction for w in woke}
        assert instructions["2027-01-04T11:00:00+00:00"] == "Sweep the queue."
        assert instructions["2027-01-04T12:00:00+00:00"] == "Sweep the queue, oldest first."
        assert {w.agent_id for w in woke} == {world.agent_id}
        assert [w.due_at for w in seen] == sorted(by_due)  # the coach client yields each wake-up once, in order


async def _empty(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("SELECT count(*) = 0 FROM routines.outbox"))
