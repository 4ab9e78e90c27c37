"""The routines service's side of its public routes (:mod:`routines_contract.routes`): each method the handler of the
declared route of its name.

Organisations are walls: for a person (``X-Assent-Org``), an agent, routine or guild of another organisation is
answered 404 with the words a missing one gets, and nothing is read or written.

Each write is recorded for the organisation's history in its transaction (:func:`assent.runtime.writes.record_write`),
with the routine's hash (what a routine request binds) before and after.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from assent.api import Caller, routes_of, serve
from assent.domain import Agent, Guild, Refusal
from assent.runtime import ServiceRuntime
from assent.runtime.uow import UnitOfWork
from assent.runtime.walls import NotFound, agent_in, guild_in
from assent.runtime.writes import record_write
from routines_contract import routes as answers
from routines_contract.routes import OWNER, RoutineIn, RoutinePatch, SwitchIn

from .adapters.repository import RoutinesRepository
from .changes import changed, planned
from .domain.routine import EditRoutine, Provenance, Routine, Wanted, wanted_routine
from .domain.timing import wake_in_words, zone
from .kinds.routine import listed, new_schedule_id
from .scheduler import plans_changed


class Refused(Exception):
    def __init__(self, status: int, detail: str, code: str | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.code = status, detail, code


def store(uow: UnitOfWork) -> RoutinesRepository:
    return uow.store(RoutinesRepository)


def shown(routine: Routine, routines_on: bool) -> answers.Routine:
    """A routine as the API shows it, with its next three wake-ups in words (none while paused or off)."""
    wakes = []
    if routine.next_wake_at is not None and routines_on:
        first = routine.next_wake_at.astimezone(zone(routine.timing.timezone))
        wakes = [first, *routine.timing.next_wakes(first, 2)]
    return answers.Routine(**listed(routine).model_dump(), next_wakes=[wake_in_words(w) for w in wakes])


class RoutineRoutes:
    """The handlers: one unit of work per call."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self.runtime = runtime

    async def routine_of(self, uow: UnitOfWork, agent_id: str, schedule_id: str, org: str | None) -> Routine:
        await agent_in(uow, agent_id, org)
        routine = await store(uow).get(schedule_id, for_update=True)
        if routine is None or routine.agent_id != agent_id:
            raise NotFound(f"agent {agent_id!r} has no routine {schedule_id!r}")
        return routine

    async def list_routines(self, caller: Caller, agent_id: str) -> answers.Routines:
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            on = await store(uow).routines_on(agent.guild_id or "")
            return answers.Routines(
                routines=[shown(r, on) for r in await store(uow).of_agents([agent_id])], routines_on=on
            )

    async def read_routine(self, caller: Caller, agent_id: str, schedule_id: str) -> answers.Routine:
        async with self.runtime.unit_of_work() as uow:
            routine = await self.routine_of(uow, agent_id, schedule_id, caller.org)
            return shown(routine, await store(uow).routines_on(routine.guild_id))

    async def create_routine(self, caller: Caller, agent_id: str, body: RoutineIn) -> answers.Routine:
        by = Provenance(caller.actor)
        async with self.runtime.unit_of_work() as uow:
            agent = await agent_in(uow, agent_id, caller.org)
            if agent.guild_id is None:
                raise Refused(409, f"agent {agent_id!r} is in no guild; a routine wakes an agent of a guild")
            wanted = _checked(wanted_routine(_args("create", agent_id=agent_id, **body.model_dump()), None))
            repo = store(uow)
            now = await repo.now()
            routine = _routine(new_schedule_id(), agent, wanted, planned(wanted.timing, wanted.paused, now), 1)
            await repo.create(routine, by)
            await changed(uow, routine, "created", routine.next_wake_at, by)
            await _record(uow, "create_routine", agent, "create", by.actor, None, routine)
            return shown(routine, await repo.routines_on(routine.guild_id))

    async def change_routine(
        self, caller: Caller, agent_id: str, schedule_id: str, body: RoutinePatch
    ) -> answers.Routine:
        by = Provenance(caller.actor)
        fields = body.model_dump(exclude_unset=True)
        expected = fields.pop("expected_version", None)
        async with self.runtime.unit_of_work() as uow:
            live = await self.routine_of(uow, agent_id, schedule_id, caller.org)
            if expected is not None and expected != live.version:
                raise Refused(409, f"the routine is at version {live.version}, not {expected}", "version_moved")
            wanted = _checked(wanted_routine(_args("edit", schedule_id=schedule_id, **fields), live))
            repo = store(uow)
            keeps = live.timing == wanted.timing and live.paused == wanted.paused
            next_wake = live.next_wake_at if keeps else planned(wanted.timing, wanted.paused, await repo.now())
            agent = await agent_in(uow, agent_id, caller.org)
            routine = _routine(schedule_id, agent, wanted, next_wake, live.version + 1, guild_id=live.guild_id)
            await repo.replace(routine, by)
            await changed(uow, routine, "edited", next_wake, by)
            await _record(uow, "change_routine", agent, "edit", by.actor, live, routine, ", ".join(sorted(fields)))
            return shown(routine, await repo.routines_on(routine.guild_id))

    async def delete_routine(self, caller: Caller, agent_id: str, schedule_id: str) -> answers.Routine:
        by = Provenance(caller.actor)
        async with self.runtime.unit_of_work() as uow:
            live = await self.routine_of(uow, agent_id, schedule_id, caller.org)
            await store(uow).delete(schedule_id)
            await changed(uow, live, "deleted", None, by)
            agent = await agent_in(uow, agent_id, caller.org)
            await _record(uow, "delete_routine", agent, "delete", by.actor, live, None)
            return shown(live, False)

    async def guild_routines(self, caller: Caller, guild_id: str) -> answers.GuildRoutines:
        async with self.runtime.unit_of_work() as uow:
            await guild_in(uow, guild_id, caller.org)
            on = await store(uow).routines_on(guild_id)
            return answers.GuildRoutines(
                guild_id=guild_id,
                routines_on=on,
                routines=[shown(r, on) for r in await store(uow).of_guild(guild_id)],
            )

    async def set_routines_switch(self, caller: Caller, guild_id: str, body: SwitchIn) -> answers.GuildRoutines:
        """Off: no routine of the guild fires. On again: each routine's next wake-up is planned from now (what was
        missed while off does not fire)."""
        actor = caller.actor
        async with self.runtime.unit_of_work() as uow:
            guild = await guild_in(uow, guild_id, caller.org)
            repo = store(uow)
            was_on = await repo.routines_on(guild_id)
            await repo.set_switch(guild_id, guild.org_id, body.routines_on, actor)
            routines = await repo.of_guild(guild_id)
            if body.routines_on and not was_on:
                now = await repo.now()
                for routine in routines:
                    await repo.plan(routine.schedule_id, planned(routine.timing, routine.paused, now))
                uow.on_commit(plans_changed)
                routines = await repo.of_guild(guild_id)
            if body.routines_on != was_on:
                await uow.emit(*_switch_event(guild, body.routines_on, actor))
                await record_write(
                    uow,
                    "set_routines_switch",
                    org_id=guild.org_id,
                    guild_id=guild_id,
                    kind="routine",
                    action="switch_on" if body.routines_on else "switch_off",
                    target=f"Routines of guild {guild.name}",
                    actor=actor,
                    detail=f"{len(routines)} routine{'s' if len(routines) != 1 else ''}",
                )
            return answers.GuildRoutines(
                guild_id=guild_id,
                routines_on=body.routines_on,
                routines=[shown(r, body.routines_on) for r in routines],
            )


async def _record(
    uow: UnitOfWork,
    route: str,
    agent: Agent,
    action: str,
    actor: str,
    before: Routine | None,
    after: Routine | None,
    detail: str | None = None,
) -> None:
    """Record a direct write of one of ``agent``'s routines (``before`` None: created; ``after`` None: deleted)."""
    routine = after or before
    assert routine is not None
    await record_write(
        uow,
        route,
        org_id=routine.org_id,
        guild_id=routine.guild_id or None,
        agent_id=agent.agent_id,
        kind="routine",
        action=action,
        target=f"Routine of {agent.name}: {routine.description}",
        actor=actor,
        hash_before=None if before is None else before.hash,
        hash_after=None if after is None else after.hash,
        detail=f"{routine.schedule_id}: {detail}" if detail else routine.schedule_id,
    )


def _switch_event(guild: Guild, on: bool, actor: str) -> tuple[Any, str, Any]:
    from routines_contract.messages import RoutinesChanged
    from routines_contract.topics import AGENT_ROUTINES_CHANGED

    return (
        AGENT_ROUTINES_CHANGED,
        guild.guild_id,
        RoutinesChanged(
            org_id=guild.org_id, guild_id=guild.guild_id, change="routines_on" if on else "routines_off", actor=actor
        ),
    )


def _args(action: str, **fields: Any) -> EditRoutine:
    return EditRoutine(action=action, reason="a direct change", **{k: v for k, v in fields.items() if v is not None})


def _checked(wanted: Wanted | Refusal) -> Wanted:
    if isinstance(wanted, Refusal):
        raise Refused(wanted.status, wanted.message, wanted.code)
    return wanted


def _routine(
    schedule_id: str, agent: Agent, wanted: Wanted, next_wake: Any, version: int, *, guild_id: str | None = None
) -> Routine:
    return Routine(
        schedule_id=schedule_id,
        org_id=agent.org_id,
        guild_id=guild_id or agent.guild_id or "",
        agent_id=agent.agent_id,
        description=wanted.description,
        instruction=wanted.instruction,
        timing=wanted.timing,
        paused=wanted.paused,
        next_wake_at=next_wake,
        version=version,
    )


def install(app: FastAPI, runtime: ServiceRuntime) -> None:
    """Serve the declared routes on the internal API, with their refusals as JSON errors."""
    router = runtime.internal_router()
    serve(router, routes_of(OWNER), RoutineRoutes(runtime))
    app.include_router(router)

    @app.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "code": exc.code}, status_code=exc.status)
